/**
 * Flex-start (Dynamic Workload Scheduler) attempts: how long each may run, when it is
 * cut, how its wait shows in the status, and whether the flex-start tier beats on-demand
 * under a deadline. Pure.
 *
 * A flex-start VM is created before capacity exists and waits (GCE status PENDING) for at
 * most the request's wait window; once RUNNING it is never preempted, and GCE stops it at
 * `scheduling.maxRunDuration` (at most 7 days). Every attempt's run duration comes from the
 * run's remaining time (until its deadline or maximum duration), never beyond 7 days. The
 * run moves off the VM before the cut (flex-cut.ts); if it could not, at the cut GCE stops
 * the VM as it stops a preempted one (SIGTERM, grace, TERMINATED): the agent uploads the
 * trainer's final checkpoint within the grace, and the run resumes from it in a new
 * attempt without counting a preemption (endings.ts `Next.Move`).
 */
import { ProvisioningModel, type AgentSnapshot, type Offer } from '../types';
import type { Attempt } from './state';

/** GCE's longest flex-start run: 7 days. */
export const FLEX_START_MAX_RUN_SECONDS = 7 * 24 * 3600;
/** GCE's shortest `maxRunDuration`: an attempt requested at (or past) the run's end still gets a valid one. */
export const FLEX_START_MIN_RUN_SECONDS = 30;
/** The floor before the run-duration guard (runs recorded before `sterna-flex-cut` keep it). */
export const LEGACY_FLEX_START_MIN_RUN_SECONDS = 600;

export function isFlexStart(offer: Offer): boolean {
  return offer.provisioningModel === ProvisioningModel.FlexStart;
}

/**
 * `scheduling.maxRunDuration` for a flex-start VM requested at `nowMs`: the time until
 * `releaseByMs` (the run's own end, flex-cut.ts `runEndMs`; 7 days when it has none), at
 * most 7 days. The duration counts from when the VM starts, so a VM that waited runs past
 * `releaseByMs` by at most its wait; the run itself releases it at its end.
 */
export function flexRunDurationSeconds(releaseByMs: number, nowMs: number, minSeconds = FLEX_START_MIN_RUN_SECONDS): number {
  const untilLimit = Math.floor((releaseByMs - nowMs) / 1000);
  return Math.min(FLEX_START_MAX_RUN_SECONDS, Math.max(minSeconds, untilLimit));
}

/** Epoch ms at which GCE cuts this flex-start attempt (its start + run duration), once it runs. */
export function cutAtMs(attempt: Attempt): number | undefined {
  if (!attempt.startedAt || attempt.runDurationSeconds === undefined) return undefined;
  return Date.parse(attempt.startedAt) + attempt.runDurationSeconds * 1000;
}

/**
 * A flex-start VM that stops without a preemption (GCE never preempts one) was stopped by
 * its run duration: a GCE VM outlives its trainer (it stays RUNNING), so one that stops
 * was stopped, even if its trainer exited 0 on the cut's SIGTERM. A GKE pod ends with its
 * agent instead: there the provider says when its flex-start node was cut (`cut`), and
 * otherwise the agent's published exit decides (endingOf); a pod that lost its node
 * without one was cut. While the resource is still stopping, its agent may be uploading
 * the final checkpoint of the stop grace: the cut counts once the agent is done or the
 * resource is down, so that checkpoint is not lost.
 */
export function reachedRunDuration(attempt: Attempt, s: AgentSnapshot): boolean {
  if (!isFlexStart(attempt.offer) || s.preempted) return false;
  const down = s.lifecycle === 'terminated' || s.lifecycle === 'gone';
  const agentDone = s.phase === 'exited' || s.phase === 'failed';
  if (s.cut) return down || agentDone;
  if (attempt.offer.backend === 'gke' && s.phase === 'exited' && s.exitCode !== undefined) return false;
  return down || (s.lifecycle === 'stopping' && agentDone);
}

/** The status line of an attempt waiting for flex-start capacity, if it is. */
export function waitingFor(attempt: Attempt | undefined, provisioning: boolean): string | undefined {
  if (!attempt || !provisioning || !isFlexStart(attempt.offer) || !attempt.requestedAt) return undefined;
  return `waiting for DWS capacity since ${attempt.requestedAt} (flex-start ${attempt.offer.machineType} in ${attempt.offer.zone})`;
}

export interface FlexTierInputs {
  /** The flex-start offer to weigh (cheapest acceptable, untried). */
  flex: Offer;
  /** The on-demand offer the deadline policy would take instead. */
  onDemand: Offer;
  nowMs: number;
  deadlineMs: number;
  remainingWorkSeconds: number;
  changeoverSeconds: number;
  /** The longest this run lets a flex-start request wait. */
  maxWaitSeconds: number;
}

/**
 * The auto tier: when the deadline policy would move to on-demand, flex-start is the better
 * move if it is cheaper and the deadline still holds after a full wait that ends empty-
 * handed (then on-demand, which the policy would have taken now). The expected cost weighs
 * the price only: flex-start is never preempted, and the 7-day cap costs a changeover per
 * week of work at most.
 */
/**
 * While the deadline policy waits for spot (idle is free), flex-start is requested at the
 * latest moment from which a full wait that ends empty-handed still leaves on-demand time
 * to finish: within one policy step of it. Earlier, spot may come back; later, the
 * policy's own move is on-demand.
 */
export function flexDueWhileWaiting(inputs: FlexTierInputs, stepSeconds: number): boolean {
  const latestStartMs = inputs.deadlineMs - (inputs.maxWaitSeconds + 2 * inputs.changeoverSeconds + inputs.remainingWorkSeconds) * 1000;
  return inputs.nowMs + stepSeconds * 1000 >= latestStartMs && flexBeatsOnDemand(inputs);
}

export function flexBeatsOnDemand(inputs: FlexTierInputs): boolean {
  const { flex, onDemand } = inputs;
  if (flex.pricePerHour >= onDemand.pricePerHour) return false;
  const cuts = Math.floor(inputs.remainingWorkSeconds / FLEX_START_MAX_RUN_SECONDS);
  const worstFinishMs = inputs.nowMs + (inputs.maxWaitSeconds + 2 * inputs.changeoverSeconds + inputs.remainingWorkSeconds) * 1000;
  if (worstFinishMs > inputs.deadlineMs) return false;
  const flexCost = flex.pricePerHour * (inputs.remainingWorkSeconds + (cuts + 1) * inputs.changeoverSeconds);
  const onDemandCost = onDemand.pricePerHour * (inputs.remainingWorkSeconds + inputs.changeoverSeconds);
  return flexCost < onDemandCost;
}
