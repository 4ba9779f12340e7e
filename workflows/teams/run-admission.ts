/**
 * A run's side of team admission, pure: what it asks its team for, when it must ask,
 * and what the team's answer does to it. The machine (run/machine.ts) calls these; the
 * driver carries out the asking and the telling.
 *
 *   no attempt yet, not admitted -> ask-admission -> wait (queued: still wait) -> admitted -> place
 *                                                                              -> refused -> fail, naming the team
 */
import type { FailureType } from '../failures';
import { record, TimelineKind, Phase, type RunState } from '../run/state';
import type { RunSpec } from '../spec';
import { DEFAULT_PRIORITY, DEFAULT_TEAM, type AdmissionDecision, type AdmissionRequest } from './rules';

/** A run that heard nothing from its team asks again this often (the team dedupes by run id). */
export const ADMISSION_REASK_MS = 10 * 60_000;

export type AdmissionStatus = 'asked' | 'queued' | 'admitted';

/** What a run holds about its admission: JSON-plain, carried through continue-as-new. */
export interface RunAdmission {
  team: string;
  status: AdmissionStatus;
  /** Epoch ms of the last ask. */
  askedAt: number;
  /** Epoch ms of the first ask: the queue's age key. */
  firstAskedAt: number;
  position?: number;
  /** Whether the worker knows webhooks for the team (absent until told, and in runs from before it said). */
  teamWebhooks?: boolean;
}

export function teamOf(spec: RunSpec): string {
  return spec.labels.team || DEFAULT_TEAM;
}

export function priorityOf(spec: RunSpec): number {
  return spec.priority ?? DEFAULT_PRIORITY;
}

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

/**
 * Whether the run must still be admitted before it places anything: only a run with no
 * attempt yet asks.
 */
export function awaitingAdmission(state: RunState): boolean {
  return state.attempts.length === 0 && state.admission?.status !== 'admitted';
}

/** The run asks (or asks again): recorded before the activity, so the wait knows when. */
export function asking(state: RunState, spec: RunSpec, nowMs: number): void {
  const first = state.admission === undefined;
  state.admission = { team: teamOf(spec), status: state.admission?.status ?? 'asked', askedAt: nowMs, firstAskedAt: state.admission?.firstAskedAt ?? nowMs, position: state.admission?.position, ...(state.admission?.teamWebhooks !== undefined ? { teamWebhooks: state.admission.teamWebhooks } : {}) };
  if (first) {
    state.phase = Phase.Queued;
    record(state, nowMs, { kind: TimelineKind.Queued, event: `asked team ${teamOf(spec)} for admission (priority ${priorityOf(spec)})` });
  }
}

/** When to ask again if the team stays silent. */
export function reaskAt(state: RunState): number | undefined {
  return state.admission ? state.admission.askedAt + ADMISSION_REASK_MS : undefined;
}

/** Folds the team's answer in; a refusal becomes the run's failure. */
export function absorbAdmission(state: RunState, decision: AdmissionDecision, nowMs: number): { failure: FailureType; message: string; details: unknown } | undefined {
  // The team signals this workflow by its id, so the answer is this run's. (Its runId is
  // not compared with the state's: a replay may run the history under another workflow id.)
  if (!state.admission || state.admission.status === 'admitted') return undefined;
  switch (decision.outcome) {
    case 'admitted':
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
