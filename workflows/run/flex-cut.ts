/**
 * The run-duration guard of a flex-start attempt: the run moves off the VM before GCE (or
 * GKE) cuts it, instead of betting its last stretch of work on the cut's stop grace.
 *
 *   askAt = cutAt - (CHECKPOINT_SAFETY x checkpointSeconds + MOVE_MARGIN_SECONDS)
 *
 * At `askAt` the run asks the agent for a final checkpoint (GCE: the `sterna-move`
 * instance attribute, which the agent watches); the agent stops the trainer as a
 * preemption notice would, uploads its checkpoint, and exits; the run then releases the
 * VM and resumes on its next choice, counting no preemption. The lead is what the move
 * takes: writing the checkpoint (the agent's measured upload time, doubled against a
 * slower write at the end; the prior until one is measured), plus a margin for the trainer
 * to finish its step, the run to hear the exit and the release to land. If the agent does
 * not answer (an older agent), the cut still comes and the final checkpoint of its stop
 * grace is the fallback, as before.
 *
 * A cut at or after the run's own end needs no move: the run stops there anyway. Pure.
 */
import type { RunSpec } from '../spec';
import type { AgentSnapshot } from '../types';
import { PRIOR_CHECKPOINT_SECONDS } from './checkpoint-interval';
import { cutAtMs, isFlexStart } from './flex-start';
import type { Attempt, RunState } from './state';

/** The final checkpoint may take longer than the periodic ones measured (a busy disk, a larger state). */
export const CHECKPOINT_SAFETY = 2;
/** The trainer's last step, the run hearing the agent's exit (observer or look), the release: well within a minute. */
export const MOVE_MARGIN_SECONDS = 60;

export interface MoveInputs {
  /** Epoch ms at which the provider cuts the attempt (its start + run duration). */
  cutAtMs: number;
  /** Epoch ms at which the run itself ends (deadline, time.maxRunDuration); undefined without either. */
  runEndMs?: number;
  /** The agent's measured checkpoint time, smoothed (seconds); the prior while unknown. */
  checkpointSeconds?: number;
}

export interface MovePlan {
  /** When to ask the agent for its final checkpoint (epoch ms). */
  askAtMs: number;
  /** Seconds before the cut that the ask comes. */
  leadSeconds: number;
}

/** When to ask for the final checkpoint before the cut, or undefined when the run ends at or before the cut anyway. */
export function planMove(inputs: MoveInputs): MovePlan | undefined {
  if (inputs.runEndMs !== undefined && inputs.cutAtMs >= inputs.runEndMs) return undefined;
  const checkpoint = inputs.checkpointSeconds ?? PRIOR_CHECKPOINT_SECONDS;
  const leadSeconds = CHECKPOINT_SAFETY * checkpoint + MOVE_MARGIN_SECONDS;
  return { askAtMs: inputs.cutAtMs - leadSeconds * 1000, leadSeconds };
}

/**
 * Epoch ms at which the run ends by its own limits (deadline, start + time.maxRunDuration),
 * without the resource margin of resource-limit.ts: a flex-start VM cut there loses nothing
 * the run would have kept.
 */
export function runEndMs(state: RunState, spec: RunSpec): number | undefined {
  const ends: number[] = [];
  if (state.deadline) ends.push(Date.parse(state.deadline));
  if (spec.time.maxRunDuration !== undefined) ends.push(Date.parse(state.startedAt) + spec.time.maxRunDuration * 1000);
  return ends.length ? Math.min(...ends) : undefined;
}

/** The move plan of a live flex-start attempt not yet asked to move, if it has one. */
export function movePlanFor(state: RunState, spec: RunSpec, attempt: Attempt): MovePlan | undefined {
  if (!isFlexStart(attempt.offer) || attempt.moveAskedAt) return undefined;
  const cut = cutAtMs(attempt);
  if (cut === undefined) return undefined;
  return planMove({ cutAtMs: cut, runEndMs: runEndMs(state, spec), checkpointSeconds: state.checkpointSeconds });
}

/**
 * The agent answered the run's ask: it stopped the trainer for the move and has exited
 * after uploading the final checkpoint. A trainer that finished before the agent saw the
 * ask exits without `moving`, and completes as usual.
 */
export function movedOff(attempt: Attempt, s: AgentSnapshot): boolean {
  return attempt.moveAskedAt !== undefined && s.moving === true && s.phase === 'exited' && s.exitCode !== undefined;
}
