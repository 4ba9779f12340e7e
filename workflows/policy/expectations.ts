/**
 * Expected run lengths, from the policy's own observations (zone-stats.ts), in the form
 * the decision rules need: how long capacity seen now will last, how long an outage
 * seen now will go on. All in hours.
 */
import type { Observation } from './types';
import { type StatsTable, expectedRemainingHours, expectedUptimeHours, foundRemainingHours, heldChance, lookShare, medianRemainingHours, runAgeHours, upFraction } from './zone-stats';

/** Mean spot run length in `zone` (pooled when `zone` is unseen), one preemption per horizon as the prior. */
export function meanUptimeHours(stats: StatsTable, obs: Observation, zone: string): number {
  return expectedUptimeHours(stats, zone, obs.stepHours, obs.hoursUntilDeadline);
}

/**
 * Hours left of the capacity `zone` has now, given how long it has lasted: the pooled
 * runs' conditional mean, scaled by how this zone's mean run compares with all zones'.
 */
export function remainingUptimeHours(stats: StatsTable, obs: Observation, zone: string): number {
  const mean = meanUptimeHours(stats, obs, zone);
  const pooled = expectedRemainingHours(stats.upRuns, runAgeHours(stats, zone, obs.nowHours));
  if (pooled === undefined) return Math.max(obs.stepHours, mean);
  return Math.max(obs.stepHours, (pooled * mean) / meanUptimeHours(stats, obs, ''));
}

/**
 * Hours the capacity `zone` has now will, at least as likely as not, still last: the
 * median of the pooled longer runs' remainders. With bursty capacity the mean is carried
 * by rare multi-day runs while most returns meet a blip; a decision that risks scarce
 * slack should count on the likely run. With no longer run on record: as long again
 * (Lindy), as an outage with none longer on record is read, but never less than the mean
 * run (which a week of blips makes a fraction of what this capacity has already shown).
 */
export function likelyRemainingUptimeHours(stats: StatsTable, obs: Observation, zone: string): number {
  const age = runAgeHours(stats, zone, obs.nowHours);
  const median = medianRemainingHours(stats.upRuns, age);
  if (median !== undefined) return Math.max(obs.stepHours, median);
  const mean = remainingUptimeHours(stats, obs, zone);
  return Math.max(mean, age);
}

/** Hours until `zone` has capacity again; with no longer outage on record, as long again as this one (Lindy). */
export function remainingDowntimeHours(stats: StatsTable, obs: Observation, zone: string): number {
  const age = runAgeHours(stats, zone, obs.nowHours);
  // An outage that has only just begun, with no outage on record, says nothing of its length.
  if (stats.downRuns.length === 0 && age < obs.stepHours) return Infinity;
  return Math.max(obs.stepHours, expectedRemainingHours(stats.downRuns, age) ?? age);
}

/** Hours until some zone seen without capacity has it again (a zone not seen now tells nothing: Infinity). */
export function remainingOutageHours(stats: StatsTable, obs: Observation): number {
  return Math.min(...obs.zones.map((z) => (z.spotAvailable === false ? remainingDowntimeHours(stats, obs, z.zone) : Infinity)));
}

/**
 * Chance that a zone not seen at this decision has spot capacity now: the run last seen
 * there still going (from the pooled runs that lasted as long, or as long again with no
 * such run on record), else the share of looks across a gap that found capacity (lookShare,
 * the zones' share of time with capacity as its prior).
 */
export function availabilityChance(stats: StatsTable, obs: Observation, zone: string): number {
  const share = lookShare(stats, upFraction(stats, obs.stepHours));
  const s = stats.zones[zone];
  if (s === undefined || s.last === null) return share;
  const age = s.lastSeenHours - s.runStartHours + obs.stepHours;
  const stale = Math.max(0, obs.nowHours - s.lastSeenHours);
  const runs = s.last ? stats.upRuns : stats.downRuns;
  const holds = heldChance(runs, age, stale);
  return s.last ? holds + (1 - holds) * share : (1 - holds) * share;
}

/** Hours capacity found by a launch into an unwatched zone is expected (or, with `likely`, as likely as not) to last. */
export function foundUptimeHours(stats: StatsTable, obs: Observation, zone: string, likely: boolean): number {
  // Last seen without capacity: a run found now began since then, on average half that
  // time ago, and a young run in a bursty market is most likely a blip.
  const s = stats.zones[zone];
  // With no run on record that lasted as long, as long again (Lindy).
  if (likely && s?.last === false) {
    const age = (obs.nowHours - s.lastSeenHours) / 2;
    return Math.max(obs.stepHours, medianRemainingHours(stats.upRuns, age) ?? age);
  }
  const found = foundRemainingHours(stats, likely);
  return Math.max(obs.stepHours, found ?? meanUptimeHours(stats, obs, zone));
}
