/**
 * The run's data, as placement weighs it (workflows/data-cost.ts), and its staging as the
 * status shows it: bytes staged, rate, ETA. Pure.
 *
 * A dataset counts when its spec states its `location`; its size is `sizeGb`, or, once an
 * agent has measured the datasets' total (sterna/total-bytes), that total shared evenly
 * among the datasets without a stated size.
 */
import { dataCost, DEFAULT_DATA_TRANSFER, type DataPlace, type DataTransferRates } from '../data-cost';
import type { RunSpec } from '../spec';
import type { AgentSnapshot, Offer } from '../types';
import type { RunState } from './state';

export function dataPlaces(spec: RunSpec, state: RunState): DataPlace[] {
  const unsized = spec.datasets.filter((d) => d.sizeGb === undefined).length;
  const measuredShare = state.staging?.totalBytes !== undefined && unsized > 0 ? state.staging.totalBytes / spec.datasets.length : 0;
  return spec.datasets.filter((d) => d.location !== undefined).map((d) => ({ location: d.location!, bytes: d.sizeGb !== undefined ? d.sizeGb * 1e9 : measuredShare }));
}

export function transferRates(spec: RunSpec): DataTransferRates {
  return { ...DEFAULT_DATA_TRANSFER, ...spec.placement.dataTransfer };
}

/** The USD an attempt on each offer pays to bring the data; undefined when no dataset states a location. */
export function dataCostUsdFor(spec: RunSpec, state: RunState): ((offer: Offer) => number) | undefined {
  const places = dataPlaces(spec, state);
  if (places.length === 0) return undefined;
  const rates = transferRates(spec);
  return (offer) => dataCost(places, offer.region, offer.pricePerHour, rates).totalUsd;
}

/** What the status shows of the live attempt's staging. */
export interface StagingView {
  attempt: number;
  stagedBytes: number;
  totalBytes?: number;
  bytesPerSecond?: number;
  etaSeconds?: number;
}

/** The latest word on staging: kept in the state (JSON-plain). */
export interface StagingProgress {
  attempt: number;
  stagedBytes: number;
  totalBytes?: number;
  /** Epoch ms the attempt's staging was first seen, and of the latest figure. */
  firstAt: number;
  at: number;
}

export function absorbStaging(state: RunState, attempt: number, s: AgentSnapshot, nowMs: number): void {
  if (s.stagedBytes === undefined && s.totalBytes === undefined) return;
  const same = state.staging?.attempt === attempt;
  // The rate is over the time the figures moved: later looks at a finished staging change nothing.
  if (same && (s.stagedBytes ?? state.staging!.stagedBytes) === state.staging!.stagedBytes && (s.totalBytes ?? state.staging!.totalBytes) === state.staging!.totalBytes) return;
  state.staging = {
    attempt,
    stagedBytes: s.stagedBytes ?? (same ? state.staging!.stagedBytes : 0),
    totalBytes: s.totalBytes ?? (same ? state.staging!.totalBytes : undefined),
    firstAt: same ? state.staging!.firstAt : nowMs,
    at: nowMs,
  };
}

export function stagingView(progress: StagingProgress | undefined): StagingView | undefined {
  if (!progress) return undefined;
  const seconds = (progress.at - progress.firstAt) / 1000;
  const rate = seconds > 0 && progress.stagedBytes > 0 ? progress.stagedBytes / seconds : undefined;
  const left = progress.totalBytes !== undefined ? Math.max(0, progress.totalBytes - progress.stagedBytes) : undefined;
  return {
    attempt: progress.attempt,
    stagedBytes: progress.stagedBytes,
    ...(progress.totalBytes !== undefined ? { totalBytes: progress.totalBytes } : {}),
    ...(rate !== undefined ? { bytesPerSecond: Math.round(rate) } : {}),
    ...(left !== undefined && (left === 0 || rate !== undefined) ? { etaSeconds: left === 0 ? 0 : Math.round(left / rate!) } : {}),
  };
}
