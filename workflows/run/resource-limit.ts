/**
 * The VM-side limit of an attempt: the time after which its resource stops by itself
 * (GCE `scheduling.terminationTime`, GKE `activeDeadlineSeconds`), so that a run whose
 * workflow is gone (terminated, reset, lost with its server) stops paying on its own.
 *
 *   releaseBy = min(deadline, start + time.maxRunDuration) + margin, at most GCE's 120 days
 *
 * The run itself stops at its limit and releases within seconds; the margin is the
 * run's time to do so, so the resource's own limit only ever acts when nothing else did.
 * A deadline moved later after the create does not move this limit: the resource then
 * stops early and the run resumes from its checkpoint, as after a preemption.
 *
 * A run that keeps a failed attempt for inspection (recovery.keepOnFailure, run/keep.ts)
 * gets a margin of at least that keep: an attempt can fail up to the run's own limit and
 * is then kept for `keepOnFailure`, so this is as far as the limit needs to move for the
 * keep to last, and no further. GCE cannot move a running VM's limit (setScheduling wants
 * it stopped), so it is set this far at the create; a kept VM's keep is cut to this limit
 * where it comes first (the `keep` activity labels the earlier time).
 */
import type { RunSpec } from '../spec';
import type { RunState } from './state';

/** The run's own release at its limit comes well within this (seconds). */
export const RESOURCE_LIMIT_MARGIN_SECONDS = 15 * 60;
/** GCE's longest time limit (120 days): also the bound of a run with neither deadline nor maximum duration. */
export const MAX_RESOURCE_LIMIT_SECONDS = 120 * 24 * 3600;

/** Epoch ms after which the attempt's resource must not run, whoever is (not) left to release it. */
export function resourceReleaseByMs(state: RunState, spec: RunSpec, nowMs: number): number {
  const ends: number[] = [];
  if (state.deadline) ends.push(Date.parse(state.deadline));
  if (spec.time.maxRunDuration !== undefined) ends.push(Date.parse(state.startedAt) + spec.time.maxRunDuration * 1000);
  const longest = nowMs + MAX_RESOURCE_LIMIT_SECONDS * 1000;
  if (ends.length === 0) return longest;
  const margin = Math.max(RESOURCE_LIMIT_MARGIN_SECONDS, spec.recovery.keepOnFailure ?? 0);
  return Math.min(longest, Math.max(nowMs, Math.min(...ends)) + margin * 1000);
}
