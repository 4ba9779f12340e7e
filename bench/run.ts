/** Runs the optimum and every online policy on the same seeded windows of one trace. */
import { type FlexOptions, catalogFlexRatio, flexTierFor, withFlex } from './flex';
import { type JobSettings, type Problem, ticksFor, windowOf } from './problem';
import { type ThresholdPair, type ThresholdRun, bestFixedPair, pairPolicy, thresholdRuns } from './hindsight';
import { zoneMemory } from './memory';
import { FIXED, HINDSIGHT, OPTIMAL, OPTIMAL_NO_FLEX, PAIR, STERNA_NO_FLEX, onlinePolicies } from './policies';
import { sternaPolicy } from '../workflows/policy';
import { optimal } from './optimal';
import { View, simulate } from './simulate';
import type { Trace } from './trace';
import { windowStarts } from './windows';

export interface PolicyResult {
  cost: number;
  deadlineMet: boolean;
  finishTick: number;
  schedule: string;
  /** With the flex-start tier: requests made, and those that ended without capacity. */
  flexRequests?: number;
  flexExpired?: number;
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
  /** A gang of this many nodes (absent: one): capacity where availableNodes >= nodes, every price `nodes` times the node's. */
  nodes?: number;
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
  /** With `--flex`: the tier's terms and what it changes (every ratio in `summary` is then to the optimum with flex). */
  flex?: FlexSummary;
}

/** The flex-start tier's effect over a set of windows. Ratios are means over windows. */
export interface FlexSummary {
  options: FlexOptions;
  priceRatio: number;
  /** The optimum with the tier over the optimum without (<= 1: what the tier can save at most). */
  optimumRatio: number;
  /** sterna with the tier over the optimum with it; sterna without over the optimum without; sterna without over the optimum with. */
  sternaWithFlex: number;
  sternaWithoutFlex: number;
  sternaWithoutVsFlexOptimum: number;
  /** 1 - sterna's cost with the tier / its cost without, per window. */
  sternaSavings: number;
  deadlinesWithFlex: number;
  deadlinesWithoutFlex: number;
  windows: number;
  flexRequests: number;
  flexExpired: number;
}

export interface BenchOptions extends JobSettings {
  windows: number;
  seed: number;
  /** Also run the two-threshold family with thresholds chosen in hindsight, per window and fixed (hindsight.ts). */
  hindsight?: boolean;
  /** Also run the two-threshold family with this one pair (`threshold-pair`; in the full view only, as it reads every zone). */
  thresholds?: ThresholdPair;
  /** Share of a tick a failed launch from idle costs (default 1). */
  probeFraction?: number;
  /** Fleet view: chance another run sees a zone at a tick (default 0.25). */
  fleetFraction?: number;
  /** Warm memory: hours of trace before the window (default 168). */
  memoryHours?: number;
  /** Offer the flex-start tier (flex.ts); sterna is also run without it, and the optimum computed both ways. */
  flex?: FlexOptions;
}

export const DEFAULT_FLEET_FRACTION = 0.25;
export const DEFAULT_MEMORY_HOURS = 168;

type Row = WindowResult & { thresholds?: ThresholdRun[] };

/** The fixed threshold pair a variant runs: the family reads every zone each tick, so the full view only. */
function pairFor(options: BenchOptions, variant: Variant): ThresholdPair | undefined {
  return variant.view === View.Full ? options.thresholds : undefined;
}

function optimum(p: Problem, startTick: number): NonNullable<ReturnType<typeof optimal>> {
  const best = optimal(p);
  if (best === undefined) throw new Error(`window at ${startTick}: the job cannot finish even on on-demand`);
  return best;
}

