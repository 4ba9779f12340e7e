/**
 * The durable state of one training run and the pure functions that read it: the cost
 * ledger, the status view. JSON-plain so it survives continue-as-new unchanged.
 */
import type { ZoneEvent } from './placement';
import type { CheckpointRef, Offer, ResourceRef } from './types';

export const Phase = {
  Validating: 'validating',
  FindingCapacity: 'finding-capacity',
  Provisioning: 'provisioning',
  Staging: 'staging',
  Training: 'training',
  Recovering: 'recovering',
  Releasing: 'releasing',
  Completed: 'completed',
  Failed: 'failed',
  Cancelled: 'cancelled',
} as const;
export type Phase = (typeof Phase)[keyof typeof Phase];

export const AttemptOutcome = {
  Running: 'running',
  Completed: 'completed',
  Preempted: 'preempted',
  Failed: 'failed',
  Stockout: 'stockout',
  QuotaExceeded: 'quota-exceeded',
  /** A resource that is not ours already had the attempt's name; it was left alone. */
  Conflict: 'conflict',
  Stopped: 'stopped',
} as const;
export type AttemptOutcome = (typeof AttemptOutcome)[keyof typeof AttemptOutcome];

export interface Attempt {
  attempt: number;
  ref: ResourceRef;
  offer: Offer;
  outcome: AttemptOutcome;
  /** ISO times the resource was RUNNING, from the provider: the ledger's basis. */
  startedAt?: string;
  stoppedAt?: string;
  resumedFromStep?: number;
  exitCode?: number;
  released: boolean;
  /**
   * True once the create has a definite answer (it ran, or failed with a named failure).
   * Until then a release must allow for a create still in flight landing late.
   */
  createSettled?: boolean;
}

export interface TimelineEvent {
  at: string;
  event: string;
}

export interface RunState {
  runId: string;
  phase: Phase;
  startedAt: string;
  attempts: Attempt[];
  zoneEvents: ZoneEvent[];
  lastCheckpoint?: CheckpointRef;
  step?: number;
  preemptions: number;
  restarts: number;
  budgetUsd?: number;
  /** ISO time; absent means no deadline. */
  deadline?: string;
  timeline: TimelineEvent[];
  /** State of the deadline-aware pricing policy (workflows/policy), JSON-plain. */
  policyState?: unknown;
}

/** The workflow keeps only the most recent events; the full story is in the history. */
const TIMELINE_LIMIT = 200;

export function record(state: RunState, nowMs: number, event: string): void {
  state.timeline.push({ at: new Date(nowMs).toISOString(), event });
  if (state.timeline.length > TIMELINE_LIMIT) state.timeline.splice(0, state.timeline.length - TIMELINE_LIMIT);
}

export function runningSeconds(attempt: Attempt, nowMs: number): number {
  if (!attempt.startedAt) return 0;
  const end = attempt.stoppedAt ? Date.parse(attempt.stoppedAt) : nowMs;
  return Math.max(0, (end - Date.parse(attempt.startedAt)) / 1000);
}

export interface LedgerLine {
  attempt: number;
  zone: string;
  provisioningModel: string;
  accelerator: string;
  pricePerHour: number;
  runningSeconds: number;
  costUsd: number;
  onDemandCostUsd: number;
  outcome: AttemptOutcome;
}

export interface Ledger {
  lines: LedgerLine[];
  totalCostUsd: number;
  onDemandCostUsd: number;
}

export function ledger(state: RunState, nowMs: number): Ledger {
  const lines = state.attempts.map((a) => {
    const seconds = runningSeconds(a, nowMs);
    return {
      attempt: a.attempt,
      zone: a.offer.zone,
      provisioningModel: a.offer.provisioningModel,
      accelerator: `${a.offer.accelerator} x${a.offer.acceleratorCount}`,
      pricePerHour: a.offer.pricePerHour,
      runningSeconds: seconds,
      costUsd: (a.offer.pricePerHour * seconds) / 3600,
      onDemandCostUsd: (a.offer.onDemandPricePerHour * seconds) / 3600,
      outcome: a.outcome,
    };
  });
  return {
    lines,
    totalCostUsd: lines.reduce((s, l) => s + l.costUsd, 0),
    onDemandCostUsd: lines.reduce((s, l) => s + l.onDemandCostUsd, 0),
  };
}

export function currentAttempt(state: RunState): Attempt | undefined {
  const last = state.attempts[state.attempts.length - 1];
  return last && last.outcome === AttemptOutcome.Running ? last : undefined;
}

export interface RunStatus {
  runId: string;
  phase: Phase;
  attempt?: number;
  zone?: string;
  provisioningModel?: string;
  step?: number;
  lastCheckpoint?: CheckpointRef;
  costUsd: number;
  onDemandCostUsd: number;
  budgetUsd?: number;
  deadline?: string;
  preemptions: number;
  restarts: number;
  ledger: LedgerLine[];
  timeline: TimelineEvent[];
}

export function statusOf(state: RunState, nowMs: number): RunStatus {
  const current = state.attempts[state.attempts.length - 1];
  const costs = ledger(state, nowMs);
  return {
    runId: state.runId,
    phase: state.phase,
    attempt: current?.attempt,
    zone: current?.offer.zone,
    provisioningModel: current?.offer.provisioningModel,
    step: state.step,
    lastCheckpoint: state.lastCheckpoint,
    costUsd: costs.totalCostUsd,
    onDemandCostUsd: costs.onDemandCostUsd,
    budgetUsd: state.budgetUsd,
    deadline: state.deadline,
    preemptions: state.preemptions,
    restarts: state.restarts,
    ledger: costs.lines,
    timeline: state.timeline,
  };
}

/** What a finished run returns. */
export interface RunResult {
  status: 'completed';
  runId: string;
  finalStep?: number;
  lastCheckpoint?: CheckpointRef;
  attempts: { attempt: number; zone: string; provisioningModel: string; outcome: AttemptOutcome; costUsd: number; runningSeconds: number }[];
  preemptions: number;
  restarts: number;
  totalCostUsd: number;
  onDemandCostUsd: number;
}

export function resultOf(state: RunState, nowMs: number): RunResult {
  const costs = ledger(state, nowMs);
  return {
    status: 'completed',
    runId: state.runId,
    finalStep: state.step,
    lastCheckpoint: state.lastCheckpoint,
    attempts: costs.lines.map((l) => ({
      attempt: l.attempt,
      zone: l.zone,
      provisioningModel: l.provisioningModel,
      outcome: l.outcome,
      costUsd: l.costUsd,
      runningSeconds: l.runningSeconds,
    })),
    preemptions: state.preemptions,
    restarts: state.restarts,
    totalCostUsd: costs.totalCostUsd,
    onDemandCostUsd: costs.onDemandCostUsd,
  };
}
