/**
 * Sterna's placement policy: Uniform Progress ("Can't Be Late", NSDI 2024) generalised
 * to many zones, with prices and observed availability turned into expected cost per
 * hour of progress.
 *
 * - Zone choice: the spot zone with the lowest expected USD per hour of progress, where
 *   a changeover (paid, no progress) is amortised over the run the zone is expected to
 *   give, estimated from its own observed history and how long its capacity has lasted.
 * - Slack is budgeted (slack-budget.ts): a reserve for the changeovers still expected,
 *   a shadow price for the rest, Uniform Progress's pacing when slack is tight.
 * - Hysteresis: a move between spot zones must pay for two changeovers, and leaving
 *   on-demand for spot must pay for the changeover there and back.
 * - The safety net (deadline.ts) overrides all of it when the deadline is at stake.
 *
 * Nothing is fitted to a trace: every quantity is a price, the job's own times, or an
 * estimate from what this run has observed.
 */
import { EPS_HOURS, changeoverIn, cheapestOnDemand, isAvailable, onDemandAction, slackHours, withSafetyNet } from './deadline';
import { onDemandUsd, runningPrice, withFlexTier } from './flex-tier';
import { availabilityChance, foundUptimeHours, likelyRemainingUptimeHours, remainingDowntimeHours, remainingOutageHours, remainingUptimeHours } from './expectations';
import { type RunStart, type SlackBudget, slackBudget } from './slack-budget';
import { type Action, ActionKind, type Observation, type ZoneObservation, idle } from './types';
import { type StatsTable, emptyStats, observe, runAgeHours } from './zone-stats';

/** JSON-plain: carried through the workflow's continue-as-new. */
export interface PolicyState {
  version: 1;
  stats: StatsTable;
  /** Slack and time to the deadline at the first decision (set then), for pacing. */
  start: RunStart | null;
}

/** `memory`: zone statistics from before this run, in the same shape (warm start); none for a cold one. */
export function initialState(memory?: StatsTable): PolicyState {
  return { version: 1, stats: memory ?? emptyStats(), start: null };
}

interface Candidate {
  zone: ZoneObservation;
  /** Expected hours the instance would run before a preemption. */
  uptimeHours: number;
  /** Expected USD per hour of progress once running, the changeover and its slack included. */
  usdPerHour: number;
  /** The same for the launch as a whole: a probe's includes what its failures cost (probeScore). */
  score: number;
  /** A zone not seen at this decision: launching there is a probe that may fail. */
  probe: boolean;
  /** Chance the launch finds capacity (1 for a zone seen with capacity). */
  chance: number;
}

interface Context {
  obs: Observation;
  stats: StatsTable;
  budget: SlackBudget;
  onDemand: ZoneObservation;
  best: Candidate | undefined;
}

function candidateFor(stats: StatsTable, obs: Observation, zone: ZoneObservation, slackPrice: number): Candidate {
  const probe = zone.spotAvailable !== true;
  const uptimeHours = probe ? foundUptimeHours(stats, obs, zone.zone, false) : remainingUptimeHours(stats, obs, zone.zone);
  const chance = probe ? availabilityChance(stats, obs, zone.zone) : 1;
  // A start here also stages the run's data (time, like a changeover) and pays its egress.
  const d = obs.changeoverHours + (zone.startHours ?? 0);
  const usdPerHour = (zone.spotPrice * (uptimeHours + d) + slackPrice * d + (zone.startUsd ?? 0)) / uptimeHours;
  const score = probeScore(stats, obs, { usdPerHour, uptimeHours, chance, slackPrice });
  return { zone, uptimeHours, usdPerHour, score, probe, chance };
}

/** Whether a launch's failures are priced as what they cost (probeScore), not hedged by dividing. */
function pricesFailures(stats: StatsTable): boolean {
  return stats.downRuns.length > 0;
}

/**
 * A launch's expected USD per hour of progress, its failures included. Each failed launch
 * costs a step: no progress, its slack spent. With outages on record the chance
 * is an estimate, so the expected failures before a success, (1 - c) / c, are charged at
 * the zone's own rate and the slack price, over the hours the capacity found will run.
 * Without any outage on record, the chance of a zone seen without capacity is a guess from
 * a single sighting (a failed launch is a point, not a measured outage), and the whole
 * score is divided by it: a hedge that keeps a run from relaunching into the cheapest
 * failed zone step after step.
 */
