/**
 * The run's last phase for each attempt, and for the run: an attempt ends (the endings
 * table says what follows), it is released, and the run completes, places again or fails.
 * Pure reducers over a draft of the state (machine.ts runs them).
 *
 *   attempt ends -> release (beside the next placement where nothing of it can still write)
 *     -> released -> complete | next offer | place again
 *   run stops (cancelled, failed) -> releasing-all -> released ... -> ended
 */
import type { CreateWatch } from '../activity-contract';
import { FailureType } from '../failures';
import type { RunSpec } from '../spec';
import { AGENT_EXITS, ENDINGS, Next, NOT_RUNNABLE_EXITS } from './endings';
import type { Action, RunEvent } from './protocol';
import { afterFailure, afterPreemption } from './recovery';
import { AttemptOutcome, Phase, record, TimelineKind, type Attempt, type Ending, type RunState } from './state';

/** A run that meets this many resources squatting on its names stops with ResourceConflict. */
export const MAX_CONFLICTS = 3;

type EndingEvent = Extract<RunEvent, { kind: 'released' | 'release-failed' | 'stopped' | 'releasing-all' | 'ended' }>;

/** This phase's events: releases heard back, and the run's own stop and end. */
export function absorbEndingEvent(state: RunState, event: EndingEvent, nowMs: number): void {
  switch (event.kind) {
    case 'released':
      return absorbRelease(state, event, nowMs);
    case 'release-failed': {
      const attempt = state.attempts[event.attempt - 1];
      attempt.releasing = undefined;
      record(state, nowMs, { kind: TimelineKind.Released, event: `release of ${attempt.ref.name} failed (${event.message}); asking again`, attempt: attempt.attempt, zone: attempt.offer.zone });
      return;
    }
    case 'stopped': {
      state.phase = event.phase;
      const live = state.attempts.find((a) => a.outcome === AttemptOutcome.Running);
      if (live) live.outcome = AttemptOutcome.Stopped;
      record(state, nowMs, { kind: TimelineKind.Stopped, event: event.phase === Phase.Cancelled ? 'cancelled' : `failed: ${event.reason}` });
      return;
    }
    case 'releasing-all':
      if (state.attempts.some((a) => !a.released)) state.phase = Phase.Releasing;
      return;
    case 'ended':
      state.phase = event.phase;
      return;
  }
}

/**
 * What this phase asks for next: an ended attempt is released before anything else
 * happens (where nothing of it can still write, beside the next placement); a completed
 * run completes once every resource is released. Undefined when nothing is to release.
 */
export function releaseStep(state: RunState): Action | undefined {
  const unreleased = state.attempts.find((a) => a.outcome !== AttemptOutcome.Running && !a.released && !a.releasing);
  if (unreleased) {
    const beside = ENDINGS[unreleased.outcome as Ending].releaseBeside;
    if (beside) unreleased.releasing = true;
    return { kind: 'release', attempt: unreleased.attempt, createMayBeInFlight: !unreleased.createSettled, ...(beside ? { beside } : {}) };
  }
  if (state.attempts[state.attempts.length - 1]?.outcome !== AttemptOutcome.Completed) return undefined;
  // Done only when every resource is released: until then, wait for the last `released`.
  if (releasesInFlight(state)) return { kind: 'wait' };
  state.phase = Phase.Completed;
  return { kind: 'complete' };
}

export function releasesInFlight(state: RunState): boolean {
  return state.attempts.some((a) => a.releasing && !a.released);
}

/** The attempts a stopping run still has to release, with whether each one's create may yet land. */
export function finalReleases(state: RunState): { attempt: number; createMayBeInFlight: boolean }[] {
  return state.attempts.filter((a) => !a.released).map((a) => ({ attempt: a.attempt, createMayBeInFlight: !a.createSettled }));
}

/** Records what release found; the ledger counts only a resource that was ours. */
export function absorbRelease(state: RunState, event: Extract<RunEvent, { kind: 'released' }>, nowMs: number): void {
  const attempt = state.attempts[event.attempt - 1];
  if (attempt.released) return;
  if (event.outcome === 'deleted') {
    attempt.startedAt ??= event.startedAt;
    attempt.stoppedAt = event.stoppedAt ?? (attempt.startedAt ? new Date(nowMs).toISOString() : undefined);
  } else if (attempt.startedAt && !attempt.stoppedAt) {
    // Ours and running, then gone before release (its VM-side limit, by hand, or this
    // release's own earlier try): when it stopped if the provider knows, else now.
    attempt.stoppedAt = event.stoppedAt ?? new Date(nowMs).toISOString();
  }
  attempt.released = true;
  if (attempt.outcome === AttemptOutcome.Running) attempt.outcome = AttemptOutcome.Stopped;
  const said = { deleted: 'deleted', absent: 'never created (its create did not land)', 'not-ours': 'not ours, left alone' } as const;
  record(state, nowMs, {
    kind: TimelineKind.Released,
    event: `released: ${attempt.ref.name} ${said[event.outcome]}${event.createWatch ? ` ${createWatchSaid(event.createWatch)}` : ''}`,
    attempt: attempt.attempt,
    zone: attempt.offer.zone,
    released: event.outcome,
    ...(event.createWatch ? { createWatch: event.createWatch.outcome } : {}),
  });
}

