/**
 * Pure views of a run's state: the cost ledger, the status the query answers, the result
 * a finished run returns.
 */
import type { AppliedInterval, Attempt, AttemptOutcome, GpuState, LimitsSetBy, Phase, RunPrices, RunState, TimelineEvent } from './state';
import { meanUtilisation } from './gpu-util';
import { formatSeconds, progressOf, type Progress } from './progress';
import type { SearchAttributeUpdatePair } from '@temporalio/common';
import { SternaAccelerator, SternaAttempt, SternaCostUsd, SternaGpuUtil, SternaPhase, SternaPreemptions, SternaTeam, SternaZone } from '../search-attributes';
import type { RunSpec } from '../spec';
import { runTeamOf } from './team';
import type { CheckpointRef, ProvisioningModel } from '../types';
import { stagingView, type StagingView } from './data-placement';
import { waitingFor } from './flex-start';
import { describeShape } from '../gpu-slices';
import { gangNodesView, gangSize } from './gang';
import { keptDetails, keptView, type KeptView } from './kept-view';
import { lastLineOf, markdownCode } from './last-line';

export function runningSeconds(attempt: Attempt, nowMs: number): number {
  if (!attempt.startedAt) return 0;
  const end = attempt.stoppedAt ? Date.parse(attempt.stoppedAt) : nowMs;
  return Math.max(0, (end - Date.parse(attempt.startedAt)) / 1000);
}

export interface LedgerLine {
  attempt: number;
  zone: string;
  provisioningModel: ProvisioningModel;
  accelerator: string;
  /** The price charged, as the attempt's offer had it: a later price book does not change it. */
  pricePerHour: number;
  /** The price book's date and source behind `pricePerHour` (absent for runs from before the price book). */
  pricesAsOf?: string;
  priceSource?: 'billing' | 'catalog';
  runningSeconds: number;
  costUsd: number;
  onDemandCostUsd: number;
  outcome: AttemptOutcome;
  /** A gang's nodes (its price is all of theirs); absent for a single node. */
  nodes?: number;
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
      accelerator: describeShape(a.offer),
      pricePerHour: a.offer.pricePerHour,
      ...(a.offer.pricesAsOf ? { pricesAsOf: a.offer.pricesAsOf, priceSource: a.offer.priceSource } : {}),
      runningSeconds: seconds,
      costUsd: (a.offer.pricePerHour * seconds) / 3600,
      onDemandCostUsd: (a.offer.onDemandPricePerHour * seconds) / 3600,
      outcome: a.outcome,
      ...(gangSize(a.offer) > 1 ? { nodes: gangSize(a.offer) } : {}),
    };
  });
  return {
    lines,
    totalCostUsd: lines.reduce((s, l) => s + l.costUsd, 0),
    onDemandCostUsd: lines.reduce((s, l) => s + l.onDemandCostUsd, 0),
  };
}

export interface RunStatus {
  runId: string;
  phase: Phase;
  attempt?: number;
  zone?: string;
  provisioningModel?: ProvisioningModel;
  step?: number;
  lastCheckpoint?: CheckpointRef;
  costUsd: number;
  onDemandCostUsd: number;
  budgetUsd?: number;
  deadline?: string;
  /** Who set the budget and the deadline last by update, and when (absent: as the spec gave them). */
  limitsSetBy?: LimitsSetBy;
  preemptions: number;
  restarts: number;
  ledger: LedgerLine[];
  /** The price book behind the offers: its date, source, fallback warning and the zones it could not price. */
  prices?: RunPrices;
  /** The run's team admission: its team (the namespace it runs in, once its ledger answered), and whether it is still queued (and where). */
  admission?: { team?: string; status: string; position?: number };
  /** The GPUs' last reading (nvidia-smi on the VM) and the run's average, once the agent reported one. */
  gpu?: GpuStatus;
  /** Step of total, percent, ETA and predicted cost (run/progress.ts). */
  progress?: Progress;
  /** The latest attempt's staging: bytes staged, rate and ETA. */
  staging?: StagingView;
  /** The latest attempt's checkpoint interval, and the preemption rate and checkpoint cost it was chosen from (run/live-interval.ts). */
  checkpointInterval?: AppliedInterval;
  /** Set while a flex-start request waits for capacity: "waiting for DWS capacity since ...". */
  waiting?: string;
  /** A gang run: every node of the current attempt, by rank (run/gang.ts). */
  nodes?: { rank: number; name: string }[];
  /** The last line the current attempt printed (its agent's `sterna/last-line`, secrets replaced by ***), once it printed one. */
  lastLine?: string;
  /** A failed attempt kept for inspection (recovery.keepOnFailure): until when, and how to reach it (run/keep.ts). */
  kept?: KeptView;
  timeline: TimelineEvent[];
}