function probeScore(stats: StatsTable, obs: Observation, launch: { usdPerHour: number; uptimeHours: number; chance: number; slackPrice: number }): number {
  const c = Math.max(launch.chance, EPS_HOURS);
  if (!pricesFailures(stats)) return launch.usdPerHour / c;
  const failedHoursPerHour = (((1 - c) / c) * obs.stepHours) / launch.uptimeHours;
  return launch.usdPerHour * (1 + failedHoursPerHour) + launch.slackPrice * failedHoursPerHour;
}

/** A zone whose launch failed at this very decision point is not worth a second try now. */
function failedJustNow(stats: StatsTable, obs: Observation, zone: string): boolean {
  const s = stats.zones[zone];
  return s !== undefined && s.last === false && s.lastSeenHours >= obs.nowHours - EPS_HOURS;
}

function bestCandidate(stats: StatsTable, obs: Observation, slackPrice: number): Candidate | undefined {
  // Zones not seen now are worth a launch (a probe) only when no seen zone has capacity.
  const known = obs.zones.filter(isAvailable);
  const pool = known.length > 0 ? known : obs.zones.filter((z) => z.spotAvailable === 'unknown' && !failedJustNow(stats, obs, z.zone));
  const scored = pool.map((z) => candidateFor(stats, obs, z, slackPrice)).filter((c) => c.chance > 0);
  return scored.reduce<Candidate | undefined>((best, c) => (best === undefined || c.score < best.score ? c : best), undefined);
}

