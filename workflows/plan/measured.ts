/**
 * Throughput measured by past runs: how many steps per second a spec (by name) trained on
 * each accelerator, so a plan can predict from what this trainer did rather than from a
 * datasheet. Pure and JSON-plain: the throughputMemory workflow (throughput-memory.ts)
 * keeps it, runs tell it through activities, `sterna plan` reads it.
 *
 *   sampleOf(attempt, spec, ...)       -> ThroughputSample   one released attempt's training
 *   recordSample(memory, sample)       -> memory             folded in once (by resource)
 *   measuredFor(memory, name, accels)  -> MeasuredThroughput what a plan needs
 *
 * A sample is the live attempt's steps from its first step heard while training to its
 * last new step heard (run/progress.ts `noteTraining`): staging, restarts and the wait
 * after the last step are not in it. Rates are kept per GPU (steps / (seconds x GPUs)),
 * so a run on 2 GPUs or 2 nodes informs one on 1: scaling is assumed linear (data
 * parallel), the same assumption the datasheet table makes (plan/throughput.ts).
 * A preemption's cost is measured too: when an attempt resumes after one, the wall
 * seconds from the last step heard before the preemption to the first step heard after
 * it, less the time the steps between would have taken at the old rate (negative when
 * work was lost), is what that preemption cost: restart and lost work together, in the
 * unit the plan's model uses (plan/predict.ts). Attempts that never trained in between
 * (stockouts, a failed start) are in that gap, as they are in the run's time.
 * No decay: a trainer's speed on a GPU does not drift with the hour the way spot capacity
 * does; the newest MAX_SAMPLES samples per spec and accelerator are kept, so a changed
 * trainer replaces the old figure within a few runs.
 */
import { totalStepsOf } from '../run/progress';
import { AttemptOutcome, type Attempt, type RunState } from '../run/state';
import type { RunSpec } from '../spec';
import { gpuEquivalent } from '../pricing-slices';

export interface ThroughputSample {
  specName: string;
  accelerator: string;
  /** GPUs the attempt trained on: accelerators per node x nodes, in whole-GPU equivalents for slices. */
  gpus: number;
  steps: number;
  seconds: number;
  /** The run's total steps (the trainer's report or monitoring.totalSteps), when known. */
  totalSteps?: number;
  /** Seconds the preemption before this attempt cost (restart and lost work), when it resumed after one. */
  lossSeconds?: number;
  /** Epoch ms the sample was taken (the attempt's release, the teller's workflow time). */
  at: number;
  /** The attempt's resource name: a sample told twice counts once. */
  resource: string;
}

export interface ThroughputRecord {
  specName: string;
  accelerator: string;
  /** Newest last: [steps, seconds, gpus, epoch ms]. */
  samples: [number, number, number, number][];
  /** The newest total steps reported by a run of this spec on this accelerator. */
  totalSteps?: number;
  /** Seconds preemptions cost attempts on this accelerator that resumed after one, newest last: [seconds, epoch ms]. */
  losses?: [number, number][];
  lastAt: number;
}

export interface ThroughputMemory {
  version: 1;
  records: ThroughputRecord[];
  /** Resources already counted, oldest first (de-duplication). */
  counted: string[];
}

/** What a plan uses for one accelerator. */
export interface Measured {
  /** Steps per second per GPU, pooled over the kept samples (total steps / total GPU-seconds). */
  stepsPerGpuSecond: number;
  samples: number;
  /** Seconds of training the figure rests on. */
  seconds: number;
  totalSteps?: number;
}

/** Measured throughput of one spec, by accelerator. */
export type MeasuredThroughput = Record<string, Measured>;

/** What a preemption cost runs of one spec: the median of the kept samples. */
export interface MeasuredLoss {
  seconds: number;
  samples: number;
}

/** Size bounds, so the memory stays a small payload however long it lives. */
export const MAX_RECORDS = 300;
export const MAX_SAMPLES = 16;
export const MAX_COUNTED = 1000;
/** A sample shorter than this says more about polling than about the trainer. */
export const MIN_SAMPLE_SECONDS = 2;

