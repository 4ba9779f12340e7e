/**
 * The flex-start (Dynamic Workload Scheduler) tier of the policy, by expected cost under
 * the deadline. A flex-start request waits unpaid for capacity - at most the run's wait
 * window, then it fails - and the VM it gets runs at the flex-start price, never
 * preempted, for at most `maxRunHours` (GCE: 7 days; each cut costs a new start and a new
 * wait). Pure; used by sterna.ts, so the benchmark and the workflow share it.
 *
 * What is known of a zone's wait is its expected length (the offer's estimate). The wait
 * is taken to be exponential with that mean: the chance a request is granted within the
 * window M is 1 - e^(-M/m), and a granted wait lasts m - M e^(-M/m) / (1 - e^(-M/m)) on
 * average. Slack a wait spends is priced at the policy's slack price (slack-budget.ts).
 *
 * Flex-start is weighed against what the policy would do without it:
 * - instead of a fresh start on spot seen up: spot's expected USD per hour of progress
 *   (its changeover amortised over the uptime expected) against flex-start's;
 * - instead of on-demand (a fresh start, or the on-demand instance it runs): the cheaper
 *   in expectation wins;
 * - while it waits for spot (or probes for it): at the last decision from which a full
 *   wait that ends empty-handed still leaves on-demand time to finish, flex-start against
 *   waiting on (spot if it comes, as likely as the policy estimates, else on-demand).
 *   Before that moment waiting is free and keeps both options.
 * A request is made only while the deadline survives a full wait that ends empty-handed.
 */
import { EPS_HOURS, changeoverIn, slackHours } from './deadline';
import { type Action, ActionKind, type Observation, type ZoneObservation, sameAction } from './types';

/** Chance a request is granted within the window, for an exponential wait of mean `meanHours`. */
export function grantChance(maxWaitHours: number, meanHours: number): number {
  if (meanHours <= EPS_HOURS) return 1;
  return 1 - Math.exp(-maxWaitHours / meanHours);
}

/** Mean wait of a granted request: the exponential wait's mean, truncated at the window. */
export function grantedWaitHours(maxWaitHours: number, meanHours: number): number {
  if (meanHours <= EPS_HOURS) return 0;
  const miss = Math.exp(-maxWaitHours / meanHours);
  return Math.max(0, meanHours - (maxWaitHours * miss) / Math.max(1 - miss, EPS_HOURS));
}

/** Strictly cheaper, beyond float noise: equal prices keep the policy's own choice. */
function cheaper(usd: number, than: number): boolean {
  return usd < than - 1e-9 * Math.max(1, Math.abs(than));
}

/** The window as the caller counts it: whole decision steps, rounded up. */
function windowHours(obs: Observation): number {
  return Math.ceil(obs.flexStart!.maxWaitHours / obs.stepHours - 1e-9) * obs.stepHours;
}

/**
 * Whether a request in `zone` made `laterHours` from now still keeps the deadline: a full
 * wait, then (granted at its end, or failed) a start, with one step to spare.
 */
export function flexFits(obs: Observation, zone: ZoneObservation, onDemand: ZoneObservation, laterHours = 0): boolean {
  const start = Math.max(changeoverIn(obs, zone.zone), changeoverIn(obs, onDemand.zone));
  return slackHours(obs) - laterHours - windowHours(obs) - obs.stepHours >= start - EPS_HOURS;
}

/** Expected USD of finishing on on-demand in `zone` (keeping the instance that runs there). */
export function onDemandUsd(obs: Observation, zone: ZoneObservation, slackPrice: number): number {
  const r = obs.remainingWorkHours;
  if (obs.current.kind === ActionKind.OnDemand && obs.current.zone === zone.zone) return zone.onDemandPrice * (r + obs.changeoverRemainingHours);
  const d = changeoverIn(obs, zone.zone);
  return zone.onDemandPrice * (r + d) + (zone.startUsd ?? 0) + slackPrice * d;
}