function contextFor(stats: StatsTable, start: RunStart, obs: Observation): Context {
  const onDemand = cheapestOnDemand(obs.zones, undefined, obs.remainingWorkHours);
  const spotPrice = bestCandidate(stats, obs, 0)?.zone.spotPrice ?? Math.min(...obs.zones.map((z) => z.spotPrice));
  const budget = slackBudget(stats, start, obs, Math.max(0, onDemand.onDemandPrice - spotPrice));
  return { obs, stats, budget, onDemand, best: bestCandidate(stats, obs, budget.slackPrice) };
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
 * for two changeovers and their slack: this one, and the likely move back.
 */
function fromSpot(ctx: Context, zone: string): Action {
  const here = ctx.obs.zones.find((z) => z.zone === zone);
  const stay: Action = { kind: ActionKind.Spot, zone };
  const c = ctx.best;
  if (here === undefined || c === undefined || c.probe || c.zone.zone === zone) return stay;
  const overlap = Math.min(usefulHours(ctx, c), remainingUptimeHours(ctx.stats, ctx.obs, zone));
  const saving = (here.spotPrice - c.zone.spotPrice) * overlap;
  const changeover = changeoverIn(ctx.obs, c.zone.zone) * (c.zone.spotPrice + ctx.budget.slackPrice) + (c.zone.startUsd ?? 0);
  return saving > 2 * changeover ? spot(c) : stay;
}

/**
 * On on-demand (or a flex-start VM, at its price): leave for spot when its likely run (the
 * median, see expectations.ts) pays for the changeover there and the one back ("Can't Be
 * Late" 5.4: o > 2kd/(k-1), with o estimated, not known). Their slack is priced as any
 * other, except when it fits in the slack a wait would spend for free
 * (freeAfterWaiting): the run would idle that slack away at no price, so spending it on the
 * way to spot costs nothing either. Before, a run on on-demand with slack to spare, in a
 * market of short runs, never found one that paid two changeovers and their slack, and
 * finished with the slack unspent.
 */
function fromOnDemand(ctx: Context, current: Action): Action {
  const c = ctx.best;
  if (c === undefined) return current;
  // Capacity that has just appeared is most often a blip: wait to see it hold one step.
  // Capacity a probe would find has no known age: count on what such finds have given.
  if (!c.probe && runAgeHours(ctx.stats, c.zone.zone, ctx.obs.nowHours) < ctx.obs.stepHours - EPS_HOURS) return current;
  const there = changeoverIn(ctx.obs, c.zone.zone);
  const back = current.kind === ActionKind.Idle ? ctx.obs.changeoverHours : changeoverIn(ctx.obs, current.zone);
  const od = runningPrice(ctx.obs, current, ctx.onDemand.onDemandPrice);
  const run = c.probe ? foundUptimeHours(ctx.stats, ctx.obs, c.zone.zone, true) : likelyRemainingUptimeHours(ctx.stats, ctx.obs, c.zone.zone);
  const likely = Math.min(run, ctx.obs.remainingWorkHours);
  // Back to flex-start is a new request: its wait is slack too.
  const waitBack = current.kind === ActionKind.FlexStart ? (ctx.obs.zones.find((z) => z.zone === current.zone)?.flexWaitHours ?? 0) : 0;
  const slackUsed = there + back + waitBack;
  const slackPrice = ctx.budget.freeAfterWaiting >= slackUsed ? 0 : ctx.budget.slackPrice;
  const gain = (od - c.zone.spotPrice) * likely - od * (there + back) - slackUsed * slackPrice - (c.zone.startUsd ?? 0);
  return gain > 0 ? spot(c) : current;
}

/**
 * With slack to spare, waiting for a cheaper zone to come back can beat taking a dearer
 * one now: the wait costs its expected length at the slack price, the dearer zone its
 * premium over the run it would give.
 */
function worthWaiting(ctx: Context, now: Candidate): boolean {
  const { obs, stats } = ctx;
  const horizon = usefulHours(ctx, now) + obs.changeoverHours;
  return obs.zones.some((z) => {
    if (z.spotAvailable !== false || z.spotPrice >= now.zone.spotPrice) return false;
    const wait = remainingDowntimeHours(stats, obs, z.zone);
    return ctx.budget.slackPrice * wait < (now.zone.spotPrice - z.spotPrice) * horizon;
  });
}

/**
 * Nothing running: spot if a zone has capacity (or wait for a cheaper one, see above).
 * In an outage, wait while slack is free, or while the outage is expected to end within
 * a changeover (covering it with on-demand costs two changeovers of slack, waiting it
 * out its length plus one); otherwise cover it with on-demand.
 */
function fromIdle(ctx: Context): Action {
  const { obs, budget, best } = ctx;
  if (best !== undefined && !best.probe) return budget.freeAfterPacedWait >= 0 && worthWaiting(ctx, best) ? idle : spot(best);
  const wait = budget.freeAfterWaiting >= 0 || remainingOutageHours(ctx.stats, obs) <= obs.changeoverHours + EPS_HOURS;
  // A failed launch costs at most the step a wait would, so a wait is spent probing;
  // instead of on-demand, a probe is worth it when it more likely than not finds capacity.
  if (best !== undefined && (wait || best.chance >= 0.5)) return spot(best);
  return wait ? idle : onDemandAction(obs, ctx.onDemand.zone);
}

function choose(ctx: Context): Action {
  const current = ctx.obs.current;
  if (current.kind === ActionKind.Spot) return fromSpot(ctx, current.zone);
  if (current.kind === ActionKind.OnDemand || current.kind === ActionKind.FlexStart) return fromOnDemand(ctx, current);
  return fromIdle(ctx);
}

/**
 * Expected USD of the rest of the run if it waits on for spot: spot as likely as the best
 * zone's chance of capacity (at its expected USD per hour of progress), else on-demand.
 */
function waitingUsd(ctx: Context): number {
  const od = onDemandUsd(ctx.obs, ctx.onDemand, ctx.budget.slackPrice);
  const c = ctx.best;
  if (c === undefined) return od;
  // Without outages on record the score was divided by the chance; times it, it is the rate again (kept so to the float).
  const spotPerHour = pricesFailures(ctx.stats) ? c.usdPerHour : c.score * Math.max(c.chance, EPS_HOURS);
  return c.chance * spotPerHour * ctx.obs.remainingWorkHours + (1 - c.chance) * od;
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
  const start = state.start ?? { slackHours: slackHours(obs), hoursUntilDeadline: obs.hoursUntilDeadline };
  const next: PolicyState = { ...state, stats, start };
  if (obs.remainingWorkHours <= EPS_HOURS) return { action: idle, state: next };
  const ctx = contextFor(stats, start, obs);
  const action = withSafetyNet(obs, choose(ctx));
  const spotUsd = () => (ctx.best?.score ?? Infinity) * obs.remainingWorkHours;
  return { action: withFlexTier({ obs, action, slackPrice: ctx.budget.slackPrice, onDemand: ctx.onDemand, waitingUsd: () => waitingUsd(ctx), spotUsd }), state: next };
}
