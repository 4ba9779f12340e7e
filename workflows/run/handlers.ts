/**
 * The run's messages: the status query, the budget and deadline updates (validated
 * before they are accepted, so a refused change never enters history as accepted, then
 * folded in by the reducer), and the signals that become the reducer's events through the inbox.
 */
import { setHandler } from '@temporalio/workflow';
import { failure, FailureType } from '../failures';
import { observationSignal, preemptionNoticeSignal, setBudgetUpdate, setDeadlineUpdate, statusQuery } from '../messages';
import type { RunSpec } from '../spec';
import type { Inbox } from './inbox';
import type { RunEvent } from './protocol';
import type { RunState } from './state';
import { budgetProblem, callerProblem, newDeadlineProblem } from './validators';
import { statusOf } from './views';

function refuse(problem: string | undefined): void {
  if (problem) throw failure(FailureType.InvalidSpec, problem);
}

export function installRunHandlers(spec: RunSpec, state: () => RunState, apply: (event: RunEvent) => Promise<void>, inbox: Inbox): void {
  const status = () => statusOf(state(), Date.now(), spec);
  // A limit moved: the reducer folds it in, and the loop looks at the run again at once.
  const limitMoved = async (event: RunEvent) => {
    await apply(event);
    inbox.push({ kind: 'tick' });
    return status();
  };
  setHandler(statusQuery, status);
  setHandler(setBudgetUpdate, (usd: number, by?: string) => limitMoved({ kind: 'budget-set', usd, ...(by ? { by } : {}) }), {
    validator: (usd: number, by?: string) => refuse(budgetProblem(state(), usd, Date.now()) ?? callerProblem(by)),
  });
  setHandler(setDeadlineUpdate, (deadline: string, by?: string) => limitMoved({ kind: 'deadline-set', deadline, ...(by ? { by } : {}) }), {
    validator: (deadline: string, by?: string) => refuse(newDeadlineProblem(deadline, Date.now()) ?? callerProblem(by)),
  });
  setHandler(preemptionNoticeSignal, (notice) => void inbox.push({ kind: 'notice', ...notice }));
  setHandler(observationSignal, (observation) => void inbox.push({ kind: 'observed', observation, via: 'observer' }));
}