function runWindow(trace: Trace, startTick: number, options: BenchOptions, variants: readonly Variant[]): Row[] {
  const plain = windowOf(trace, startTick, options);
  const p = options.flex === undefined ? plain : withFlex(plain, flexTierFor(plain, startTick, options.seed, options.flex));
  const best = optimum(p, startTick);
  const bestPlain = options.flex === undefined ? undefined : optimum(plain, startTick);
  const memory = variants.some((v) => v.memory === Memory.Warm) ? zoneMemory(trace, startTick, options.memoryHours ?? DEFAULT_MEMORY_HOURS) : undefined;
  const thresholds = options.hindsight === true ? thresholdRuns(plain) : undefined;
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
      const { cost, deadlineMet, finishTick, schedule, flexRequests, flexExpired } = simulate(p, policy, view);
      policies[policy.name] = { cost, deadlineMet, finishTick, schedule, ...(p.flex ? { flexRequests, flexExpired } : {}) };
    }
    if (bestPlain !== undefined) {
      policies[OPTIMAL_NO_FLEX] = { cost: bestPlain.cost, deadlineMet: true, finishTick: bestPlain.finishTick, schedule: bestPlain.schedule };
      const { cost, deadlineMet, finishTick, schedule } = simulate(plain, sternaPolicy, view);
      policies[STERNA_NO_FLEX] = { cost, deadlineMet, finishTick, schedule };
    }
    // The threshold family reads every zone each tick: a full-view reference only.
    if (thresholds !== undefined) policies[HINDSIGHT] = thresholdResult(thresholds.reduce((a, b) => (b.cost < a.cost ? b : a)));
    const pair = pairFor(options, v);
    if (pair !== undefined) {
      const { cost, deadlineMet, finishTick, schedule } = simulate(p, pairPolicy(pair, p.changeoverTicks), view);
      policies[PAIR] = { cost, deadlineMet, finishTick, schedule };
    }
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
    const pair = pairFor(options, variant) === undefined ? [] : [PAIR];
    const names = [OPTIMAL, ...onlinePolicies.map((p) => p.name), ...(hindsight ? [HINDSIGHT, FIXED] : []), ...pair, ...(options.flex ? [OPTIMAL_NO_FLEX, STERNA_NO_FLEX] : [])];
    return {
      trace: trace.name,
      instanceGroup: trace.group,
      instanceGroups: trace.groups,
      ...(trace.nodes > 1 ? { nodes: trace.nodes } : {}),
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
      ...(options.flex ? { flex: flexSummary(windows, options.flex) } : {}),
    };
  });
}

/** What the flex-start tier changes over `windows` (run with `flex`). */
export function flexSummary(windows: readonly WindowResult[], options: FlexOptions): FlexSummary {
  const mean = (f: (w: WindowResult) => number) => windows.reduce((a, w) => a + f(w), 0) / windows.length;
  const cost = (w: WindowResult, name: string) => w.policies[name].cost;
  return {
    options,
    priceRatio: catalogFlexRatio(),
    optimumRatio: mean((w) => w.optimalCost / cost(w, OPTIMAL_NO_FLEX)),
    sternaWithFlex: mean((w) => cost(w, 'sterna') / w.optimalCost),
    sternaWithoutFlex: mean((w) => cost(w, STERNA_NO_FLEX) / cost(w, OPTIMAL_NO_FLEX)),
    sternaWithoutVsFlexOptimum: mean((w) => cost(w, STERNA_NO_FLEX) / w.optimalCost),
    sternaSavings: mean((w) => 1 - cost(w, 'sterna') / cost(w, STERNA_NO_FLEX)),
    deadlinesWithFlex: windows.filter((w) => w.policies.sterna.deadlineMet).length,
    deadlinesWithoutFlex: windows.filter((w) => w.policies[STERNA_NO_FLEX].deadlineMet).length,
    windows: windows.length,
    flexRequests: windows.reduce((a, w) => a + (w.policies.sterna.flexRequests ?? 0), 0),
    flexExpired: windows.reduce((a, w) => a + (w.policies.sterna.flexExpired ?? 0), 0),
  };
}

export function runBench(trace: Trace, options: BenchOptions, variant: Variant = { view: View.Full, memory: Memory.Cold }): BenchResult {
  return runBenchVariants(trace, options, [variant])[0];
}
