/** Runs the optimum and every online policy on the same seeded windows of one trace. */
import { type JobSettings, ticksFor, windowOf } from './problem';
import { type ThresholdRun, bestFixedPair, thresholdRuns } from './hindsight';
import { zoneMemory } from './memory';
import { FIXED, HINDSIGHT, OPTIMAL, onlinePolicies } from './policies';
import { optimal } from './optimal';
import { View, simulate } from './simulate';
import type { Trace } from './trace';
import { windowStarts } from './windows';

export interface PolicyResult {
  cost: number;
  deadlineMet: boolean;
  finishTick: number;
  schedule: string;
}

export interface WindowResult {
  startTick: number;
  optimalCost: number;
  policies: Record<string, PolicyResult>;
}

export interface PolicySummary {
  meanCostRatio: number;
  p95CostRatio: number;
  deadlinesMet: number;
  windows: number;
  /** Mean over windows of 1 - cost / on-demand cost. */
  meanSavingsVsOnDemand: number;
}

export const Memory = { Cold: 'cold', Warm: 'warm' } as const;
export type Memory = (typeof Memory)[keyof typeof Memory];

/** What the online policies are shown; the optimum is always omniscient. */
export interface Variant {
  view: View;
  memory: Memory;
}

export interface BenchResult {
  trace: string;
  instanceGroup: string;
  instanceGroups: string[];
  gridSeconds: number;
  jobHours: number;
  deadlineHours: number;
  changeoverHours: number;
  changeoverTicks: number;
  view: View;
  memory: Memory;
  zones: string[];
  windows: WindowResult[];
  summary: Record<string, PolicySummary>;
}

export interface BenchOptions extends JobSettings {
  windows: number;
  seed: number;
  /** Also run the two-threshold family with thresholds chosen in hindsight, per window and fixed (hindsight.ts). */
  hindsight?: boolean;
  /** Share of a tick a failed launch from idle costs (default 1). */
  probeFraction?: number;
  /** Fleet view: chance another run sees a zone at a tick (default 0.25). */
  fleetFraction?: number;
  /** Warm memory: hours of trace before the window (default 168). */
  memoryHours?: number;
}

export const DEFAULT_FLEET_FRACTION = 0.25;
export const DEFAULT_MEMORY_HOURS = 168;

type Row = WindowResult & { thresholds?: ThresholdRun[] };

function runWindow(trace: Trace, startTick: number, options: BenchOptions, variants: readonly Variant[]): Row[] {
  const p = windowOf(trace, startTick, options);
  const best = optimal(p);
  if (best === undefined) throw new Error(`window at ${startTick}: the job cannot finish even on on-demand`);
  const memory = variants.some((v) => v.memory === Memory.Warm) ? zoneMemory(trace, startTick, options.memoryHours ?? DEFAULT_MEMORY_HOURS) : undefined;
  const thresholds = options.hindsight === true ? thresholdRuns(p) : undefined;
  return variants.map((v) => {
    const policies: Record<string, PolicyResult> = {
      [OPTIMAL]: { cost: best.cost, deadlineMet: true, finishTick: best.finishTick, schedule: best.schedule },
    };
    const view = {
      view: v.view,
      probeFraction: options.probeFraction ?? 1,
      fleetFraction: options.fleetFraction ?? DEFAULT_FLEET_FRACTION,
      fleetSeed: options.seed * 1_000_003 + startTick,
      memory: v.memory === Memory.Warm ? memory : undefined,
    };
    for (const policy of onlinePolicies) {
      const { cost, deadlineMet, finishTick, schedule } = simulate(p, policy, view);
      policies[policy.name] = { cost, deadlineMet, finishTick, schedule };
    }
    // The threshold family reads every zone each tick: a full-view reference only.
    if (thresholds !== undefined) policies[HINDSIGHT] = thresholdResult(thresholds.reduce((a, b) => (b.cost < a.cost ? b : a)));
    return { startTick, optimalCost: best.cost, policies, thresholds };
  });
}

/** Reported like a policy; `schedule` names the thresholds (ticks) instead. */
function thresholdResult(r: ThresholdRun): PolicyResult {
  return { cost: r.cost, deadlineMet: Number.isFinite(r.cost), finishTick: -1, schedule: `wait ${r.waitTicks} hold ${r.holdTicks}` };
}

/** Nearest-rank percentile. */
function percentile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)];
}

function summarise(windows: WindowResult[], name: string): PolicySummary {
  const ratios = windows.map((w) => w.policies[name].cost / w.optimalCost);
  const savings = windows.map((w) => 1 - w.policies[name].cost / w.policies['on-demand'].cost);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  return {
    meanCostRatio: mean(ratios),
    p95CostRatio: percentile(ratios, 0.95),
    deadlinesMet: windows.filter((w) => w.policies[name].deadlineMet).length,
    windows: windows.length,
    meanSavingsVsOnDemand: mean(savings),
  };
}

/** One result per variant, all on the same windows and optima (computed once). */
export function runBenchVariants(trace: Trace, options: BenchOptions, variants: readonly Variant[]): BenchResult[] {
  const tickHours = trace.gapSeconds / 3600;
  const { deadlineTicks, changeoverTicks } = ticksFor(options, tickHours);
  const starts = windowStarts(trace.ticks, deadlineTicks, options.windows, options.seed);
  const hindsight = options.hindsight === true;
  const perWindow = starts.map((start) => runWindow(trace, start, options, variants));
  return variants.map((variant, i) => {
    const runs = perWindow.map((rows) => rows[i]);
    if (hindsight) {
      const k = bestFixedPair(runs.map((w) => w.thresholds ?? []), runs.map((w) => w.optimalCost));
      for (const w of runs) w.policies[FIXED] = thresholdResult((w.thresholds ?? [])[k]);
    }
    const windows: WindowResult[] = runs.map(({ startTick, optimalCost, policies }) => ({ startTick, optimalCost, policies }));
    const names = [OPTIMAL, ...onlinePolicies.map((p) => p.name), ...(hindsight ? [HINDSIGHT, FIXED] : [])];
    return {
      trace: trace.name,
      instanceGroup: trace.group,
      instanceGroups: trace.groups,
      gridSeconds: trace.gapSeconds,
      jobHours: options.jobHours,
      deadlineHours: options.deadlineHours,
      changeoverHours: options.changeoverHours,
      changeoverTicks,
      view: variant.view,
      memory: variant.memory,
      zones: trace.zones.map((z) => z.zone),
      windows,
      summary: Object.fromEntries(names.map((n) => [n, summarise(windows, n)])),
    };
  });
}

export function runBench(trace: Trace, options: BenchOptions, variant: Variant = { view: View.Full, memory: Memory.Cold }): BenchResult {
  return runBenchVariants(trace, options, [variant])[0];
}