export interface GpuStatus {
  /** Mean utilisation of the attempt's GPUs at the last reading, percent. */
  utilisation: number;
  memoryUsedMiB: number;
  memoryTotalMiB: number;
  gpus: number;
  /** Time-weighted average over the run's training so far, percent. */
  meanUtilisation: number;
  /** When the run heard the reading. */
  at: string;
  /** Below monitoring.minGpuUtilisation for the window, and flagged (idleAction "flag"). */
  idle: boolean;
}

function gpuStatus(gpu: GpuState): GpuStatus {
  return {
    utilisation: gpu.utilisation,
    memoryUsedMiB: gpu.memoryUsedMiB,
    memoryTotalMiB: gpu.memoryTotalMiB,
    gpus: gpu.gpus,
    meanUtilisation: meanUtilisation(gpu)!,
    at: new Date(gpu.atMs).toISOString(),
    idle: gpu.idle === true,
  };
}

/** With the spec, the status carries progress (the spec may know the total steps). */
export function statusOf(state: RunState, nowMs: number, spec?: RunSpec): RunStatus {
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
    ...(state.limitsSetBy && Object.keys(state.limitsSetBy).length > 0 ? { limitsSetBy: state.limitsSetBy } : {}),
    preemptions: state.preemptions,
    restarts: state.restarts,
    ledger: costs.lines,
    ...(state.prices ? { prices: state.prices } : {}),
    ...(state.admission ? { admission: { team: state.admission.team, status: state.admission.status, position: state.admission.position } } : {}),
    ...(state.gpu ? { gpu: gpuStatus(state.gpu) } : {}),
    ...(spec ? { progress: progressOf(state, spec, costs.totalCostUsd, nowMs) } : {}),
    ...(state.staging ? { staging: stagingView(state.staging) } : {}),
    ...(current?.checkpointInterval ? { checkpointInterval: current.checkpointInterval } : {}),
    ...withWaiting(current, state.phase),
    ...(current && gangSize(current.ref) > 1 ? { nodes: gangNodesView(current.ref) } : {}),
    ...withLastLine(state, current),
    ...withKept(state),
    timeline: state.timeline,
  };
}

/**
 * The run's current details for the Temporal web UI (`setCurrentDetails`): what it is
 * doing now, in Markdown, however the run was started.
 */
