/**
 * Sterna's placement policy: Uniform Progress generalised to many zones, with prices
 * and observed availability turned into expected cost per hour of progress.
 *
 * Slack (hours until the deadline minus hours of work left) is the scarce resource:
 * idling and every changeover spend it, on-demand does not. The policy keeps a reserve
 * of slack for the changeovers it expects to need (expected preemptions over the work
 * left, from observed uptimes) and prices the rest at a shadow price that rises from 0
 * to the on-demand premium as free slack runs out. Every rule below compares money
 * with that price; the safety net guarantees the deadline whatever the estimates say.
 */
import { EPS_HOURS, cheapestOnDemand, isAvailable, onDemandAction, slackHours, withSafetyNet } from './deadline';
import { type Action, ActionKind, type Observation, type ZoneObservation, idle } from './types';
import { type StatsTable, allDownFraction, emptyStats, expectedRemainingHours, expectedUptimeHours, observe, runAgeHours } from './zone-stats';

/** JSON-plain: carried through the workflow's continue-as-new. */
export interface PolicyState {
  version: 1;
  stats: StatsTable;
}

export function initialState(): PolicyState {
  return { version: 1, stats: emptyStats() };
}

interface Candidate {
  zone: ZoneObservation;
  /** Expected hours the instance would run before a preemption. */
  uptimeHours: number;
  /** Expected USD per hour of progress, changeover and its slack included. */
  score: number;
}

interface Context {
  obs: Observation;
  stats: StatsTable;
  onDemand: ZoneObservation;
  /** USD per hour of slack spent. */
  slackPrice: number;
  /** Slack to keep for the changeovers still expected. */
  reserveHours: number;
  best: Candidate | undefined;
}

/** Mean spot run length in `zone`: exposure over preemptions, one preemption per horizon as the prior. */
function meanUptimeHours(stats: StatsTable, obs: Observation, zone: string): number {
  return expectedUptimeHours(stats, zone, obs.stepHours, obs.hoursUntilDeadline);
}

/** Expected hours left of the capacity `zone` has now, given how long it has lasted. */
function remainingUptimeHours(stats: StatsTable, obs: Observation, zone: string): number {
  const age = runAgeHours(stats, zone, obs.nowHours);
  return Math.max(obs.stepHours, expectedRemainingHours(stats.upRuns, age) ?? meanUptimeHours(stats, obs, zone));
}

/** Expected hours until some zone has capacity again; with no longer outage on record, as long again as this one (Lindy). */
function remainingOutageHours(stats: StatsTable, obs: Observation): number {
  const waits = obs.zones.map((z) => {
    const age = runAgeHours(stats, z.zone, obs.nowHours);
    return expectedRemainingHours(stats.downRuns, age) ?? age;
  });
  return Math.max(obs.stepHours, Math.min(...waits));
}

function candidateFor(stats: StatsTable, obs: Observation, zone: ZoneObservation, slackPrice: number): Candidate {
  const uptimeHours = remainingUptimeHours(stats, obs, zone.zone);
  const d = obs.changeoverHours;
  const score = (zone.spotPrice * (uptimeHours + d) + slackPrice * d) / uptimeHours;
  return { zone, uptimeHours, score };
}

function bestCandidate(stats: StatsTable, obs: Observation, slackPrice: number): Candidate | undefined {
  // Zones not probed lately are worth trying only when no probed zone has capacity.
  const known = obs.zones.filter(isAvailable);
  const pool = known.length > 0 ? known : obs.zones.filter((z) => z.spotAvailable === 'unknown' && stats.zones[z.zone]?.last !== false);
  const scored = pool.map((z) => candidateFor(stats, obs, z, slackPrice));
  return scored.reduce<Candidate | undefined>((best, c) => (best === undefined || c.score < best.score ? c : best), undefined);
}

function contextFor(stats: StatsTable, obs: Observation): Context {
  const onDemand = cheapestOnDemand(obs.zones);
  const unpriced = bestCandidate(stats, obs, 0);
  const uptime = Math.max(...obs.zones.map((z) => meanUptimeHours(stats, obs, z.zone)));
  // Each preemption costs one changeover to recover, two when no zone has capacity.
  const reserveHours = (obs.remainingWorkHours / uptime) * obs.changeoverHours * (1 + allDownFraction(stats));
  const slack = Math.max(slackHours(obs), EPS_HOURS);
  const spot = unpriced?.zone.spotPrice ?? Math.min(...obs.zones.map((z) => z.spotPrice));
  const slackPrice = Math.max(0, onDemand.onDemandPrice - spot) * Math.min(1, reserveHours / slack);
  return { obs, stats, onDemand, slackPrice, reserveHours, best: bestCandidate(stats, obs, slackPrice) };
}

