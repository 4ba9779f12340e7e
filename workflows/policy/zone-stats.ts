/**
 * What the policy has learned about each zone's spot capacity from its own observations:
 * exposure (hours seen available / unavailable) and transitions. Estimates are
 * exposure-over-events (the exponential maximum-likelihood rate) with one extra event
 * pooled from all zones, so a zone seen briefly borrows the others' behaviour and no
 * estimate is infinite. No constant here comes from a particular trace.
 */
import type { Observation, StatsTable, ZoneObservation, ZoneStats } from './types';

export type { StatsTable, ZoneStats };

/** A memory bound for the state carried through continue-as-new, not a model parameter. */
const MAX_RUNS = 256;

/** A zone first seen at `nowHours`: nothing learned yet. */
export function emptyZoneStats(nowHours: number): ZoneStats {
  return { upHours: 0, downHours: 0, preemptions: 0, recoveries: 0, last: null, lastSeenHours: nowHours, runStartHours: nowHours, sawRunStart: false };
}

export function emptyStats(): StatsTable {
  return { zones: {}, allDownHours: 0, observedHours: 0, allDownBefore: false, allSeenBefore: false, lastNowHours: null, upRuns: [], downRuns: [], upResiduals: [] };
}

/**
 * Folds one sighting into a zone's record. Only a zone also seen at the previous
 * decision gives exposure and transitions: across a gap (a live run sees most zones only
 * when it tries them) the change happened at an unknown time, so the record restarts.
 */
function observeZone(
  previous: ZoneStats | undefined,
  z: ZoneObservation,
  nowHours: number,
  previousDecision: number | null,
  byChance: boolean,
  /** The table's completed runs, by which others' looks across a gap are dated. */
  recordedRuns: Pick<StatsTable, 'upRuns' | 'downRuns'>,
): ZoneStats {
  const fresh = emptyZoneStats(nowHours);
  const s: ZoneStats = previous ?? fresh;
  if (z.spotAvailable === 'unknown') return s;
  const contiguous = s.last !== null && previousDecision !== null && s.lastSeenHours >= previousDecision - 1e-9;
  if (!contiguous) {
    const recorded = byChance ? (z.spotAvailable ? recordedRuns.upRuns : recordedRuns.downRuns) : undefined;
    return { ...restarted(s, z.spotAvailable, nowHours, recorded), looks: (s.looks ?? 0) + 1, hits: (s.hits ?? 0) + (z.spotAvailable ? 1 : 0) };
  }
  const elapsed = Math.max(0, nowHours - s.lastSeenHours);
  // The interval since the last look is credited to the state seen then: the change
  // happened somewhere inside it, and this is the unbiased choice for a step-wise probe.
  const upHours = s.upHours + (s.last === true ? elapsed : 0);
  const downHours = s.downHours + (s.last === false ? elapsed : 0);
  const preemptions = s.preemptions + (s.last === true && !z.spotAvailable ? 1 : 0);
  const recoveries = s.recoveries + (s.last === false && z.spotAvailable ? 1 : 0);
  const same = s.last === z.spotAvailable;
  const runStartHours = same ? s.runStartHours : nowHours;
  const sawRunStart = same ? s.sawRunStart : true;
  const next: ZoneStats = { upHours, downHours, preemptions, recoveries, last: z.spotAvailable, lastSeenHours: nowHours, runStartHours, sawRunStart };
  if (same && (s.sampled === true || byChance)) next.sampled = true;
  if (same && s.streakStartHours !== undefined) next.streakStartHours = s.streakStartHours;
  if (s.looks !== undefined) [next.looks, next.hits] = [s.looks, s.hits ?? 0];
  return next;
}

/**
 * A sighting across a gap: the state may have changed and come back unseen, so a new run
 * starts at the sighting. Except when another run's look finds the state this
 * run saw last; `recorded` are then the completed runs of that state. The looks since the
 * streak began (the run's start, or the first look of a streak of such looks) all found
 * this state. If a run that lasted from then to the last look at least as likely as not
 * held through the gap (heldChance, as availabilityChance reads a stale sighting), the run
 * is dated from the streak's start. Otherwise a change happened somewhere in the gap, and
 * its midpoint is the unbiased date, as for exposure; the streak goes on, so a long streak
 * of looks in a market of blips still adds up to a run that held. Dated at the look,
 * capacity seen only along others' looks (a few an hour) always looked young, and a run on
 * on-demand never found it worth the way back. Its start is a guess, so its length is not
 * measured. A run's own launch across a gap keeps the look's date: what a launch finds is
 * priced from what launches have found (foundRemainingHours), and dating those runs back
 * made live runs dearer.
 */
