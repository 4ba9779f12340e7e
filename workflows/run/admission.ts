/**
 * The run's first phase, before anything costs money: the checks, then its team's
 * admission. Pure reducers over a draft of the state (machine.ts runs them); the shell
 * carries out the asking and the telling.
 *
 *   check -> checked (a finding that stops the run: fail, naming each fix)
 *   no attempt yet, not admitted -> ask-admission -> wait (queued: still wait) -> admitted -> place
 *                                                                              -> refused -> fail, naming the team
 */
import { checksFailureMessage, findingsThatStopARun, type Finding } from '../checks';
import { FailureType } from '../failures';
import type { RunSpec } from '../spec';
import { priorityOf, type AdmissionDecision, type AdmissionRequest } from '../teams/rules';
import { limitAtMs } from './limits';
import type { Action, RunEvent } from './protocol';
import { Phase, record, TimelineKind, type RunState } from './state';

/** A run that heard nothing from its team asks again this often (the team dedupes by run id). */
export const ADMISSION_REASK_MS = 10 * 60_000;

export function admissionRequestOf(spec: RunSpec, state: RunState): AdmissionRequest {
  return {
    runId: state.runId,
    // The most GPUs any acceptable choice takes (on every node of a gang): the team never holds fewer than the run uses.
    gpus: Math.max(...spec.resources.accelerators.map((a) => a.count)) * spec.resources.nodes,
    reserveUsd: spec.pricing.budgetUsd ?? 0,
    priority: priorityOf(spec),
    askedAt: state.admission?.firstAskedAt ?? Date.parse(state.startedAt),
  };
}

/** This phase's events; a refusal or a blocking finding is the run's failure. */
export function absorbAdmissionEvent(state: RunState, event: Extract<RunEvent, { kind: 'checked' | 'admission' | 'admission-asked' }>, nowMs: number): Action | undefined {
  switch (event.kind) {
    case 'checked':
      return absorbChecks(state, event.findings, nowMs);
    case 'admission-asked':
      if (event.teamWebhooks !== undefined && state.admission) state.admission.teamWebhooks = event.teamWebhooks;
      // The ledger's word on whose run this is: the namespace it executes in, never the spec's label.
      if (event.team !== undefined && state.admission) state.admission.team = event.team;
      return undefined;
    case 'admission': {
      const refused = absorbAdmission(state, event.decision, nowMs);
      return refused && { kind: 'fail', ...refused };
    }
  }
}

/**
 * What this phase asks for next, while it lasts: the checks, once, before anything else;
 * then, for a run with no attempt yet, its team's admission. Undefined once it is over.
 */
export function admissionStep(state: RunState, spec: RunSpec, nowMs: number): Action | undefined {
  if (state.checked === undefined && state.attempts.length === 0) return { kind: 'check' };
  if (!awaitingAdmission(state)) return undefined;
  const again = reaskAt(state);
  if (again === undefined || nowMs >= again) {
    asking(state, spec, nowMs);
    return { kind: 'ask-admission' };
  }
  const limitAt = limitAtMs(state, spec, undefined, nowMs);
  return { kind: 'wait', untilMs: Math.min(again, limitAt ?? Infinity) };
}

/** Whether the run must still be admitted before it places anything: only a run with no attempt yet asks. */
export function awaitingAdmission(state: RunState): boolean {
  return state.attempts.length === 0 && state.admission?.status !== 'admitted';
}

/** The run asks (or asks again): recorded before the activity, so the wait knows when. */
function asking(state: RunState, spec: RunSpec, nowMs: number): void {
  if (state.admission) {
    state.admission.askedAt = nowMs;
    return;
  }
  // Its team is the namespace it runs in: the ledger says which when it answers.
  state.admission = { status: 'asked', askedAt: nowMs, firstAskedAt: nowMs };
  state.phase = Phase.Queued;
  record(state, nowMs, { kind: TimelineKind.Queued, event: `asked its team (its namespace's ledger) for admission (priority ${priorityOf(spec)})` });
}

/** When to ask again if the team stays silent. */
function reaskAt(state: RunState): number | undefined {
  return state.admission ? state.admission.askedAt + ADMISSION_REASK_MS : undefined;
}

/** Folds the team's answer in; a refusal becomes the run's failure. */
function absorbAdmission(state: RunState, decision: AdmissionDecision, nowMs: number): { failure: FailureType; message: string; details: unknown } | undefined {
  // The team signals this workflow by its id, so the answer is this run's. (Its runId is
  // not compared with the state's: a replay may run the history under another workflow id.)
  if (!state.admission || state.admission.status === 'admitted') return undefined;
  switch (decision.outcome) {
    case 'admitted':
      // The ledger's answer names its team (the run's namespace), should it come before the ask's own.
      state.admission.team ??= decision.team;
      state.admission.status = 'admitted';
      state.admission.position = undefined;
      record(state, nowMs, { kind: TimelineKind.Admitted, event: `admitted by team ${decision.team}` });
      return undefined;
    case 'queued':
      state.admission.status = 'queued';
      state.admission.position = decision.position;
      record(state, nowMs, { kind: TimelineKind.Queued, event: `queued in team ${decision.team} at position ${decision.position}: ${decision.reason}` });
      return undefined;
    case 'refused':
      return { failure: decision.failure, message: decision.message, details: decision.details };
  }
}

/** The checks' answer: a run that cannot succeed fails now, before any VM exists, naming each problem and its fix. */
function absorbChecks(state: RunState, findings: Finding[] | undefined, now: number): Action | undefined {
  state.checked = true;
  if (findings === undefined) {
    record(state, now, { kind: TimelineKind.Checked, event: 'checks before the run: not run (this worker cannot check); going on' });
    return undefined;
  }
  const blocking = findingsThatStopARun(findings);
  const warnings = findings.filter((f) => f.problem && !blocking.includes(f));
  record(state, now, { kind: TimelineKind.Checked, event: `checks before the run: ${findings.length - blocking.length} of ${findings.length} passed${warnings.length ? `; ${warnings.map((w) => `${w.check}: ${w.problem}`).join('; ')}` : ''}` });
  if (blocking.length === 0) return undefined;
  return { kind: 'fail', failure: FailureType.ChecksFailed, message: `the run cannot succeed as things stand, so nothing was created: ${checksFailureMessage(findings, blocking)}` };
}
