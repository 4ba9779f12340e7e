/**
 * The run's updates: what they accept (pure checks, shared by the workflow's validators
 * and any client that wants to check before sending) and what they change.
 */
import { deadlineProblem, MAX_BUDGET_USD } from '../spec';
import { record, TimelineKind, type RunState } from './state';
import { ledger } from './views';

export function budgetProblem(state: RunState, budgetUsd: unknown, nowMs: number): string | undefined {
  if (!(typeof budgetUsd === 'number' && Number.isFinite(budgetUsd) && budgetUsd > 0 && budgetUsd <= MAX_BUDGET_USD)) {
    return `budget must be a positive number of USD up to ${MAX_BUDGET_USD}, got ${String(budgetUsd)}`;
  }
  const spent = ledger(state, nowMs).totalCostUsd;
  if (budgetUsd < spent) return `budget $${budgetUsd} is below the $${spent.toFixed(4)} already spent`;
  return undefined;
}

export function newDeadlineProblem(deadline: unknown, nowMs: number): string | undefined {
  const problem = deadlineProblem(deadline, nowMs);
  return problem && `deadline ${problem}`;
}

/** Applies an accepted budget; the machine re-evaluates its limits on the next event. */
export function setBudget(state: RunState, budgetUsd: number, nowMs: number): void {
  state.budgetUsd = budgetUsd;
  record(state, nowMs, { kind: TimelineKind.LimitChanged, event: `budget set to $${budgetUsd.toFixed(2)}` });
}

/** Applies an accepted deadline (normalised to UTC). */
export function setDeadline(state: RunState, deadline: string, nowMs: number): void {
  state.deadline = new Date(Date.parse(deadline)).toISOString();
  record(state, nowMs, { kind: TimelineKind.LimitChanged, event: `deadline set to ${state.deadline}` });
}
