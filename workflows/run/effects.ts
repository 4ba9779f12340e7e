/**
 * What a step does to the world beside its action, decided with the step: the web UI's
 * view of the run, notifications that fell due, the spend its team is told, what the zone
 * and throughput memories learn from released attempts, and, as the run ends, its team's
 * GPUs back and its cost memo. Pure: the shell only carries these out.
 */
import { samplesToTell } from '../plan/measured';
import type { RunSpec } from '../spec';
import { outcomesToTell } from '../zones/from-run';
import { costMemoOf, costRefreshAt } from './cost-refresh';
import { mayNotify, notificationsDue, notifyWakeAtMs, remember, type NotifyMoment } from './notify';
import type { Action, Effect, RunEvent } from './protocol';
import { Phase, type RunState } from './state';
import { currentDetailsOf, ledger, releasingOf, searchAttributesOf } from './views';

/** How often a run with a billed attempt tells its team what it has spent so far. */
export const SPEND_REPORT_MS = 10 * 60_000;

/**
 * Where the effects come from: a step of the run's loop (it notifies and reports spend),
 * or a message or release folded in beside it (it only shows what changed), or the run's end.
 */
export type EffectMoment = 'step' | 'beside';

/**
 * The effects that write to the state (what was notified, when spend was reported), on
 * the step's draft; `before` is the state the step began from.
 */
export function effectsOf(state: RunState, before: RunState, spec: RunSpec, event: RunEvent, moment: EffectMoment, nowMs: number): Effect[] {
  const effects: Effect[] = [];
  const fresh = newlyReleased(before, state);
  if (fresh.size > 0) {
    const told = new Set(state.attempts.filter((a) => !fresh.has(a.attempt)).map((a) => a.attempt));
    const { outcomes } = outcomesToTell(state.attempts, told, nowMs);
    const { samples } = samplesToTell(state, spec, told, nowMs);
    if (outcomes.length > 0 || samples.length > 0) effects.push({ kind: 'tell-memories', outcomes, samples });
  }
  const notifyMoment = notifyMomentOf(event, moment);
  if (notifyMoment && mayNotify(spec, state)) {
    const due = notificationsDue(state, spec, notifyMoment, nowMs, state.notify);
    if (due.length > 0) {
      state.notify = remember(state.notify, due);
      effects.push({ kind: 'notify', events: due });
    }
  }
  const admission = state.admission;
  if (moment === 'step' && admission?.status === 'admitted') {
    // At once when an attempt's line became final, and every SPEND_REPORT_MS while one is billed.
    if (fresh.size > 0 || (isBilling(state) && nowMs - (admission.spendReportedAt ?? 0) >= SPEND_REPORT_MS)) {
      admission.spendReportedAt = nowMs;
      effects.push({ kind: 'report-spend', team: admission.team, totalUsd: ledger(state, nowMs).totalCostUsd });
    }
  }
  if (event.kind === 'ended') {
    if (admission) effects.push({ kind: 'team-ended', team: admission.team, totalUsd: ledger(state, nowMs).totalCostUsd });
    effects.push({ kind: 'cost-memo', memo: costMemoOf(state, spec, nowMs) });
  }
  return effects;
}

/** What the web UI shows of the run now (the shell writes only what changed). */
export function publishOf(state: RunState, spec: RunSpec, nowMs: number): Effect {
  return { kind: 'publish', attributes: searchAttributesOf(state, nowMs), details: currentDetailsOf(state, spec, nowMs), releasing: releasingOf(state) };
}

/**
 * A wait ends early when a budget or deadline warning falls due meanwhile, and, while a
 * resource is billed, within a few minutes, so the cost shown stays current.
 */
export function withWakes(action: Action, state: RunState, spec: RunSpec, nowMs: number): Action {
  if (action.kind !== 'wait') return action;
  let untilMs = action.untilMs;
  const warning = mayNotify(spec, state) ? notifyWakeAtMs(state, spec, nowMs, state.notify) : undefined;
  if (warning !== undefined && (untilMs === undefined || warning < untilMs)) untilMs = warning;
  if (isBilling(state)) untilMs = costRefreshAt(untilMs, nowMs);
  return untilMs === action.untilMs ? action : { ...action, untilMs };
}

function notifyMomentOf(event: RunEvent, moment: EffectMoment): NotifyMoment | undefined {
  if (event.kind === 'ended') {
    if (event.phase === Phase.Completed) return { kind: 'ended', phase: Phase.Completed };
    if (event.phase === Phase.Failed) return { kind: 'ended', phase: Phase.Failed, failure: event.failure, message: event.message ?? 'failed' };
    return undefined;
  }
  return moment === 'step' ? { kind: 'step' } : undefined;
}

/** A resource of the run is running and billed (started, not yet stopped). */
function isBilling(state: RunState): boolean {
  return state.attempts.some((a) => a.startedAt && !a.stoppedAt);
}

function newlyReleased(before: RunState, after: RunState): Set<number> {
  return new Set(after.attempts.filter((a) => a.released && !before.attempts[a.attempt - 1]?.released).map((a) => a.attempt));
}
