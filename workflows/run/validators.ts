/**
 * The run's updates: what they accept (pure checks, shared by the workflow's validators
 * and any client that wants to check before sending) and what they change.
 */
import { deadlineProblem, MAX_BUDGET_USD } from '../spec';
import { MAX_CALLER_LENGTH, record, TimelineKind, type LimitsSetBy, type RunState } from './state';
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

/** `by` of a limit update: absent (a caller that names no one), or a short one-line identity. */
export function callerProblem(by: unknown): string | undefined {
  if (by === undefined) return undefined;
  if (typeof by !== 'string' || by.trim() === '' || by.length > MAX_CALLER_LENGTH || /\p{Cc}/u.test(by)) {
    return `by must name the caller in one line of at most ${MAX_CALLER_LENGTH} characters (its Temporal client identity), got ${JSON.stringify(by)?.slice(0, 80)}`;
  }
  return undefined;
}

/** Applies an accepted budget; the machine re-evaluates its limits on the next event. */
export function setBudget(state: RunState, budgetUsd: number, nowMs: number, by?: string): void {
  state.budgetUsd = budgetUsd;
  limitSet(state, 'budget', `budget set to $${budgetUsd.toFixed(2)}`, nowMs, by);
}

/** Applies an accepted deadline (normalised to UTC). */
export function setDeadline(state: RunState, deadline: string, nowMs: number, by?: string): void {
  state.deadline = new Date(Date.parse(deadline)).toISOString();
  limitSet(state, 'deadline', `deadline set to ${state.deadline}`, nowMs, by);
}

/** Who set a limit last, and when; and the timeline's line, naming them. */
function limitSet(state: RunState, limit: 'budget' | 'deadline', event: string, nowMs: number, by: string | undefined): void {
  // A later change that names no one clears the name: it is no longer who set the limit.
  const setBy: LimitsSetBy = { ...state.limitsSetBy };
  if (by) setBy[limit] = { by, at: new Date(nowMs).toISOString() };
  else delete setBy[limit];
  state.limitsSetBy = setBy;
  record(state, nowMs, { kind: TimelineKind.LimitChanged, event: by ? `${event} by ${by}` : event, ...(by ? { by } : {}) });
}
