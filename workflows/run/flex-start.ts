/**
 * Flex-start (Dynamic Workload Scheduler) attempts: how long each may run, when it is
 * cut, and how its wait shows in the status. Pure. (Whether flex-start beats spot or
 * on-demand is the policy's to weigh: policy/flex-tier.ts.)
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

export function isFlexStart(offer: Offer): boolean {
  return offer.provisioningModel === ProvisioningModel.FlexStart;
}

/**
 * `scheduling.maxRunDuration` for a flex-start VM requested at `nowMs`: the time until
 * `releaseByMs` (the run's own end, flex-cut.ts `runEndMs`; 7 days when it has none), at
 * most 7 days. The duration counts from when the VM starts, so a VM that waited runs past
 * `releaseByMs` by at most its wait; the run itself releases it at its end.
 */
export function flexRunDurationSeconds(releaseByMs: number, nowMs: number): number {
  const untilLimit = Math.floor((releaseByMs - nowMs) / 1000);
  return Math.min(FLEX_START_MAX_RUN_SECONDS, Math.max(FLEX_START_MIN_RUN_SECONDS, untilLimit));
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
