/**
 * The checkpoint interval kept current while an attempt trains. Young/Daly's choice
 * (checkpoint-interval.ts) rests on the zone's preemption rate and on what a checkpoint
 * costs, and both move during an attempt: other runs' preemptions reach the project's
 * zone memory, and the agent measures every checkpoint it uploads. So the run looks
 * again every clamp(interval, RECHECK_MIN_SECONDS, RECHECK_MAX_SECONDS) — more often is
 * pointless, the interval only matters at the next checkpoint — reading the zone memory
 * (a query, no cloud API call), and hands the agent a new interval only when the choice
 * moved by at least HYSTERESIS of the one in force, so a wobbling rate does not rewrite
 * the VM's metadata at every look. Pure.
 *
 * Which attempts: spot attempts on GCE with no pinned interval. The agent re-reads the
 * VM's metadata attribute INTERVAL_ATTRIBUTE and passes it on to the trainer through the
 * file named by STERNA_CHECKPOINT_INTERVAL_FILE (activities/agent/sterna-agent.sh). On GKE
 * the agent's inputs are environment variables fixed when the pod is created, so a GKE
 * attempt keeps its starting interval; the next attempt starts with the current choice.
 */
import type { RunSpec } from '../spec';
import { ProvisioningModel } from '../types';
import type { ZoneMemory } from '../zones/memory';
import { intervalForOffer, type IntervalChoice } from './checkpoint-interval';
import { Phase, record, TimelineKind, type AppliedInterval, type Attempt, type RunState } from './state';

/** The smallest move, as a share of the interval in force, worth telling the agent. */
export const HYSTERESIS = 0.2;
export const RECHECK_MIN_SECONDS = 60;
export const RECHECK_MAX_SECONDS = 600;
/** The VM metadata attribute the agent re-reads (sterna-agent.sh). */
export const INTERVAL_ATTRIBUTE = 'sterna-checkpoint-interval';

/** What the activity found: the VM's attribute set, the VM gone, not ours, or a backend that cannot. */
export type IntervalUpdateOutcome = 'set' | 'absent' | 'not-ours' | 'unsupported' | 'failed';

/** Whether the run keeps this attempt's interval current (see the header). */
export function liveIntervalApplies(spec: RunSpec, attempt: Attempt): boolean {
  return spec.checkpoint.interval === undefined && attempt.offer.backend === 'gce' && attempt.offer.provisioningModel === ProvisioningModel.Spot;
}

/** The rule with hysteresis: a new interval goes out only when it differs from the one in force by HYSTERESIS or more. */
export function intervalMoved(appliedSeconds: number, nextSeconds: number): boolean {
  return Math.abs(nextSeconds - appliedSeconds) >= HYSTERESIS * appliedSeconds;
}

/** How long after a look the run looks again, for an attempt checkpointing every `appliedSeconds`. */
export function recheckSeconds(appliedSeconds: number): number {
  return Math.min(RECHECK_MAX_SECONDS, Math.max(RECHECK_MIN_SECONDS, appliedSeconds));
}

export function appliedOf(choice: IntervalChoice): AppliedInterval {
  return { seconds: choice.seconds, preemptionsPerHour: choice.preemptionsPerHour, checkpointSeconds: choice.checkpointSeconds };
}

/** An attempt about to be created: the interval its agent starts with (provisionRequest hands exactly this over). */
export function noteStartInterval(state: RunState, spec: RunSpec, attempt: Attempt, nowMs: number): void {
  attempt.checkpointInterval = appliedOf(intervalForOffer(spec, state, attempt.offer, nowMs));
  state.intervalCheckAt = undefined;
}

export type LiveIntervalCommand = { kind: 'read-zone-memory' } | { kind: 'set-checkpoint-interval'; attempt: number; interval: AppliedInterval };

/**
 * While `live` trains: a new interval for its agent when the choice moved enough, else a
 * fresh read of the zone memory when the look is due, else nothing (wait).
 */
export function liveIntervalStep(state: RunState, spec: RunSpec, live: Attempt, nowMs: number): LiveIntervalCommand | undefined {
  const applied = live.checkpointInterval;
  if (!applied || applied.frozen !== undefined || state.phase !== Phase.Training || !liveIntervalApplies(spec, live)) return undefined;
  const choice = intervalForOffer(spec, state, live.offer, nowMs);
  if (intervalMoved(applied.seconds, choice.seconds)) return { kind: 'set-checkpoint-interval', attempt: live.attempt, interval: appliedOf(choice) };
  const every = recheckSeconds(applied.seconds) * 1000;
  state.intervalCheckAt ??= nowMs + every;
  if (nowMs < state.intervalCheckAt) return undefined;
  state.intervalCheckAt = nowMs + every;
  return { kind: 'read-zone-memory' };
}

/** When the run looks again (undefined while it does not keep `live`'s interval current). */
export function liveIntervalTimer(state: RunState, spec: RunSpec, live: Attempt): number | undefined {
  const applied = live.checkpointInterval;
  if (!applied || applied.frozen !== undefined || state.phase !== Phase.Training || !liveIntervalApplies(spec, live)) return undefined;
  return state.intervalCheckAt;
}

/** A fresh read of the zone memory: the live attempt's zone is replaced, the rest of the run's slice kept as placement read it. */
export function absorbLiveZoneMemory(state: RunState, memory: ZoneMemory | undefined, live: Attempt | undefined): void {
  if (!memory || !live) return;
  const zone = live.offer.zone;
  const kept = (state.zoneMemory?.records ?? []).filter((r) => r.zone !== zone);
  state.zoneMemory = { version: memory.version, halfLifeHours: memory.halfLifeHours, records: [...kept, ...memory.records.filter((r) => r.zone === zone)], counted: [] };
}

const rate = (perHour: number) => `${perHour < 10 ? perHour.toFixed(2) : perHour.toFixed(0)}/h`;
const cost = (seconds: number) => `${seconds < 10 ? seconds.toFixed(2) : seconds.toFixed(0)} s`;

/** What the agent's VM said to a new interval: in force from now, or the attempt keeps the one it has. */
export function absorbIntervalSet(state: RunState, attemptNumber: number, interval: AppliedInterval, outcome: IntervalUpdateOutcome, nowMs: number, message?: string): void {
  const attempt = state.attempts[attemptNumber - 1];
  const before = attempt?.checkpointInterval;
  if (!attempt || !before) return;
  const where = { kind: TimelineKind.CheckpointInterval, attempt: attempt.attempt, zone: attempt.offer.zone };
  if (outcome === 'set') {
    attempt.checkpointInterval = interval;
    record(state, nowMs, {
      ...where,
      event: `checkpoint interval ${before.seconds} s -> ${interval.seconds} s: ${attempt.offer.zone} preempts ${rate(interval.preemptionsPerHour)} (was ${rate(before.preemptionsPerHour)}), a checkpoint costs ${cost(interval.checkpointSeconds)} (was ${cost(before.checkpointSeconds)})`,
    });
    return;
  }
  const why = { absent: 'the VM is gone', 'not-ours': 'the VM under its name is not this run\'s', unsupported: `the ${attempt.offer.backend} backend cannot change a running agent's inputs`, failed: `the update failed: ${message ?? 'unknown error'}` }[outcome];
  attempt.checkpointInterval = { ...before, frozen: why };
  record(state, nowMs, { ...where, event: `checkpoint interval stays ${before.seconds} s for attempt ${attempt.attempt} (wanted ${interval.seconds} s): ${why}` });
}
