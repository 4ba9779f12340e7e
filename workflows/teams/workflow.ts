/**
 * teamLedger: one long-lived workflow per task queue and team, holding the team's limits,
 * its running runs and its queue, and what it has spent this period. No side database:
 * the state is this workflow's, carried through continue-as-new.
 *
 *   run --askAdmission (signal-with-start)--> team --admission signal--> run
 *   run --runSpend (as attempts bill) / runEnded (finally)--> team
 *   client / CLI --setTeamLimits update / team query--> team
 *
 * The rules are rules.ts; this file only wires messages to them and sends the answers.
 */
import { allHandlersFinished, condition, getExternalWorkflowHandle, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import { failure, FailureType } from '../failures';
import { continueOnCurrentVersion, newVersionCurrent } from '../versions';
import { admissionOfQuery, admissionRequestSignal, admissionSignal, runEndedSignal, runSpendSignal, setTeamLimitsUpdate, teamQuery, type TeamActivities, type TeamInput } from './contract';
import { admissionOf, applyLimits, enqueue, limitsProblem, newTeamState, periodEndsAt, recordSpend, release, settle, teamView, type AdmissionDecision, type LimitsChange } from './rules';

/**
 * How often the team checks that its running runs still exist: a terminated run never
 * runs its finally, and would hold its GPUs for ever. The check asks the server which of
 * them are closed (the closedRuns activity).
 */
const SWEEP_SECONDS = 15 * 60;
/** Continue as new well before the history gets long (each run costs about ten events). */
const MAX_HISTORY_EVENTS = 8_000;

export async function teamLedger(input: TeamInput): Promise<void> {
  const state = input.state ?? newTeamState(input.team, Date.now());
  const outbox: AdmissionDecision[] = [];
  const acts = proxyActivities<TeamActivities>({ startToCloseTimeout: '5 minutes', heartbeatTimeout: '1 minute', retry: { maximumAttempts: 3 } });
  const look = () => outbox.push(...settle(state, Date.now()));

  setHandler(admissionRequestSignal, (request) => {
    const again = enqueue(state, request);
    if (again) outbox.push(again);
    look();
  });
  setHandler(runSpendSignal, ({ runId, totalUsd }) => recordSpend(state, runId, totalUsd));
  setHandler(runEndedSignal, ({ runId, totalUsd }) => {
    release(state, runId, totalUsd);
    look();
  });
  setHandler(
    setTeamLimitsUpdate,
    (change: LimitsChange) => {
      applyLimits(state, change, Date.now());
      look();
      return teamView(state);
    },
    {
      validator: (change) => {
        const problem = limitsProblem(change, state.limits);
        if (problem) throw failure(FailureType.InvalidSpec, `team ${state.team}: ${problem}`);
      },
    },
  );
  setHandler(teamQuery, () => teamView(state));
  setHandler(admissionOfQuery, (runId) => admissionOf(state, runId) ?? null);

  look();
  const sweepMs = (input.sweepSeconds ?? SWEEP_SECONDS) * 1000;
  let sweepAt = Date.now() + sweepMs;
  for (;;) {
    // Wake for answers to send, when the period ends (spend starts again at zero), or to sweep.
    const due = await condition(() => outbox.length > 0, Math.max(1, Math.min(periodEndsAt(state), sweepAt) - Date.now()));
    if (!due) look();
    if (Date.now() >= sweepAt) {
      sweepAt = Date.now() + sweepMs;
      await sweep();
    }
    while (outbox.length > 0) {
      const batch = outbox.splice(0, outbox.length);
      await Promise.all(batch.map((decision) => tell(decision)));
    }
    const info = workflowInfo();
    if (info.continueAsNewSuggested || info.historyLength > MAX_HISTORY_EVENTS || newVersionCurrent()) {
      await condition(() => allHandlersFinished() && outbox.length === 0);
      return continueOnCurrentVersion<typeof teamLedger>({ team: state.team, state, ...(input.sweepSeconds !== undefined ? { sweepSeconds: input.sweepSeconds } : {}) });
    }
  }

  /** Releases the GPUs of running runs that closed without a word (terminated); a failed check waits for the next sweep. */
  async function sweep(): Promise<void> {
    if (state.running.length === 0) return;
    const closed = await acts.closedRuns({ runIds: state.running.map((h) => h.runId) }).catch(() => []);
    for (const runId of closed) release(state, runId);
    if (closed.length > 0) look();
  }

  /** Sends a run its answer; a run that is gone cannot hold GPUs, so it leaves the team. */
  async function tell(decision: AdmissionDecision): Promise<void> {
    try {
      await getExternalWorkflowHandle(decision.runId).signal(admissionSignal, decision);
    } catch {
      release(state, decision.runId);
      look();
    }
  }
}