/** What the release's watch for a create that may still have landed found, for the timeline. */
function createWatchSaid(watch: CreateWatch): string {
  if (watch.outcome === 'landed-late') return `(its create landed late, ${watch.afterSeconds ?? '?'} s after the release began; found under its name while watching)`;
  return `(watched for a create that might still land until ${watch.until}, after which none can)`;
}

/** Ends an attempt: the ending's zone event, counters and recovery, from the tables. */
export function endAttempt(state: RunState, spec: RunSpec, attempt: Attempt, outcome: Ending, now: number, detail?: string): Action | undefined {
  attempt.outcome = outcome;
  if (detail && outcome !== AttemptOutcome.Completed) attempt.reason = detail;
  if (state.notice === attempt.ref.name) state.notice = undefined;
  const rule = ENDINGS[outcome];
  const { zone, region, provisioningModel } = attempt.offer;
  if (rule.zoneEvent) state.zoneEvents.push({ zone, region, provisioningModel, kind: rule.zoneEvent, at: now });
  const where = { attempt: attempt.attempt, zone, outcome };
  switch (rule.next) {
    case Next.Complete:
      state.phase = Phase.Releasing;
      record(state, now, { ...where, kind: rule.timeline, event: `completed at step ${state.step ?? '?'}`, step: state.step });
      return undefined;
    case Next.NextOffer:
      state.phase = Phase.Provisioning;
      record(state, now, { ...where, kind: rule.timeline, event: `${zone} ${outcome}: ${detail ?? ''}`.trim() });
      if (outcome === AttemptOutcome.Conflict && state.attempts.filter((a) => a.outcome === AttemptOutcome.Conflict).length >= MAX_CONFLICTS) {
        return { kind: 'fail', failure: FailureType.ResourceConflict, message: `${MAX_CONFLICTS} resources that are not this run's held its names; the last: ${detail ?? attempt.ref.name}` };
      }
      return undefined;
    case Next.Resume: {
      state.phase = Phase.Recovering;
      state.preemptions++;
      state.placement = undefined;
      record(state, now, { ...where, kind: rule.timeline, event: `preempted in ${zone}; resuming from step ${state.lastCheckpoint?.step ?? 0}`, step: state.lastCheckpoint?.step ?? 0 });
      const decision = afterPreemption(state, spec);
      return decision.retry ? undefined : { kind: 'fail', failure: decision.failure, message: decision.message };
    }
    case Next.Move:
      state.phase = Phase.Recovering;
      state.placement = undefined;
      record(state, now, {
        ...where,
        kind: rule.timeline,
        event: `${attempt.moveAskedAt ? `moved off flex-start in ${zone} before its cut` : `flex-start run duration reached in ${zone}`}; resuming from step ${state.lastCheckpoint?.step ?? 0}`,
        step: state.lastCheckpoint?.step ?? 0,
      });
      return undefined;
    case Next.Restart: {
      state.phase = Phase.Recovering;
      state.placement = undefined;
      const decision = afterFailure(state, spec, attempt);
      if (!decision.retry) return { kind: 'fail', failure: decision.failure, message: decision.message, details: decision.details, logTailOf: attempt.attempt };
      state.restarts++;
      record(state, now, {
        ...where,
        kind: TimelineKind.Restarting,
        event: `training failed with ${attempt.reason ?? `exit code ${attempt.exitCode}`}; restart ${state.restarts} of ${spec.recovery.maxRestartsOnError}`,
      });
      return undefined;
    }
    case Next.Place:
      state.phase = Phase.Recovering;
      state.placement = undefined;
      record(state, now, { ...where, kind: rule.timeline, event: `policy: switch to on-demand to meet the deadline` });
      return undefined;
    case Next.Stop:
      return undefined;
    case Next.Fail: {
      const program = JSON.stringify(spec.command[0] ?? '').slice(0, 200);
      const why = attempt.exitCode !== undefined ? NOT_RUNNABLE_EXITS[attempt.exitCode]?.(program) : undefined;
      // The agent's own endings (AGENT_EXITS) say what failed; anything else is the training command's.
      const agents = Object.values(AGENT_EXITS).some((row) => row.ending === outcome);
      const message = `${why ?? (agents ? (detail ?? outcome) : `training failed with ${detail ?? outcome}`)}; not retried: a new VM would fail the same way`;
      record(state, now, { ...where, kind: rule.timeline, event: `${outcome} in ${zone}: ${message}` });
      return { kind: 'fail', failure: rule.failure ?? FailureType.UserCodeFailed, message, details: { exitCode: attempt.exitCode }, logTailOf: attempt.attempt };
    }
  }
}