export function emptyThroughputMemory(): ThroughputMemory {
  return { version: 1, records: [], counted: [] };
}

/**
 * The sample a released attempt gives, if it trained long enough to measure; undefined
 * for a run without a name (nothing to file it under) or an attempt that never trained.
 */
export function sampleOf(attempt: Attempt, specName: string | undefined, nodes: number, totalSteps: number | undefined, nowMs: number, before?: Attempt): ThroughputSample | undefined {
  const t = attempt.training;
  if (!specName || !t || t.steps <= 0 || !(t.seconds >= MIN_SAMPLE_SECONDS)) return undefined;
  const lossSeconds = before ? preemptionLoss(before, attempt) : undefined;
  return {
    specName,
    accelerator: attempt.offer.accelerator,
    // Whole-GPU equivalents: a MIG partition or a time-shared GPU counts as its share.
    gpus: gpuEquivalent(attempt.offer.acceleratorCount, attempt.offer) * nodes,
    steps: t.steps,
    seconds: t.seconds,
    ...(totalSteps !== undefined ? { totalSteps } : {}),
    ...(lossSeconds !== undefined ? { lossSeconds } : {}),
    at: nowMs,
    resource: attempt.ref.name,
  };
}

/**
 * What the preemption of `before` cost until `after` trained again: the wall time from
 * the last step heard on one to the first heard on the other, less what the steps
 * between would have taken at `before`'s rate. Undefined unless `before` was preempted
 * and both trained measurably.
 */
export function preemptionLoss(before: Attempt, after: Attempt): number | undefined {
  const b = before.training;
  const a = after.training;
  if (before.outcome !== AttemptOutcome.Preempted || !b || !a || b.steps <= 0 || !(b.seconds > 0)) return undefined;
  const rate = b.steps / b.seconds;
  const lastMs = b.fromMs + b.seconds * 1000;
  const gapSeconds = (a.fromMs - lastMs) / 1000;
  const progressed = a.fromStep - (b.fromStep + b.steps);
  const loss = gapSeconds - progressed / rate;
  return Number.isFinite(loss) && gapSeconds >= 0 ? Math.max(0, loss) : undefined;
}

/** The samples of released attempts not told yet (`told`: attempt numbers already told). */
export function samplesToTell(state: RunState, spec: RunSpec, told: ReadonlySet<number>, nowMs: number): { attempts: number[]; samples: ThroughputSample[] } {
  const fresh = state.attempts.filter((a) => a.released && !told.has(a.attempt));
  const totalSteps = totalStepsOf(state, spec);
  // The attempt that trained last before each one: its preemption, if it was one, is what this one resumed from.
  const trainedBefore = (n: number) => state.attempts.slice(0, n - 1).reverse().find((a) => a.training && a.training.steps > 0);
  const samples = fresh.map((a) => sampleOf(a, spec.name, spec.resources.nodes, totalSteps, nowMs, trainedBefore(a.attempt))).filter((s): s is ThroughputSample => s !== undefined);
  return { attempts: fresh.map((a) => a.attempt), samples };
}

function sameKey(r: ThroughputRecord, s: { specName: string; accelerator: string }): boolean {
  return r.specName === s.specName && r.accelerator === s.accelerator;
}

