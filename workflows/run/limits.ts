/**
 * The run's limits: budget, deadline and maximum duration, each a pure function of the
 * state and `now`. A reached limit stops the run with a named failure; checkpoints stay.
 */
import { MAX_DURATION_SECONDS } from '../duration';
import { FailureType } from '../failures';
import type { RunSpec } from '../spec';
import type { Attempt, RunState } from './state';
import { ledger } from './views';

export interface LimitReached {
  failure: FailureType;
  message: string;
}

export function limitReached(state: RunState, spec: RunSpec, nowMs: number): LimitReached | undefined {
  const spent = ledger(state, nowMs).totalCostUsd;
  const kept = state.lastCheckpoint ? `; last checkpoint ${state.lastCheckpoint.uri} (step ${state.lastCheckpoint.step}) is kept` : '';
  if (state.budgetUsd !== undefined && spent >= state.budgetUsd - 1e-9) {
    return { failure: FailureType.BudgetExceeded, message: `spent $${spent.toFixed(4)} of a $${state.budgetUsd.toFixed(4)} budget${kept}` };
  }
  if (state.deadline && nowMs >= Date.parse(state.deadline)) {
    return { failure: FailureType.DeadlineMissed, message: `deadline ${state.deadline} passed before training finished${kept}` };
  }
  const maxEnd = maxRunEndMs(state, spec);
  if (maxEnd !== undefined && nowMs >= maxEnd) {
    return { failure: FailureType.DeadlineMissed, message: `run exceeded time.maxRunDuration (${spec.time.maxRunDuration} s)${kept}` };
  }
  return undefined;
}

function maxRunEndMs(state: RunState, spec: RunSpec): number | undefined {
  return spec.time.maxRunDuration === undefined ? undefined : Date.parse(state.startedAt) + spec.time.maxRunDuration * 1000;
}

/** Epoch ms at which a limit stops this attempt (budget at its price), if any. */
export function limitAtMs(state: RunState, spec: RunSpec, live: Attempt | undefined, nowMs: number): number | undefined {
  const at: number[] = [];
  if (state.budgetUsd !== undefined && live && live.offer.pricePerHour > 0) {
    const remaining = state.budgetUsd - ledger(state, nowMs).totalCostUsd;
    at.push(nowMs + (remaining / live.offer.pricePerHour) * 3_600_000);
  }
  if (state.deadline) at.push(Date.parse(state.deadline));
  const maxEnd = maxRunEndMs(state, spec);
  if (maxEnd !== undefined) at.push(maxEnd);
  // A large budget at a cheap price lies beyond what a timer can hold; waits re-check
  // the limits whenever they wake, so capping it loses nothing.
  return at.length ? Math.min(nowMs + MAX_DURATION_SECONDS * 1000, ...at) : undefined;
}

/** Accelerator seconds still to run: the estimate minus the time attempts have trained. */
export function remainingWorkSeconds(state: RunState, spec: RunSpec): number | undefined {
  const expected = spec.time.expectedDuration;
  if (expected === undefined) return undefined;
  const trained = state.attempts.reduce((sum, a) => sum + (a.startedAt && a.stoppedAt ? (Date.parse(a.stoppedAt) - Date.parse(a.startedAt)) / 1000 : 0), 0);
  return Math.max(0, expected - trained);
}
