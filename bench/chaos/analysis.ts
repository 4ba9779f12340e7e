/**
 * The chaos benchmark's rules, pure: how a run ended, what counts as a duplicate VM, how
 * far a run's ledger is from the emulator's billing, when a zone of a replayed trace
 * loses and regains spot capacity, and the fault schedule a seed makes.
 */
import type { FaultSpec } from '../../emulator/faults';
import type { BillingSummary } from '../../emulator/billing';
import type { TraceFile } from '../../emulator/spot-trace';
import { OwnerLabel, seededRandom } from '../../workflows/api';
import { percentile } from '../scale/analysis';

/** How a run (a workflow id: its latest execution) ended, as the benchmark counts it. */
export const Outcome = {
  Completed: 'completed',
  /** Failed with one of the named failure types (workflows/failures.ts). */
  FailedNamed: 'failed-named',
  /** Failed with anything else: a bug. */
  FailedOther: 'failed-other',
  /** Cancelled by the benchmark (during an in-flight insert). */
  Cancelled: 'cancelled',
  /** Terminated by the benchmark (`temporal workflow terminate`). */
  Terminated: 'terminated',
  /** Still open when the benchmark gave up: must be 0. */
  Stuck: 'stuck',
} as const;
export type Outcome = (typeof Outcome)[keyof typeof Outcome];

export function tally(outcomes: readonly Outcome[]): Record<Outcome, number> {
  const counts = Object.fromEntries(Object.values(Outcome).map((o) => [o, 0])) as Record<Outcome, number>;
  for (const o of outcomes) counts[o]++;
  return counts;
}

/**
 * VMs beyond the first under one owner (run, execution, attempt): names are a function of
 * the owner, so a second instance means a create landed twice, or one was recreated after
 * its delete. The billing keeps deleted instances, with their own instance ids.
 */
export function duplicateVms(billing: readonly Pick<BillingSummary, 'instanceId' | 'labels'>[]): { count: number; owners: string[] } {
  const byOwner = new Map<string, Set<string>>();
  for (const b of billing) {
    const run = b.labels[OwnerLabel.Run];
    if (!run) continue;
    const key = `${run}/${b.labels[OwnerLabel.Execution]}/${b.labels[OwnerLabel.Attempt]}`;
    byOwner.set(key, (byOwner.get(key) ?? new Set()).add(b.instanceId));
  }
  const owners = [...byOwner].filter(([, ids]) => ids.size > 1).map(([key]) => key);
  return { count: [...byOwner.values()].reduce((n, ids) => n + ids.size - 1, 0), owners };
}

/** |ledger - billed| / billed, in per cent (0 when both are 0). */
export function ledgerGapPct(ledgerUsd: number, billedUsd: number): number {
  if (billedUsd === 0) return ledgerUsd === 0 ? 0 : 100;
  return (Math.abs(ledgerUsd - billedUsd) / billedUsd) * 100;
}

export interface Spread {
  count: number;
  p50S?: number;
  p99S?: number;
  maxS?: number;
}

export function spread(seconds: readonly number[]): Spread {
  const round = (x: number | undefined) => (x === undefined ? undefined : Math.round(x * 10) / 10);
  return { count: seconds.length, p50S: round(percentile(seconds, 50)), p99S: round(percentile(seconds, 99)), maxS: round(seconds.length ? Math.max(...seconds) : undefined) };
}

/** A zone of the emulator losing (or regaining) spot capacity, at `atMs` from the start of the fault window. */
export interface ZoneFlip {
  atMs: number;
  zone: string;
  available: boolean;
}

/**
 * Replays a spot availability trace on the emulator's zones: trace zone i plays zone i
 * (as many as both have), one trace tick every `tickMs`, from a tick the seed picks.
 * Only changes are returned; every zone starts available.
 */
export function traceFlips(trace: TraceFile, zones: readonly string[], windowMs: number, tickMs: number, seed: number): ZoneFlip[] {
  const ticks = Math.max(1, Math.floor(windowMs / tickMs));
  const length = Math.min(...trace.entries.map((e) => e.available.length));
  const start = Math.floor(seededRandom(seed ^ 0x7ace)() * Math.max(1, length - ticks));
  const flips: ZoneFlip[] = [];
  trace.entries.slice(0, zones.length).forEach((entry, i) => {
    let available = true;
    for (let t = 0; t < ticks; t++) {
      const now = entry.available[start + t] === '1';
      if (now !== available) flips.push({ atMs: t * tickMs, zone: zones[i], available: now });
      available = now;
    }
  });
  return flips.sort((a, b) => a.atMs - b.atMs);
}

/** What the benchmark does to the stack, when (ms from the start), chosen by the seed. */
/**
 * The background fault mix: `percent` of every GCE call fails, half as 503, a third as
 * 429 and a sixth hung for 15 s first (the light mix is about 6 %, its heavy 25 %).
 */
export function backgroundFaults(percent: number): FaultSpec[] {
  const share = percent / 100;
  return [
    { fraction: share / 2, status: 503 },
    { fraction: share / 3, status: 429 },
    { fraction: share / 6, hangMs: 15_000 },
  ];
}

/**
 * Runs that find VMs someone else put under their names: a fiftieth of the runs (at
 * least one), never run 0 (its id is reused) nor a run the plan terminates.
 */
export function foreignNameRuns(runs: number, plan: FaultPlan): number[] {
  const terminated = new Set(plan.terminations.map((t) => t.run));
  const wanted = Math.max(1, Math.round(runs / 50));
  const chosen: number[] = [];
  for (let i = 1; i < runs && chosen.length < wanted; i++) if (!terminated.has(i)) chosen.push(i);
  return chosen;
}

export interface FaultPlan {
  workerKills: number[];
  serverRestartAt: number;
  outage: { atMs: number; seconds: number };
  /** Runs started (with their insert hung) and cancelled a moment later. */
  cancelsAt: number;
  /** Run 0 is terminated then started again under the same workflow id. */
  reuseAt: number;
  /** Run indexes terminated (a tenth), each at its time. */
  terminations: { run: number; atMs: number }[];
}

export function faultPlan(runs: number, windowMs: number, outageSeconds: number, seed: number): FaultPlan {
  const random = seededRandom(seed);
  const within = (from: number, to: number) => Math.round(windowMs * (from + random() * (to - from)));
  const terminated = new Set<number>();
  const wanted = Math.max(1, Math.round(runs / 10));
  // Run 0 is the reused workflow id; the cancelled runs come on top of `runs`.
  while (terminated.size < Math.min(wanted, runs - 1)) terminated.add(1 + Math.floor(random() * (runs - 1)));
  return {
    workerKills: [within(0.1, 0.2), within(0.55, 0.65)].sort((a, b) => a - b),
    serverRestartAt: within(0.35, 0.45),
    outage: { atMs: within(0.2, 0.3), seconds: outageSeconds },
    cancelsAt: within(0.05, 0.1),
    reuseAt: within(0.15, 0.25),
    terminations: [...terminated].sort((a, b) => a - b).map((run) => ({ run, atMs: within(0.1, 0.6) })),
  };
}