/** Hours of progress an instance is worth counting on: its expected uptime, at most the work left. */
function usefulHours(ctx: Context, c: Candidate): number {
  return Math.min(c.uptimeHours, ctx.obs.remainingWorkHours);
}

function spot(c: Candidate): Action {
  return { kind: ActionKind.Spot, zone: c.zone.zone };
}

/**
 * On spot with capacity: move only when the saving, over the time both would run, pays
 * for two changeovers and their slack: this one, and the likely move back (hysteresis).
 */
function fromSpot(ctx: Context, zone: string): Action {
  const here = ctx.obs.zones.find((z) => z.zone === zone);
  const stay: Action = { kind: ActionKind.Spot, zone };
  const c = ctx.best;
  if (here === undefined || c === undefined || c.zone.zone === zone) return stay;
  const overlap = Math.min(usefulHours(ctx, c), remainingUptimeHours(ctx.stats, ctx.obs, zone));
  const saving = (here.spotPrice - c.zone.spotPrice) * overlap;
  const changeover = ctx.obs.changeoverHours * (c.zone.spotPrice + ctx.slackPrice);
  return saving > 2 * changeover ? spot(c) : stay;
}

/**
 * On on-demand: leave for spot when its expected run pays for the changeover there and
 * the likely one back ("Can't Be Late" 5.4: o > 2kd/(k-1), with o estimated).
 */
function fromOnDemand(ctx: Context, current: Action): Action {
  const c = ctx.best;
  if (c === undefined) return current;
  const d = ctx.obs.changeoverHours;
  const od = ctx.onDemand.onDemandPrice;
  const gain = (od - c.zone.spotPrice) * usefulHours(ctx, c) - 2 * od * d - 2 * d * ctx.slackPrice;
  return gain > 0 ? spot(c) : current;
}

/**
 * Nothing running: spot if any zone has capacity. Otherwise wait while slack is free, or
 * while the outage is expected to end sooner than a changeover (covering it with
 * on-demand would cost two changeovers of slack against its length plus one).
 */
function fromIdle(ctx: Context): Action {
  if (ctx.best !== undefined) return spot(ctx.best);
  const { obs } = ctx;
  const freeAfterWaiting = slackHours(obs) - obs.stepHours - obs.changeoverHours - ctx.reserveHours;
  if (freeAfterWaiting >= 0 || remainingOutageHours(ctx.stats, obs) <= obs.changeoverHours + EPS_HOURS) return idle;
  return onDemandAction(obs, ctx.onDemand.zone);
}

function choose(ctx: Context): Action {
  const current = ctx.obs.current;
  if (current.kind === ActionKind.Spot) return fromSpot(ctx, current.zone);
  if (current.kind === ActionKind.OnDemand) return fromOnDemand(ctx, current);
  return fromIdle(ctx);
}

/**
 * One decision of Sterna's policy. Call it at every decision point (each trace tick in
 * the benchmark; on preemption, stockout and every polling interval in the workflow)
 * and carry the returned state to the next call:
 *
 * ```ts
 * let state = initialState();
 * const { action, state: next } = decide(state, {
 *   nowHours: 0, remainingWorkHours: 48, hoursUntilDeadline: 52, changeoverHours: 0.2,
 *   stepHours: 0.25, current: { kind: 'idle' }, changeoverRemainingHours: 0,
 *   zones: [{ zone: 'us-central1-a', spotAvailable: true, spotPrice: 0.9, onDemandPrice: 3.06 },
 *           { zone: 'us-east1-b', spotAvailable: 'unknown', spotPrice: 0.8, onDemandPrice: 3.06 }],
 * });
 * state = next; // action: { kind: 'spot', zone: 'us-central1-a' }
 * ```
 */
export function decide(state: PolicyState, obs: Observation): { action: Action; state: PolicyState } {
  const stats = observe(state.stats, obs);
  const next: PolicyState = { ...state, stats };
  if (obs.remainingWorkHours <= EPS_HOURS) return { action: idle, state: next };
  const action = choose(contextFor(stats, obs));
  return { action: withSafetyNet(obs, action), state: next };
}
