/**
 * Keeping a failed attempt for inspection (`recovery.keepOnFailure`): when the run fails
 * because an attempt's training or its agent failed (a `fail` action naming the attempt
 * whose log it carries, `logTailOf`), that attempt's VM is not released with the others
 * as the run ends. The shell labels it `sterna-keep-until=<epoch seconds>` (the `keep`
 * action) and the reaper deletes it once that time has passed (workflows/reaper/decide.ts).
 *
 *   fail (logTailOf N, keepOnFailure) -> keep asked -> stopped (failed) -> releasing-all
 *     (N left out of the final releases) -> keep N -> kept | not kept (N released after all)
 *
 * Never on cancellation (the `stopped` event clears it), on a limit or budget failure (no
 * `logTailOf`), or when the run completes. Pure: reducers over a draft of the state.
 */
import type { RunSpec } from '../spec';
import type { Action, RunEvent } from './protocol';
import { Phase, record, TimelineKind, type RunState } from './state';

/** The label a kept resource carries: when the reaper may delete it, in epoch seconds (labels take no `:`). */
export const KEEP_UNTIL_LABEL = 'sterna-keep-until';

/** After a `fail` action: the attempt it names is to be kept, when the spec asks for it. */
export function askKeep(state: RunState, spec: RunSpec, action: Action, nowMs: number): void {
  const seconds = spec.recovery.keepOnFailure;
  if (action.kind !== 'fail' || action.logTailOf === undefined || seconds === undefined) return;
  const attempt = state.attempts[action.logTailOf - 1];
  if (!attempt || attempt.released || attempt.releasing) return;
  state.keep = { attempt: attempt.attempt, status: 'asked', untilMs: nowMs + seconds * 1000 };
}

/** The run stops: a cancelled run keeps nothing, even if its failure had asked for a keep. */
export function keepOnStop(state: RunState, phase: typeof Phase.Cancelled | typeof Phase.Failed): void {
  if (phase === Phase.Cancelled && state.keep?.status === 'asked') state.keep = undefined;
}

/** The attempt a stopping run keeps instead of releasing: left out of its final releases. */
export function keptAttempt(state: RunState): number | undefined {
  return state.keep && state.keep.status !== 'not-kept' ? state.keep.attempt : undefined;
}

/** The keep a stopping run still has to make (the shell's `keep` action), if any. */
export function finalKeep(state: RunState): Extract<Action, { kind: 'keep' }> | undefined {
  const keep = state.keep;
  if (keep?.status !== 'asked') return undefined;
  return { kind: 'keep', attempt: keep.attempt, untilMs: keep.untilMs };
}

/** Folds in what came of the keep. Kept: its cost ends now (the run no longer runs on it). */
export function absorbKept(state: RunState, event: Extract<RunEvent, { kind: 'kept' }>, nowMs: number): void {
  const keep = state.keep;
  if (!keep || keep.attempt !== event.attempt || keep.status !== 'asked') return;
  const attempt = state.attempts[event.attempt - 1];
  const where = { attempt: attempt.attempt, zone: attempt.offer.zone };
  if (event.outcome === 'kept') {
    keep.status = 'kept';
    keep.keptUntil = event.until ?? new Date(keep.untilMs).toISOString();
    if (event.reach && event.reach.length > 0) keep.reach = [...event.reach];
    if (attempt.startedAt && !attempt.stoppedAt) attempt.stoppedAt = new Date(nowMs).toISOString();
    const reach = keep.reach ? `; reach it with: ${keep.reach.join(' ; ')}` : '';
    record(state, nowMs, { ...where, kind: TimelineKind.Kept, event: `kept ${attempt.ref.name} for inspection until ${keep.keptUntil} (recovery.keepOnFailure); the reaper deletes it then${reach}` });
    return;
  }
  keep.status = 'not-kept';
  const said = { absent: 'it no longer exists', 'not-ours': 'it is not this run\'s', failed: `keeping failed: ${event.message ?? 'unknown error'}` } as const;
  keep.problem = said[event.outcome];
  record(state, nowMs, { ...where, kind: TimelineKind.Kept, event: `not kept: ${attempt.ref.name}: ${keep.problem}; released like the others` });
}
