/**
 * The run's data, as placement weighs it (workflows/data-cost.ts), and its staging as the
 * status shows it: bytes staged, rate, ETA. Pure.
 *
 * A dataset counts when its location is known: stated in the spec (`location`), or read
 * from its bucket through the storage API (GCS `buckets.get`, once per run, at its first
 * placement: activities/storage). A bucket whose location cannot be read (no such bucket,
 * no permission, no storage API) is "location unknown": placement weighs nothing for it,
 * as before, and the timeline says why. Its size
 * is `sizeGb`, or, once an agent has measured the datasets' total (sterna/total-bytes),
 * that total shared evenly among the datasets without a stated size.
 */
import { dataCost, DEFAULT_DATA_TRANSFER, type DataPlace, type DataTransferRates } from '../data-cost';
import { runKey } from '../naming';
import type { BucketAnswer } from '../activity-contract';
import type { RunSpec } from '../spec';
import type { AgentSnapshot, Offer } from '../types';
import { record, TimelineKind, type RunState, type StagingProgress } from './state';

/** The run's cache in `region`: its own prefix, so runs never read each other's data. */
export function dataCacheUri(template: string, region: string, runId: string): string {
  return `${template.replace(/\{region\}/g, region).replace(/\/+$/, '')}/${runKey(runId)}`;
}

/** Once an attempt has staged with a cache, its region holds the data: later attempts there reuse it. */
export function noteStaged(state: RunState, spec: RunSpec, region: string): void {
  if (!spec.placement.dataCache) return;
  state.dataCachedRegions ??= [];
  if (!state.dataCachedRegions.includes(region)) state.dataCachedRegions.push(region);
}

/** The GCS bucket a dataset URI names (gs://<bucket>/...), or undefined for any other URI. */
export function bucketOf(uri: string): string | undefined {
  const match = /^gs:\/\/([^/]+)/.exec(uri);
  return match ? match[1] : undefined;
}

/** Where a dataset lives: its spec's `location`, else its bucket's from the storage API. */
export function datasetLocation(dataset: RunSpec['datasets'][number], state: RunState): string | undefined {
  if (dataset.location !== undefined) return dataset.location;
  const bucket = bucketOf(dataset.uri);
  return bucket === undefined ? undefined : state.bucketLocations?.[bucket]?.location;
}

/** The buckets whose location the run has yet to ask the storage API for (datasets without `location` only). */
export function bucketsToLocate(spec: RunSpec, state: RunState): string[] {
  const buckets = spec.datasets.filter((d) => d.location === undefined).map((d) => bucketOf(d.uri));
  return [...new Set(buckets.filter((b): b is string => b !== undefined && state.bucketLocations?.[b] === undefined))];
}

/** Keeps the answers (each bucket is asked once) and says on the timeline what placement will weigh. */
export function absorbBucketLocations(state: RunState, answers: readonly BucketAnswer[], nowMs: number): void {
  state.bucketLocations ??= {};
  for (const a of answers) {
    if (state.bucketLocations[a.bucket] !== undefined) continue;
    if (a.location) {
      state.bucketLocations[a.bucket] = { location: a.location };
      record(state, nowMs, { kind: TimelineKind.DataLocation, event: `data: gs://${a.bucket} is in ${a.location} (storage API); placement weighs moving it` });
    } else {
      const problem = a.problem ?? 'no answer';
      state.bucketLocations[a.bucket] = { problem };
      record(state, nowMs, {
        kind: TimelineKind.DataLocation,
        event: `data: location of gs://${a.bucket} unknown (${problem}); placement does not weigh moving it — state datasets[].location in the spec to have it weighed`,
      });
    }
  }
}

export function dataPlaces(spec: RunSpec, state: RunState): DataPlace[] {
  const unsized = spec.datasets.filter((d) => d.sizeGb === undefined).length;
  const measuredShare = state.staging?.totalBytes !== undefined && unsized > 0 ? state.staging.totalBytes / spec.datasets.length : 0;
  return spec.datasets.flatMap((d) => {
    const location = datasetLocation(d, state);
    return location === undefined ? [] : [{ location, bytes: d.sizeGb !== undefined ? d.sizeGb * 1e9 : measuredShare }];
  });
}

export function transferRates(spec: RunSpec): DataTransferRates {
  return { ...DEFAULT_DATA_TRANSFER, ...spec.placement.dataTransfer };
}

/** The USD an attempt on each offer pays to bring the data; undefined when no dataset states a location. */
export function dataCostUsdFor(spec: RunSpec, state: RunState): ((offer: Offer) => number) | undefined {
  const places = dataPlaces(spec, state);
  if (places.length === 0) return undefined;
  const rates = transferRates(spec);
  const cached = state.dataCachedRegions ?? [];
  // A region that holds the run's cache stages from there: as if the data lived in it.
  return (offer) => dataCost(cached.includes(offer.region) ? places.map((p) => ({ ...p, location: offer.region })) : places, offer.region, offer.pricePerHour, rates).totalUsd;
}

/** What the status shows of the live attempt's staging. */
export interface StagingView {
  attempt: number;
  stagedBytes: number;
  /** Bytes copied from the run's data cache in the region instead of from the source. */
  reusedBytes?: number;
  totalBytes?: number;
  bytesPerSecond?: number;
  etaSeconds?: number;
}

export function absorbStaging(state: RunState, attempt: number, s: AgentSnapshot, nowMs: number): void {
  if (s.stagedBytes === undefined && s.reusedBytes === undefined && s.totalBytes === undefined) return;
  const before = state.staging?.attempt === attempt ? state.staging : undefined;
  const figures = {
    stagedBytes: s.stagedBytes ?? before?.stagedBytes ?? 0,
    reusedBytes: s.reusedBytes ?? before?.reusedBytes,
    totalBytes: s.totalBytes ?? before?.totalBytes,
  };
  // The rate is over the time the figures moved: later looks at a finished staging change nothing.
  if (before && figures.stagedBytes === before.stagedBytes && figures.reusedBytes === before.reusedBytes && figures.totalBytes === before.totalBytes) return;
  state.staging = { attempt, ...figures, firstAt: before?.firstAt ?? nowMs, at: nowMs };
}

export function stagingView(progress: StagingProgress | undefined): StagingView | undefined {
  if (!progress) return undefined;
  const done = progress.stagedBytes + (progress.reusedBytes ?? 0);
  const seconds = (progress.at - progress.firstAt) / 1000;
  const rate = seconds > 0 && done > 0 ? done / seconds : undefined;
  const left = progress.totalBytes !== undefined ? Math.max(0, progress.totalBytes - done) : undefined;
  return {
    attempt: progress.attempt,
    stagedBytes: progress.stagedBytes,
    ...(progress.reusedBytes !== undefined ? { reusedBytes: progress.reusedBytes } : {}),
    ...(progress.totalBytes !== undefined ? { totalBytes: progress.totalBytes } : {}),
    ...(rate !== undefined ? { bytesPerSecond: Math.round(rate) } : {}),
    ...(left !== undefined && (left === 0 || rate !== undefined) ? { etaSeconds: left === 0 ? 0 : Math.round(left / rate!) } : {}),
  };
}
