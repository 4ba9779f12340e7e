/**
 * How often a run checkpoints, chosen per attempt: Young's optimum
 *
 *   interval = sqrt(2 x C x MTBP)      C: seconds one checkpoint costs,
 *                                      MTBP: mean seconds between preemptions (3600 / rate)
 *
 * (Young 1974; Daly 2006 shows it within a few percent of the exact optimum while C is
 * small against MTBP), clamped to [the floor, the cap]. A user's pinned
 * `checkpoint.interval` wins; the cap is `checkpoint.maxInterval` (default 30 min, AutoDL's
 * "at most 30 minutes"); the floor `checkpoint.minInterval` (default MIN_INTERVAL_SECONDS).
 * While an attempt trains, the run keeps the choice current (live-interval.ts).
 *
 * Inputs, and the priors used while they are unknown:
 * - `preemptionsPerHour` of the attempt's zone: the project's zone memory (requests.ts
 *   reads it for spot attempts), or the run's own record there (`ownZoneRate`); PRIOR_PREEMPTIONS_PER_HOUR before anything is
 *   known: one preemption every two hours, rounded up from the mean across the zones of
 *   the traces in /work/shared/traces (0.44 and 0.31 per hour of uptime; `npm run
 *   bench:checkpoint` prints it).
 * - `checkpointSeconds`: what the agent measured (the upload of each checkpoint to
 *   storage, sterna/checkpoint-ms), smoothed; PRIOR_CHECKPOINT_SECONDS before the first.
 * Pure.
 */
import type { RunSpec } from '../spec';
import { ZoneEventKind } from '../placement';
import { ProvisioningModel, type Offer } from '../types';
import { zonePrior } from '../zones/memory';
import type { RunState } from './state';
import { runningSeconds } from './views';

export const DEFAULT_MAX_INTERVAL_SECONDS = 1800;
/** Below a minute, storage request rates and the trainer's own pauses dominate. */
export const MIN_INTERVAL_SECONDS = 60;
export const PRIOR_PREEMPTIONS_PER_HOUR = 0.5;
export const PRIOR_CHECKPOINT_SECONDS = 30;
/** The prior counts as this many hours of watching a zone: one preemption moves the estimate a lot. */
export const PRIOR_WEIGHT_HOURS = 1;
/** Weight of the newest measurement in the smoothed checkpoint cost. */
const COST_SMOOTHING = 0.3;

export interface IntervalInputs {
  preemptionsPerHour?: number;
  checkpointSeconds?: number;
  /** The user's own interval (seconds): used as is. */
  pinnedSeconds?: number;
  capSeconds?: number;
  /** The floor (`checkpoint.minInterval`); MIN_INTERVAL_SECONDS by default. */
  minSeconds?: number;
}

export interface IntervalChoice {
  seconds: number;
  basis: 'pinned' | 'young-daly' | 'cap' | 'floor';
  preemptionsPerHour: number;
  checkpointSeconds: number;
}

export function checkpointInterval(inputs: IntervalInputs): IntervalChoice {
  const rate = inputs.preemptionsPerHour ?? PRIOR_PREEMPTIONS_PER_HOUR;
  const cost = inputs.checkpointSeconds ?? PRIOR_CHECKPOINT_SECONDS;
  const known = { preemptionsPerHour: rate, checkpointSeconds: cost };
  if (inputs.pinnedSeconds !== undefined) return { seconds: inputs.pinnedSeconds, basis: 'pinned', ...known };
  const cap = inputs.capSeconds ?? DEFAULT_MAX_INTERVAL_SECONDS;
  // Never more often than a checkpoint takes to write: the next would queue behind it.
  const floor = Math.min(cap, Math.max(inputs.minSeconds ?? MIN_INTERVAL_SECONDS, Math.ceil(cost)));
  if (!(rate > 0)) return { seconds: cap, basis: 'cap', ...known };
  const young = Math.round(Math.sqrt(2 * cost * (3600 / rate)));
  if (young >= cap) return { seconds: cap, basis: 'cap', ...known };
  if (young <= floor) return { seconds: floor, basis: 'floor', ...known };
  return { seconds: young, basis: 'young-daly', ...known };
}

/**
 * The run's own estimate of a zone's preemption rate: its preemptions there over the
 * hours it ran there, with the prior counted as PRIOR_WEIGHT_HOURS of watching. Undefined
 * where the run never ran (the prior, or zone memory, applies).
 */
export function ownZoneRate(state: RunState, zone: string, nowMs: number): number | undefined {
  const hours = state.attempts.filter((a) => a.offer.zone === zone).reduce((sum, a) => sum + runningSeconds(a, nowMs) / 3600, 0);
  const preemptions = state.zoneEvents.filter((e) => e.zone === zone && e.kind === ZoneEventKind.Preempted).length;
  if (hours === 0 && preemptions === 0) return undefined;
  return (preemptions + PRIOR_PREEMPTIONS_PER_HOUR * PRIOR_WEIGHT_HOURS) / (hours + PRIOR_WEIGHT_HOURS);
}

/** The interval for an attempt in `zone`; `preemptionsPerHour` (zone memory) overrides the run's own estimate. */
export function intervalForZone(spec: RunSpec, state: RunState, zone: string, nowMs: number, preemptionsPerHour?: number): IntervalChoice {
  return checkpointInterval({
    preemptionsPerHour: preemptionsPerHour ?? ownZoneRate(state, zone, nowMs),
    checkpointSeconds: state.checkpointSeconds,
    pinnedSeconds: spec.checkpoint.interval,
    capSeconds: spec.checkpoint.maxInterval,
    minSeconds: spec.checkpoint.minInterval,
  });
}

/** The interval for an attempt on `offer`: the zone memory's rate for a spot offer when the run read one, else the run's own. */
export function intervalForOffer(spec: RunSpec, state: RunState, offer: Offer, nowMs: number): IntervalChoice {
  return intervalForZone(spec, state, offer.zone, nowMs, rememberedRate(state, offer, nowMs));
}

/** The project's zone memory's preemption rate for the offer (spot only), when it has one. */
export function rememberedRate(state: RunState, offer: Offer, nowMs: number): number | undefined {
  if (!state.zoneMemory || offer.provisioningModel !== ProvisioningModel.Spot) return undefined;
  // A gang's own rate (one lost node ends it), as its attempts told the memory.
  return zonePrior(state.zoneMemory, { zone: offer.zone, accelerator: offer.accelerator, model: ProvisioningModel.Spot, ...(offer.nodes !== undefined && offer.nodes > 1 ? { nodes: offer.nodes } : {}) }, nowMs).preemptionsPerHour;
}

/** Folds one measured checkpoint cost (seconds) into the run's smoothed estimate. */
export function absorbCheckpointCost(state: RunState, seconds: number): void {
  if (!(seconds >= 0)) return;
  state.checkpointSeconds = state.checkpointSeconds === undefined ? seconds : (1 - COST_SMOOTHING) * state.checkpointSeconds + COST_SMOOTHING * seconds;
}
