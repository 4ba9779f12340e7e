/**
 * The run's messages: the status query, the budget and deadline updates (validated
 * before they are accepted, so a refused change never enters history as accepted), and
 * the signals that become the machine's events through the inbox.
 */
import { setHandler } from '@temporalio/workflow';
import { failure, FailureType } from '../failures';
import type { Inbox } from '../inbox';
import { observationSignal, preemptionNoticeSignal, setBudgetUpdate, setDeadlineUpdate, statusQuery } from '../messages';
import type { RunSpec } from '../spec';
import type { RunState } from './state';
import { budgetProblem, newDeadlineProblem, setBudget, setDeadline } from './validators';
import { statusOf } from './views';

function refuse(problem: string | undefined): void {
  if (problem) throw failure(FailureType.InvalidSpec, problem);
}

export function installRunHandlers(spec: RunSpec, state: RunState, inbox: Inbox): void {
  const status = () => statusOf(state, Date.now(), spec);
  // A limit moved: the machine looks at the run again at once.
  const limitMoved = (apply: () => void) => {
    apply();
    inbox.push({ kind: 'tick' });
    return status();
  };
  setHandler(statusQuery, status);
  setHandler(setBudgetUpdate, (usd) => limitMoved(() => setBudget(state, usd, Date.now())), {
    validator: (usd) => refuse(budgetProblem(state, usd, Date.now())),
  });
  setHandler(setDeadlineUpdate, (deadline) => limitMoved(() => setDeadline(state, deadline, Date.now())), {
    validator: (deadline) => refuse(newDeadlineProblem(deadline, Date.now())),
  });
  setHandler(preemptionNoticeSignal, (notice) => void inbox.push({ kind: 'notice', ...notice }));
  setHandler(observationSignal, (observation) => void inbox.push({ kind: 'observed', observation, via: 'observer' }));
}