function restarted(s: ZoneStats, available: boolean, nowHours: number, recorded: readonly number[] | undefined): ZoneStats {
  const { sampled: _, streakStartHours: __, ...kept } = s;
  const next: ZoneStats = { ...kept, last: available, lastSeenHours: nowHours, runStartHours: nowHours, sawRunStart: false };
  if (recorded === undefined || s.last !== available) return next;
  const streak = s.streakStartHours ?? s.runStartHours;
  const held = heldChance(recorded, s.lastSeenHours - streak, nowHours - s.lastSeenHours);
  return { ...next, runStartHours: held >= 0.5 ? streak : (s.lastSeenHours + nowHours) / 2, sampled: true, streakStartHours: streak };
}

function pushRun(runs: readonly number[], hours: number): number[] {
  return [...runs, hours].slice(-MAX_RUNS);
}

export function observe(table: StatsTable, obs: Observation): StatsTable {
  const zones = { ...table.zones };
  let { upRuns, downRuns } = table;
  let upResiduals = table.upResiduals ?? [];
  for (const z of obs.zones) {
    const before = zones[z.zone];
    const byChance = z.seenByOthers === true;
    const after = observeZone(before, z, obs.nowHours, table.lastNowHours, byChance, table);
    // A run is complete when it was seen to its end; its length is known only if it was also
    // seen starting, and counts only if this run followed it (others' looks come by chance).
    const ended = before !== undefined && before.last !== null && after.last !== before.last && after.sawRunStart && before.sampled !== true && !byChance;
    if (ended && before.sawRunStart && before.last === true) upRuns = pushRun(upRuns, obs.nowHours - before.runStartHours);
    if (ended && before.sawRunStart && before.last === false) downRuns = pushRun(downRuns, obs.nowHours - before.runStartHours);
    if (ended && !before.sawRunStart && before.last === true) upResiduals = pushRun(upResiduals, obs.nowHours - before.runStartHours);
    zones[z.zone] = after;
  }
  const elapsed = table.lastNowHours === null ? 0 : Math.max(0, obs.nowHours - table.lastNowHours);
  // Whether no zone had capacity is known only when every zone was seen. A live run sees
  // a few zones at a time: what it must plan for is the time it finds none.
  const seen = obs.zones.filter((z) => z.spotAvailable !== 'unknown');
  const tells = seen.length > 0;
  const allDown = tells && seen.every((z) => z.spotAvailable === false);
  const allSeenBefore = table.allSeenBefore ?? true;
  return {
    zones,
    allDownHours: table.allDownHours + (table.allDownBefore ? elapsed : 0),
    observedHours: table.observedHours + (allSeenBefore ? elapsed : 0),
    allDownBefore: allDown,
    allSeenBefore: tells,
    lastNowHours: obs.nowHours,
    upRuns,
    downRuns,
    upResiduals,
  };
}

function totals(table: StatsTable): { up: number; down: number; preemptions: number; recoveries: number } {
  const all = Object.values(table.zones);
  const sum = (f: (s: ZoneStats) => number) => all.reduce((a, s) => a + f(s), 0);
  return { up: sum((s) => s.upHours), down: sum((s) => s.downHours), preemptions: sum((s) => s.preemptions), recoveries: sum((s) => s.recoveries) };
}

/**
 * Expected hours a spot instance started now in `zone` keeps running, at least
 * `floorHours`. Before any evidence the pooled estimate assumes one preemption per
 * `priorHours` (the caller passes the run's own horizon): optimistic enough to try spot,
 * and each observed preemption pulls it towards the zone's real behaviour.
 */
export function expectedUptimeHours(table: StatsTable, zone: string, floorHours: number, priorHours: number): number {
  const t = totals(table);
  const pooled = (t.up + priorHours) / (t.preemptions + 1);
  const s = table.zones[zone];
  const estimate = s === undefined ? pooled : (s.upHours + pooled) / (s.preemptions + 1);
  return Math.max(floorHours, estimate);
}

/** Expected hours until an unavailable `zone` has capacity again; at least `floorHours`. */
export function expectedDowntimeHours(table: StatsTable, zone: string, floorHours: number): number {
  const t = totals(table);
  const pooled = t.down / (t.recoveries + 1);
  const s = table.zones[zone];
  const estimate = s === undefined ? pooled : (s.downHours + pooled) / (s.recoveries + 1);
  return Math.max(floorHours, estimate);
}

/**
 * Fraction of time with no spot capacity in any zone. Until `horizonHours` have been
 * observed, the outages seen so far are taken as all there will be in that horizon, so
 * one early outage does not read as a permanently dry market.
 */
export function allDownFraction(table: StatsTable, horizonHours: number): number {
  const exposure = Math.max(table.observedHours, horizonHours);
  return exposure > 0 ? table.allDownHours / exposure : 0;
}

/**
 * Expected hours left in a run that has lasted `ageHours`, from completed runs longer
 * than that (spot capacity is bursty: most outages and most spot runs are short, and a
 * long one tends to go on). Undefined without such evidence.
 */
