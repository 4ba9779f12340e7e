/**
 * What the run's updates accept: pure checks, shared by the workflow's validators (and
 * any client that wants to check before sending).
 */
import { deadlineProblem, MAX_BUDGET_USD } from '../spec';
import type { RunState } from './state';
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
