/**
 * Lost work and checkpoint overhead of a checkpoint interval rule on a spot trace. Pure.
 *
 * Model (one job per zone, each zone on its own): the job trains whenever the zone's spot
 * capacity is available. An uptime segment ends in a preemption unless it reaches the end
 * of the trace. Within a segment the job alternates `interval` seconds of training with a
 * checkpoint that pauses it for `C` seconds; on a preemption everything since the last
 * completed checkpoint is lost (a checkpoint being written when the capacity goes counts
 * as lost too). Restart delays are the same for every rule and are left out.
 *
 * The rules: fixed intervals, and the policy (workflows/run/checkpoint-interval.ts) asked
 * at each segment's start with the zone's preemption rate as seen so far in the trace
 * (preemptions over uptime, with the same prior as the run: online, no lookahead), and with
 * the rate of the whole trace (hindsight, for reference).
 */
import { checkpointInterval, PRIOR_PREEMPTIONS_PER_HOUR, PRIOR_WEIGHT_HOURS } from '../../workflows/api';
import type { Trace, ZoneSeries } from '../common/trace';

export interface Segment {
  /** Seconds of uptime. */
  seconds: number;
  /** It ended in a preemption (not at the end of the trace). */
  preempted: boolean;
}

/** A zone's uptime segments, in order. */
export function segmentsOf(zone: ZoneSeries, gapSeconds: number): Segment[] {
  const segments: Segment[] = [];
  let run = 0;
  for (let t = 0; t < zone.available.length; t++) {
    if (zone.available[t]) run++;
    else if (run > 0) {
      segments.push({ seconds: run * gapSeconds, preempted: true });
      run = 0;
    }
  }
  if (run > 0) segments.push({ seconds: run * gapSeconds, preempted: false });
  return segments;
}

/** Lost and overhead seconds of one segment at `interval`, checkpoints costing `cost`. */
export function segmentWaste(segment: Segment, interval: number, cost: number): { lost: number; overhead: number } {
  const cycle = interval + cost;
  const cycles = Math.floor(segment.seconds / cycle);
  const tail = segment.seconds - cycles * cycle;
  return { overhead: cycles * cost, lost: segment.preempted ? tail : 0 };
}

export type IntervalRule = { name: string } & ({ kind: 'fixed'; seconds: number } | { kind: 'policy'; hindsight: boolean });

export interface RuleResult {
  rule: string;
  checkpointSeconds: number;
  uptimeHours: number;
  lostHours: number;
  overheadHours: number;
  /** (lost + overhead) minutes per GPU-hour of uptime. */
  wasteMinutesPerGpuHour: number;
  /** The mean interval the rule used, weighted by uptime (seconds). */
  meanIntervalSeconds: number;
}

export function simulate(trace: Trace, rule: IntervalRule, cost: number): RuleResult {
  let uptime = 0;
  let lost = 0;
  let overhead = 0;
  let weighted = 0;
  for (const zone of trace.zones) {
    const segments = segmentsOf(zone, trace.gapSeconds);
    const whole = rateOf(segments.filter((s) => s.preempted).length, segments.reduce((h, s) => h + s.seconds / 3600, 0));
    let seenPreemptions = 0;
    let seenHours = 0;
    for (const segment of segments) {
      const interval =
        rule.kind === 'fixed' ? rule.seconds : checkpointInterval({ preemptionsPerHour: rule.hindsight ? whole : rateOf(seenPreemptions, seenHours), checkpointSeconds: cost }).seconds;
      const waste = segmentWaste(segment, interval, cost);
      uptime += segment.seconds;
      lost += waste.lost;
      overhead += waste.overhead;
      weighted += interval * segment.seconds;
      seenHours += segment.seconds / 3600;
      if (segment.preempted) seenPreemptions++;
    }
  }
  return {
    rule: rule.name,
    checkpointSeconds: cost,
    uptimeHours: uptime / 3600,
    lostHours: lost / 3600,
    overheadHours: overhead / 3600,
    wasteMinutesPerGpuHour: ((lost + overhead) / uptime) * 60,
    meanIntervalSeconds: weighted / uptime,
  };
}

/** Preemptions per hour of uptime, with the run's prior (checkpoint-interval.ts ownZoneRate). */
function rateOf(preemptions: number, hours: number): number {
  return (preemptions + PRIOR_PREEMPTIONS_PER_HOUR * PRIOR_WEIGHT_HOURS) / (hours + PRIOR_WEIGHT_HOURS);
}

/** Each zone's preemptions per hour of uptime over the whole trace (no prior). */
export function zoneRates(trace: Trace): { zone: string; preemptionsPerHour: number }[] {
  return trace.zones.map((zone) => {
    const segments = segmentsOf(zone, trace.gapSeconds);
    const hours = segments.reduce((h, s) => h + s.seconds / 3600, 0);
    return { zone: zone.zone, preemptionsPerHour: hours > 0 ? segments.filter((s) => s.preempted).length / hours : 0 };
  });
}

export const RULES: IntervalRule[] = [
  { name: 'policy (online rate)', kind: 'policy', hindsight: false },
  { name: 'policy (hindsight rate)', kind: 'policy', hindsight: true },
  { name: 'fixed 5 min', kind: 'fixed', seconds: 300 },
  { name: 'fixed 10 min', kind: 'fixed', seconds: 600 },
  { name: 'fixed 30 min', kind: 'fixed', seconds: 1800 },
];