export function expectedRemainingHours(runs: readonly number[], ageHours: number): number | undefined {
  let sum = 0;
  let n = 0;
  for (const r of runs) {
    if (r <= ageHours) continue;
    sum += r - ageHours;
    n++;
  }
  return n === 0 ? undefined : sum / n;
}

/** Hours this zone has been in its current state, as far as we have seen. */
export function runAgeHours(table: StatsTable, zone: string, nowHours: number): number {
  const s = table.zones[zone];
  return s === undefined ? 0 : Math.max(0, nowHours - s.runStartHours);
}

/** Median (the lower middle) of the hours left in a run that has lasted `ageHours`, from completed longer runs; undefined without them. */
export function medianRemainingHours(runs: readonly number[], ageHours: number): number | undefined {
  const left = runs.filter((r) => r > ageHours).map((r) => r - ageHours).sort((a, b) => a - b);
  return left.length === 0 ? undefined : left[Math.floor((left.length - 1) / 2)];
}

/** Share of a run that outlasts `fromHours` among those that outlast `sinceHours`; undefined without such runs. */
export function survivalHours(runs: readonly number[], sinceHours: number, fromHours: number): number | undefined {
  const alive = runs.filter((r) => r > sinceHours);
  return alive.length === 0 ? undefined : alive.filter((r) => r > fromHours).length / alive.length;
}

/**
 * Chance that a run seen to last `ageHours` held through the `gapHours` since: the share of
 * the recorded runs that lasted as long which outlast the gap, or with none, as long again
 * (Lindy: age / (age + gap)).
 */
export function heldChance(runs: readonly number[], ageHours: number, gapHours: number): number {
  return survivalHours(runs, ageHours, ageHours + gapHours) ?? ageHours / (ageHours + gapHours);
}

/** Share of observed hours with spot capacity, over all zones, with one step of each as a prior. */
export function upFraction(table: StatsTable, priorHours: number): number {
  const t = totals(table);
  return (t.up + priorHours) / (t.up + t.down + 2 * priorHours);
}

/**
 * Share of the sightings across a gap (ZoneStats.looks: launches and others' looks, all
 * zones pooled) that found capacity, with `prior` (the pooled share of hours with capacity)
 * weighing two looks, as upFraction's own prior weighs a step of each state. Where a live run
 * launches into zones it does not watch, this is what it has seen of a launch's chance of
 * capacity: the hours it watched are mostly its own instance's, seen only while it ran.
 * Pooled, not per zone: a zone's few looks are noise that outweighs its price among probes
 * (a zone's own share, measured on the table: dearer where zones' prices differ).
 */
export function lookShare(table: StatsTable, prior: number): number {
  let hits = 0;
  let looks = 0;
  for (const s of Object.values(table.zones)) {
    hits += s.hits ?? 0;
    looks += s.looks ?? 0;
  }
  return (hits + 2 * prior) / (looks + 2);
}

/**
 * Hours left of capacity found at an arbitrary moment (a launch into a zone not watched).
 * Two kinds of evidence sample it: the runs this table saw from first sight to their end
 * (residuals), and the complete runs, whose remainder at an arbitrary moment is
 * length-biased (a moment falls in a run in proportion to its length). Both are weighed
 * by how many samples each has (so one left-truncated run does not outweigh hundreds of
 * complete ones). `median` picks the likely
 * value instead of the mean. Undefined without evidence.
 */
export function foundRemainingHours(table: StatsTable, median: boolean): number | undefined {
  const residuals = table.upResiduals ?? [];
  const runs = table.upRuns;
  const runTotal = runs.reduce((a, b) => a + b, 0);
  const nRuns = runTotal > 0 ? runs.length : 0;
  const n = residuals.length + nRuns;
  if (n === 0) return undefined;
  // P(remainder > x): each residual and each run weighs one sample.
  const tail = (x: number) =>
    (residuals.filter((r) => r > x).length + (nRuns > 0 ? (nRuns * runs.reduce((a, r) => a + Math.max(0, r - x), 0)) / runTotal : 0)) / n;
  if (!median) {
    const residualSum = residuals.reduce((a, b) => a + b, 0);
    const lengthBiased = nRuns > 0 ? runs.reduce((a, r) => a + r * r, 0) / (2 * runTotal) : 0;
    return (residualSum + nRuns * lengthBiased) / n;
  }
  if (nRuns === 0) {
    const sorted = [...residuals].sort((a, b) => a - b);
    return sorted[Math.floor((sorted.length - 1) / 2)];
  }
  let lo = 0;
  let hi = Math.max(...residuals, ...runs);
  for (let i = 0; i < 50; i++) {
    const mid = (lo + hi) / 2;
    if (tail(mid) > 0.5) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}
