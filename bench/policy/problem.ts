/**
 * One benchmark window on the grid used: the discrete "Can't Be Late" problem extended
 * to many zones. Modes are small integers so the optimum's tables stay typed arrays.
 */
import type { Trace } from '../common/trace';

export interface Problem {
  zones: string[];
  /** Per zone, per tick of the window: 1 when spot capacity exists. */
  available: Uint8Array[];
  /** Per zone, per tick: USD/hour. */
  spotPrice: Float64Array[];
  /** Per zone: USD/hour. */
  onDemandPrice: number[];
  tickHours: number;
  /** The job must make `workTicks` of progress within the first `deadlineTicks` ticks. */
  deadlineTicks: number;
  workTicks: number;
  /** Paid ticks without progress after every start or switch. */
  changeoverTicks: number;
  /** The flex-start tier, when offered (flex.ts). */
  flex?: FlexTier;
}

/**
 * Flex-start (DWS) in a window: a request in zone z pending at tick t is granted at t when
 * `grant[z][t]` is 1 (the pool's own seeded model, independent of the spot trace); a
 * granted VM runs at `price[z]` and is never preempted.
 */
export interface FlexTier {
  /** Per zone: USD/hour. */
  price: number[];
  /** Per zone, per tick of the window: 1 when a request pending then is granted. */
  grant: Uint8Array[];
  /** Per zone: the mean wait, hours (what an online policy is told: the offer's expected wait). */
  meanWaitHours: number[];
  /** A request not granted within this many ticks fails. */
  maxWaitTicks: number;
  maxWaitHours: number;
  /** The longest a flex-start VM runs (GCE: 7 days). */
  maxRunHours: number;
}

export interface JobSettings {
  jobHours: number;
  deadlineHours: number;
  changeoverHours: number;
}

/** Rounding is against the policies: work and changeover up, the deadline down. */
export function ticksFor(settings: JobSettings, tickHours: number): { workTicks: number; deadlineTicks: number; changeoverTicks: number } {
  const up = (h: number) => Math.ceil(h / tickHours - 1e-9);
  return { workTicks: up(settings.jobHours), deadlineTicks: Math.floor(settings.deadlineHours / tickHours + 1e-9), changeoverTicks: up(settings.changeoverHours) };
}

export function windowOf(trace: Trace, startTick: number, settings: JobSettings): Problem {
  const tickHours = trace.gapSeconds / 3600;
  const ticks = ticksFor(settings, tickHours);
  const end = startTick + ticks.deadlineTicks;
  if (end > trace.ticks) throw new Error(`window ${startTick}+${ticks.deadlineTicks} exceeds the trace (${trace.ticks} ticks)`);
  return {
    zones: trace.zones.map((z) => z.zone),
    available: trace.zones.map((z) => z.available.subarray(startTick, end)),
    spotPrice: trace.zones.map((z) => z.spotPrice.subarray(startTick, end)),
    onDemandPrice: trace.zones.map((z) => z.onDemandPrice),
    tickHours,
    ...ticks,
  };
}

/** Mode 0 is idle, 1..Z spot in zone z-1, Z+1..2Z on-demand in zone z-Z-1, and with a flex tier 2Z+1..3Z flex-start in zone z-2Z-1. */
export const IDLE = 0;

export function modeCount(p: Problem): number {
  return (p.flex === undefined ? 2 : 3) * p.zones.length + 1;
}

export function isSpotMode(p: Problem, mode: number): boolean {
  return mode >= 1 && mode <= p.zones.length;
}

export function isFlexMode(p: Problem, mode: number): boolean {
  return p.flex !== undefined && mode > 2 * p.zones.length;
}

export function zoneOfMode(p: Problem, mode: number): number {
  if (isSpotMode(p, mode)) return mode - 1;
  return isFlexMode(p, mode) ? mode - 2 * p.zones.length - 1 : mode - p.zones.length - 1;
}

/** Whether `mode` can be entered at tick `t`: spot with capacity, flex-start when a request is granted then. */
export function canEnter(p: Problem, mode: number, t: number): boolean {
  if (mode === IDLE) return true;
  const z = zoneOfMode(p, mode);
  if (isSpotMode(p, mode)) return p.available[z][t] === 1;
  return isFlexMode(p, mode) ? p.flex!.grant[z][t] === 1 : true;
}

/** USD/hour of `mode` at tick `t` once running, or Infinity when spot has no capacity. */
export function priceAt(p: Problem, mode: number, t: number): number {
  if (mode === IDLE) return 0;
  const z = zoneOfMode(p, mode);
  if (isSpotMode(p, mode)) return p.available[z][t] === 1 ? p.spotPrice[z][t] : Infinity;
  return isFlexMode(p, mode) ? p.flex!.price[z] : p.onDemandPrice[z];
}