/** Folds one sample in; a sample of a resource already counted is ignored. */
export function recordSample(memory: ThroughputMemory, sample: ThroughputSample): ThroughputMemory {
  if (memory.counted.includes(sample.resource)) return memory;
  const index = memory.records.findIndex((r) => sameKey(r, sample));
  const before: ThroughputRecord = index >= 0 ? memory.records[index] : { specName: sample.specName, accelerator: sample.accelerator, samples: [], lastAt: sample.at };
  const samples = [...before.samples, [sample.steps, sample.seconds, sample.gpus, sample.at] as [number, number, number, number]].sort((a, b) => a[3] - b[3]).slice(-MAX_SAMPLES);
  const losses = sample.lossSeconds === undefined ? before.losses : [...(before.losses ?? []), [sample.lossSeconds, sample.at] as [number, number]].sort((a, b) => a[1] - b[1]).slice(-MAX_SAMPLES);
  const next: ThroughputRecord = {
    ...before,
    samples,
    ...(losses ? { losses } : {}),
    lastAt: Math.max(before.lastAt, sample.at),
    ...(sample.totalSteps !== undefined && sample.at >= before.lastAt ? { totalSteps: sample.totalSteps } : {}),
  };
  const records = index >= 0 ? memory.records.map((r, i) => (i === index ? next : r)) : [...memory.records, next];
  const bounded = records.length <= MAX_RECORDS ? records : [...records].sort((a, b) => b.lastAt - a.lastAt).slice(0, MAX_RECORDS);
  return { ...memory, records: bounded, counted: [...memory.counted, sample.resource].slice(-MAX_COUNTED) };
}

/** The memory's figures for one spec name and these accelerators (those with none are absent). */
export function measuredFor(memory: ThroughputMemory | undefined, specName: string | undefined, accelerators: readonly string[]): MeasuredThroughput {
  const out: MeasuredThroughput = {};
  if (!memory || !specName) return out;
  for (const r of memory.records) {
    if (r.specName !== specName || !accelerators.includes(r.accelerator)) continue;
    const steps = r.samples.reduce((s, [n]) => s + n, 0);
    const gpuSeconds = r.samples.reduce((s, [, sec, gpus]) => s + sec * gpus, 0);
    if (steps <= 0 || gpuSeconds <= 0) continue;
    out[r.accelerator] = {
      stepsPerGpuSecond: steps / gpuSeconds,
      samples: r.samples.length,
      seconds: r.samples.reduce((s, [, sec]) => s + sec, 0),
      ...(r.totalSteps !== undefined ? { totalSteps: r.totalSteps } : {}),
    };
  }
  return out;
}

/** The median of what preemptions cost runs of this spec, over the kept samples of these accelerators. */
export function measuredLossFor(memory: ThroughputMemory | undefined, specName: string | undefined, accelerators: readonly string[]): MeasuredLoss | undefined {
  if (!memory || !specName) return undefined;
  const losses = memory.records.filter((r) => r.specName === specName && accelerators.includes(r.accelerator)).flatMap((r) => (r.losses ?? []).map(([s]) => s));
  if (losses.length === 0) return undefined;
  const sorted = [...losses].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return { seconds: sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2, samples: sorted.length };
}

/** The part of the memory one spec's plan needs. */
export function throughputSlice(memory: ThroughputMemory, specName: string, accelerators: readonly string[]): ThroughputMemory {
  return { ...memory, records: memory.records.filter((r) => r.specName === specName && accelerators.includes(r.accelerator)), counted: [] };
}

export function isThroughputMemory(value: unknown): value is ThroughputMemory {
  const m = value as ThroughputMemory | undefined;
  return typeof m === 'object' && m !== null && m.version === 1 && Array.isArray(m.records) && Array.isArray(m.counted);
}

/** True when `value` is a sample the memory can fold in (signals come from outside the workflow). */
export function isThroughputSample(value: unknown): value is ThroughputSample {
  const s = value as ThroughputSample | undefined;
  if (typeof s !== 'object' || s === null) return false;
  const text = (v: unknown) => typeof v === 'string' && v.length > 0 && v.length <= 200;
  const positive = (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v > 0;
  return (
    text(s.specName) &&
    text(s.accelerator) &&
    text(s.resource) &&
    positive(s.gpus) &&
    positive(s.steps) &&
    positive(s.seconds) &&
    Number.isFinite(s.at) &&
    (s.totalSteps === undefined || positive(s.totalSteps)) &&
    (s.lossSeconds === undefined || (typeof s.lossSeconds === 'number' && Number.isFinite(s.lossSeconds) && s.lossSeconds >= 0))
  );
}