/** Expected USD of finishing through a flex-start request in `zone` now (on-demand in `onDemand` if it fails). */
export function flexUsd(obs: Observation, zone: ZoneObservation, onDemand: ZoneObservation, slackPrice: number): number {
  const terms = obs.flexStart!;
  const r = obs.remainingWorkHours;
  const mean = zone.flexWaitHours ?? 0;
  const d = changeoverIn(obs, zone.zone);
  // The 7-day cap: every further run needs a new start, and a new wait.
  const starts = 1 + Math.floor(r / terms.maxRunHours);
  const granted = zone.flexPrice! * (r + starts * d) + starts * (zone.startUsd ?? 0) + slackPrice * starts * (grantedWaitHours(terms.maxWaitHours, mean) + d);
  const fresh = { ...obs, current: { kind: ActionKind.Idle } as Action };
  const failed = slackPrice * windowHours(obs) + onDemandUsd(fresh, onDemand, slackPrice);
  const g = grantChance(terms.maxWaitHours, mean);
  return g * granted + (1 - g) * failed;
}

/** The flex-start zone with the lowest expected cost whose request keeps the deadline, if any. */
function bestFlex(obs: Observation, onDemand: ZoneObservation, slackPrice: number, laterHours = 0): { zone: ZoneObservation; usd: number } | undefined {
  let best: { zone: ZoneObservation; usd: number } | undefined;
  for (const z of obs.zones) {
    if (z.flexPrice === undefined || !flexFits(obs, z, onDemand, laterHours)) continue;
    const usd = flexUsd(obs, z, onDemand, slackPrice);
    if (best === undefined || usd < best.usd) best = { zone: z, usd };
  }
  return best;
}

export interface FlexChoice {
  obs: Observation;
  /** What the policy chose without the tier (its safety net applied). */
  action: Action;
  slackPrice: number;
  /** The on-demand zone the policy would finish in. */
  onDemand: ZoneObservation;
  /** Expected USD of the rest of the run if the policy waits on for spot instead. */
  waitingUsd: () => number;
  /** Expected USD of the rest of the run on the spot capacity the policy chose (a fresh start on capacity seen up). */
  spotUsd: () => number;
}

/** The action with the flex-start tier weighed in: a flex-start request where it is cheaper in expectation. */
export function withFlexTier(c: FlexChoice): Action {
  const { obs, action } = c;
  if (obs.flexStart === undefined || obs.remainingWorkHours <= EPS_HOURS || action.kind === ActionKind.FlexStart) return action;
  // A probe into a zone not seen up is a way of waiting; a spot instance that runs is kept (the policy's own rules move it).
  const waiting = action.kind === ActionKind.Idle || (action.kind === ActionKind.Spot && obs.zones.find((z) => z.zone === action.zone)?.spotAvailable !== true);
  if (action.kind === ActionKind.Spot && !waiting && sameAction(action, obs.current)) return action;
  const best = bestFlex(obs, c.onDemand, c.slackPrice);
  if (best === undefined) return action;
  const flex: Action = { kind: ActionKind.FlexStart, zone: best.zone.zone };
  if (action.kind === ActionKind.Spot && !waiting) return cheaper(best.usd, c.spotUsd()) ? flex : action;
  if (action.kind === ActionKind.OnDemand) {
    const od = obs.zones.find((z) => z.zone === action.zone) ?? c.onDemand;
    return cheaper(best.usd, onDemandUsd(obs, od, c.slackPrice)) ? flex : action;
  }
  // Waiting is free while a request one step later would still keep the deadline.
  if (bestFlex(obs, c.onDemand, c.slackPrice, obs.stepHours) !== undefined) return action;
  return cheaper(best.usd, c.waitingUsd()) ? flex : action;
}

/** The USD per hour of the instance `current` runs on (on-demand or flex-start), for the decision to leave it. */
export function runningPrice(obs: Observation, current: Action, fallback: number): number {
  if (current.kind !== ActionKind.FlexStart) return fallback;
  return obs.zones.find((z) => z.zone === current.zone)?.flexPrice ?? fallback;
}
