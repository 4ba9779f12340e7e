/**
 * How much slack (hours until the deadline minus hours of work left) the policy may
 * spend, and what an hour of it is worth. Idling and every changeover spend slack;
 * on-demand does not. Running out of it forces on-demand until the end.
 */
import { EPS_HOURS, slackHours } from './deadline';
import { meanUptimeHours } from './expectations';
import type { Observation } from './types';
import { type StatsTable, allDownFraction } from './zone-stats';

export interface SlackBudget {
  /** Slack kept for the changeovers still expected. */
  reserveHours: number;
  /**
   * USD per hour of slack spent: 0 while slack is plentiful, rising to the on-demand premium
   * as the reserve binds, and never more than the spot progress an hour of slack still buys.
   */
  slackPrice: number;
  /** Slack left after waiting one more step and restarting, beyond what is kept back for outages. */
  freeAfterWaiting: number;
  /** The same, also keeping Uniform Progress's pace: for waits that are a choice, not an outage. */
  freeAfterPacedWait: number;
}

export interface RunStart {
  slackHours: number;
  hoursUntilDeadline: number;
}

/**
 * What the budget counts on, estimated once per decision: how long a spot run lasts, and
 * the share of time no zone has capacity (the dry share).
 */
interface Market {
  uptimeHours: number;
  dryShare: number;
}

/**
 * A preempted run goes where capacity is, not always to the zone whose capacity lasts
 * longest: a spot run lasts the mean uptime of all zones. The longest-lasting zone's would
 * leave too little slack for the changeovers of a market whose best zone fails with the
 * rest (a multi-zone outage, then blips).
 */
function marketOf(stats: StatsTable, obs: Observation): Market {
  return {
    uptimeHours: meanUptimeHours(stats, obs, ''),
    dryShare: allDownFraction(stats, obs.hoursUntilDeadline),
  };
}

/** Each preemption costs a changeover to recover, two when no zone has capacity (to on-demand and back). */
function reserveHoursFor(market: Market, obs: Observation): number {
  const preemptionsAhead = obs.remainingWorkHours / market.uptimeHours;
  return preemptionsAhead * obs.changeoverHours * (1 + market.dryShare);
}

/**
 * Hours of slack an hour of spot progress uses: its share of changeovers (one per mean
 * uptime) and of waits for capacity (the dry share's hours per hour with capacity). Above 1,
 * an hour of slack buys less than an hour of spot, so it is worth less than the premium:
 * where capacity comes in blips, a run that prices its slack at the full premium covers the
 * first outage with on-demand and never finds a spot run that pays the way back.
 */
function slackPerSpotHour(market: Market, obs: Observation): number {
  const dry = market.dryShare;
  return obs.changeoverHours / market.uptimeHours + (dry >= 1 ? Infinity : dry / (1 - dry));
}

/**
 * Uniform Progress's pace, in slack: slack left in proportion to time left, so an early
 * long outage cannot eat what later ones will need.
 */
function pacedSlackHours(start: RunStart, obs: Observation): number {
  if (start.hoursUntilDeadline <= 0) return 0;
  return start.slackHours * (obs.hoursUntilDeadline / start.hoursUntilDeadline);
}

export function slackBudget(stats: StatsTable, start: RunStart, obs: Observation, premium: number): SlackBudget {
  const slack = slackHours(obs);
  const market = marketOf(stats, obs);
  const reserveHours = reserveHoursFor(market, obs);
  const slackPrice = (premium * Math.min(1, reserveHours / Math.max(slack, EPS_HOURS))) / Math.max(1, slackPerSpotHour(market, obs));
  const spendable = slack - obs.stepHours - obs.changeoverHours;
  const freeAfterPacedWait = spendable - Math.max(reserveHours, pacedSlackHours(start, obs));
  // Sitting out outages needs pacing only when the slack cannot sit out all those still expected.
  const outagesAhead = market.dryShare * obs.hoursUntilDeadline;
  const roomy = slack - reserveHours >= outagesAhead;
  return { reserveHours, slackPrice, freeAfterWaiting: roomy ? spendable - reserveHours : freeAfterPacedWait, freeAfterPacedWait };
}
