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
  /** USD per hour of slack spent: 0 while slack is plentiful, the on-demand premium once the reserve binds. */
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

/** Each preemption costs a changeover to recover, two when no zone has capacity (to on-demand and back). */
function reserveHoursFor(stats: StatsTable, obs: Observation): number {
  const uptime = Math.max(...obs.zones.map((z) => meanUptimeHours(stats, obs, z.zone)));
  const preemptionsAhead = obs.remainingWorkHours / uptime;
  return preemptionsAhead * obs.changeoverHours * (1 + allDownFraction(stats, obs.hoursUntilDeadline));
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
  const reserveHours = reserveHoursFor(stats, obs);
  const slackPrice = premium * Math.min(1, reserveHours / Math.max(slack, EPS_HOURS));
  const spendable = slack - obs.stepHours - obs.changeoverHours;
  const freeAfterPacedWait = spendable - Math.max(reserveHours, pacedSlackHours(start, obs));
  // Sitting out outages needs pacing only when the slack cannot sit out all those still expected.
  const outagesAhead = allDownFraction(stats, obs.hoursUntilDeadline) * obs.hoursUntilDeadline;
  const roomy = slack - reserveHours >= outagesAhead;
  return { reserveHours, slackPrice, freeAfterWaiting: roomy ? spendable - reserveHours : freeAfterPacedWait, freeAfterPacedWait };
}