export function currentDetailsOf(state: RunState, spec: RunSpec, nowMs: number): string {
  const live = state.attempts[state.attempts.length - 1];
  const cost = ledger(state, nowMs).totalCostUsd;
  const p = progressOf(state, spec, cost, nowMs);
  // Amounts in "USD", never "$": the UI's Markdown reads a pair of dollar signs as math.
  const money = (usd: number) => `${usd.toFixed(4)} USD`;
  const nodes = live && gangSize(live.offer) > 1 ? ` on each of ${gangSize(live.offer)} nodes` : '';
  const where = live ? ` in ${live.offer.zone} (${live.offer.provisioningModel === 'SPOT' ? 'spot' : 'on-demand'} ${live.offer.accelerator} x${live.offer.acceleratorCount}${nodes}), attempt ${live.attempt}` : '';
  const lines = [`**Phase** ${state.phase}${where}`];
  if (p.step !== undefined) {
    const of = p.totalSteps !== undefined ? ` of ${p.totalSteps} (${p.percent!.toFixed(1)}%)` : '';
    lines.push(`**Step** ${p.step}${of}${p.etaSeconds !== undefined ? ` · **ETA** ${formatSeconds(p.etaSeconds)}` : ''}`);
  }
  const budget = state.budgetUsd !== undefined ? ` of a ${state.budgetUsd} USD budget` : '';
  lines.push(`**Cost so far** ${money(cost)}${budget}${p.predictedCostUsd !== undefined ? ` · predicted total ${money(p.predictedCostUsd)}` : ''}`);
  const extra: string[] = [];
  if (state.gpu) extra.push(`**GPU** ${state.gpu.utilisation}% now, ${Math.round(meanUtilisation(state.gpu)!)}% average${state.gpu.idle ? ' (idle: flagged)' : ''}`);
  if (state.preemptions > 0) extra.push(`**Preemptions** ${state.preemptions}`);
  if (extra.length) lines.push(extra.join(' · '));
  const last = lastLineOf(state, live?.attempt);
  if (last !== undefined) lines.push(`**Last line** ${markdownCode(last)}`);
  const kept = keptDetails(state);
  if (kept) lines.push(kept);
  return lines.join('  \n');
}

function withLastLine(state: RunState, current: Attempt | undefined): { lastLine?: string } {
  const text = lastLineOf(state, current?.attempt);
  return text !== undefined ? { lastLine: text } : {};
}

function withKept(state: RunState): { kept?: KeptView } {
  const kept = keptView(state);
  return kept ? { kept } : {};
}

function withWaiting(current: Attempt | undefined, phase: Phase): { waiting?: string } {
  const waiting = waitingFor(current, phase === 'provisioning' && current?.outcome === 'running');
  return waiting ? { waiting } : {};
}

/** What a finished run returns. */
export interface RunResult {
  status: 'completed';
  runId: string;
  finalStep?: number;
  lastCheckpoint?: CheckpointRef;
  attempts: { attempt: number; zone: string; provisioningModel: ProvisioningModel; outcome: AttemptOutcome; costUsd: number; runningSeconds: number }[];
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

/**
 * The memo key under which a run lists the attempts whose release is still in flight (a
 * release beside the next placement, run/releases.ts). The reaper reads it with the run's
 * current attempt: an older attempt listed here is its run's to delete, not the reaper's.
 */
export const RELEASING_MEMO = 'sternaReleasing';

/** The attempts whose release was started and has not yet been heard back, oldest first. */
export function releasingOf(state: RunState): number[] {
  return state.attempts.filter((a) => a.releasing && !a.released).map((a) => a.attempt);
}

/**
 * What the web UI filters on. Cost is rounded to cents so the attributes change (and are
 * upserted) when something a person would notice changed, not on every event.
 */
export function searchAttributesOf(state: RunState, nowMs: number): SearchAttributeUpdatePair[] {
  const live = state.attempts[state.attempts.length - 1];
  return [
    { key: SternaPhase, value: state.phase },
    { key: SternaPreemptions, value: state.preemptions },
    { key: SternaCostUsd, value: Math.round(ledger(state, nowMs).totalCostUsd * 100) / 100 },
    ...(live ? [{ key: SternaZone, value: live.offer.zone }, { key: SternaAccelerator, value: live.offer.accelerator }, { key: SternaAttempt, value: live.attempt }] : []),
    ...(runTeamOf(state) ? [{ key: SternaTeam, value: runTeamOf(state)! }] : []),
    ...(state.gpu ? [{ key: SternaGpuUtil, value: Math.round(meanUtilisation(state.gpu)!) }] : []),
  ];
}
