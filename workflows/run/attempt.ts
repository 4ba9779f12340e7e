/**
 * While an attempt stages and trains: what the observer (or the run's own look) saw of
 * it, notices, its checkpoint interval, the policy's word on leaving spot, the move
 * before a flex-start cut, and idle GPUs. Pure reducers over a draft of the state
 * (machine.ts runs them).
 *
 *   provisioned -> staging -> training -> (snapshot ends it) -> ending.ts endAttempt
 *   follow: ensure-observer | look | read-zone-memory | set-checkpoint-interval | ask-move | wait
 */
import { actionOf } from '../auto-policy';
import { DEFAULT_FLEET_SETTINGS } from '../fleet/contract';
import { isOwnedBy, type Owner } from '../naming';
import { ActionKind } from '../policy';
import type { RunSpec } from '../spec';
import { ProvisioningModel, type AgentSnapshot, type ResourceObservation } from '../types';
import { absorbCheckpointCost } from './checkpoint-interval';
import { absorbStaging, noteStaged } from './data-placement';
import { endAttempt } from './ending';
import { AGENT_EXITS, exitReason, NOT_RUNNABLE_EXITS } from './endings';
import { movedOff, movePlanFor } from './flex-cut';
import { cutAtMs, reachedRunDuration } from './flex-start';
import { gangObservation, namesPartOf } from './gang';
import { absorbLastLine } from './last-line';
import { absorbGpu, idleCheckAtMs, idleVerdict } from './gpu-util';
import { limitAtMs } from './limits';
import { absorbIntervalSet, absorbLiveZoneMemory, liveIntervalStep, liveIntervalTimer } from './live-interval';
import { askPolicy, autoPolicyApplies, POLICY_CHECK_SECONDS, usableFlex } from './policy-inputs';
import { markProgress, noteTraining } from './progress';
import { ownerOf, type Action, type Context, type RunEvent } from './protocol';
import { AttemptOutcome, currentAttempt, Phase, record, TimelineKind, type Attempt, type Ending, type RunState } from './state';

/**
 * The observer promises each run a signal at least every `quietSeconds` (its
 * maxSilenceSeconds, carried in every signal; its default when a signal did not say). It
 * counts as alive for twice that after its last signal, and while it is alive the run
 * never looks itself: at thousands of runs, any per-run look cadence is what exceeds the
 * project's read quota.
 *
 * Once the observer has fallen silent (it died, or was terminated), the run looks for itself
 * at most this often, and asks for the observer again: a dead observer delays a run but
 * never loses it. A run that has not heard the observer yet looks every `pollSeconds`.
 */
export const FALLBACK_LOOK_SECONDS = 60;
/** How long after a flex-start VM's cut the run looks at it (GCE's stop takes a moment to begin). */
export const CUT_LOOK_DELAY_MS = 5_000;

type AttemptEvent = Extract<RunEvent, { kind: 'observed' | 'notice' | 'zone-memory' | 'checkpoint-interval-set' | 'move-asked' }>;

/** This phase's events. */
export function absorbAttemptEvent(state: RunState, spec: RunSpec, event: AttemptEvent, context: Context): Action | undefined {
  const now = context.nowMs;
  switch (event.kind) {
    case 'observed':
      return absorbObservation(state, spec, event.observation, event.via, context);
    case 'zone-memory':
      absorbLiveZoneMemory(state, event.memory, currentAttempt(state));
      return undefined;
    case 'checkpoint-interval-set':
      absorbIntervalSet(state, event.attempt, event.interval, event.outcome, now, event.message);
      return undefined;
    case 'move-asked': {
      const attempt = state.attempts[event.attempt - 1];
      if (!event.delivered) {
        record(state, now, {
          kind: TimelineKind.MoveAsked,
          event: `could not ask ${attempt.ref.name} for its final checkpoint (${event.detail ?? 'no reason given'}); the cut's stop grace is the fallback`,
          attempt: attempt.attempt,
          zone: attempt.offer.zone,
        });
      }
      return undefined;
    }
    case 'notice': {
      const live = currentAttempt(state);
      if (live && namesPartOf(live.ref, event.name)) {
        state.notice = live.ref.name;
        record(state, now, {
          kind: TimelineKind.PreemptionNotice,
          event: `preemption notice for ${event.name}${event.reason ? `: ${event.reason}` : ''}`,
          attempt: live.attempt,
          zone: live.offer.zone,
        });
      }
      return undefined;
    }
  }
}

function absorbObservation(state: RunState, spec: RunSpec, heard: ResourceObservation, via: 'observer' | 'look', context: Context): Action | undefined {
  const live = currentAttempt(state);
  // A gang's node speaks for the gang only when it has something to say (run/gang.ts).
  const observation = live && gangObservation(live.ref, heard);
  if (!live || !observation || observation.name !== live.ref.name || !isOwnedBy(ownerLabels(observation.owner), ownerOf(context, live.attempt))) return undefined;
  if (state.phase !== Phase.Staging && state.phase !== Phase.Training) return undefined;
  const now = context.nowMs;
  state.lastHeardAt = now;
  if (via === 'observer') {
    state.observerHeardAt = now;
    if (observation.quietSeconds !== undefined) state.observerQuietSeconds = observation.quietSeconds;
  }
  const s = observation.snapshot;
  // Before anything ends the attempt: a failed attempt's last line is the one most worth showing.
  absorbLastLine(state, live.attempt, s.lastLine, now);
  absorbStaging(state, live.attempt, s, now);
  if (s.step !== undefined) state.step = s.step;
  if (s.checkpoint && s.checkpoint.step > (state.lastCheckpoint?.step ?? -1)) {
    state.lastCheckpoint = s.checkpoint;
    if (s.checkpointMs !== undefined) absorbCheckpointCost(state, s.checkpointMs / 1000);
    record(state, now, { kind: TimelineKind.Checkpoint, event: `checkpoint at step ${s.checkpoint.step}`, attempt: live.attempt, step: s.checkpoint.step });
  }
  if (s.preempted && s.lifecycle !== 'terminated' && s.lifecycle !== 'gone' && state.notice !== live.ref.name) {
    // Draining: the final checkpoint of the notice period is still to come.
    state.notice = live.ref.name;
    record(state, now, { kind: TimelineKind.PreemptionNotice, event: `preemption notice for ${live.ref.name}: from the provider`, attempt: live.attempt, zone: live.offer.zone });
  }
  // The agent checkpointed and stopped for the move the run asked for before the cut.
  if (movedOff(live, s)) return endAttempt(state, spec, live, AttemptOutcome.RunDurationReached, now, `moved before its run duration ends, from its final checkpoint (step ${state.lastCheckpoint?.step ?? '?'})`);
  // GCE never preempts a flex-start VM: one that stops reached its run duration.
  if (reachedRunDuration(live, s)) return endAttempt(state, spec, live, AttemptOutcome.RunDurationReached, now, `maximum run duration (${live.runDurationSeconds ?? '?'} s) reached`);
  const ending = endingOf(s, state.phase === Phase.Staging);
  if (ending) {
    if (ending.exitCode !== undefined) live.exitCode = ending.exitCode;
    return endAttempt(state, spec, live, ending.outcome, now, ending.reason);
  }
  if (state.phase === Phase.Staging && (s.phase === 'training' || s.phase === 'uploading' || s.phase === 'exited')) {
    state.phase = Phase.Training;
    noteStaged(state, spec, live.offer.region);
    record(state, now, { kind: TimelineKind.Staged, event: `staged ${s.stagedBytes ?? 0} bytes${s.reusedBytes ? ` (${s.reusedBytes} more from the region's data cache)` : ''}`, attempt: live.attempt });
  }
  if (state.phase === Phase.Training) {
    if (s.totalSteps !== undefined) state.totalSteps = s.totalSteps;
    if (s.step !== undefined) markProgress(state, live.attempt, s.step, now);
    if (s.step !== undefined) noteTraining(state, live, s.step, now);
    if (s.gpu) absorbGpu(state, spec.monitoring, live.attempt, s.gpu, now);
  }
  return undefined;
}

function ownerLabels(owner: Owner): Record<string, string> {
  return { 'sterna-run': owner.run, 'sterna-exec': owner.execution, 'sterna-attempt': String(owner.attempt) };
}

/**
 * How a snapshot ends the attempt, if it does. A reclaimed resource is followed through
 * its notice period until it is down, so the final checkpoint it writes is not lost; or,
 * `onExit`, until its agent says it exited, which it does only once that checkpoint is up.
 */
export function endingOf(s: AgentSnapshot, staging: boolean): { outcome: Ending; exitCode?: number; reason?: string } | undefined {
  // The agent publishes its exit only after uploading the final checkpoint.
  if (s.phase === 'exited' && s.exitCode !== undefined && !s.preempted) {
    if (s.exitCode === 0) return { outcome: AttemptOutcome.Completed, exitCode: 0 };
    const prepared = staging && agentEnding(s);
    if (prepared) return prepared;
    if (NOT_RUNNABLE_EXITS[s.exitCode] !== undefined) return { outcome: AttemptOutcome.NotRunnable, exitCode: s.exitCode, reason: `exit code ${s.exitCode}` };
    // Before training starts, a non-zero exit is the agent's own failure, named by its code.
    const agentFailure = staging && AGENT_EXITS[s.exitCode] !== undefined;
    return { outcome: AttemptOutcome.Failed, exitCode: s.exitCode, reason: agentFailure ? exitReason(s.exitCode) : `exit code ${s.exitCode}` };
  }
  if (s.phase === 'failed') return agentEnding(s) ?? { outcome: AttemptOutcome.Failed, exitCode: s.exitCode ?? 70, reason: exitReason(s.exitCode ?? 70) };
  if (s.lifecycle === 'terminated' || s.lifecycle === 'gone') return { outcome: AttemptOutcome.Preempted };
  if (s.preempted && s.phase === 'exited') return { outcome: AttemptOutcome.Preempted };
  return undefined;
}

/** An agent exit that ends the run rather than the attempt (endings.ts AGENT_EXITS), with what failed. */
function agentEnding(s: AgentSnapshot): { outcome: Ending; exitCode: number; reason: string } | undefined {
  const row = s.exitCode === undefined ? undefined : AGENT_EXITS[s.exitCode];
  if (!row?.ending) return undefined;
  const setup = row.ending === AttemptOutcome.SetupFailed && s.setupStep ? `setup command ${s.setupStep.step} of ${s.setupStep.of} exited with code ${s.setupExitCode ?? '?'}` : undefined;
  return { outcome: row.ending, exitCode: s.exitCode!, reason: setup ? `${row.reason}: ${setup}` : row.reason };
}

/**
 * While an attempt stages or trains: ask for the observer, look when it is silent, move
 * the checkpoint interval, ask the policy, move before a cut, wait. Undefined when the
 * policy ended the attempt (a switch): the run's next step is its release.
 */
export function followStep(state: RunState, spec: RunSpec, live: Attempt, context: Context): Action | undefined {
  const now = context.nowMs;
  const aliveMs = 2 * (state.observerQuietSeconds ?? DEFAULT_FLEET_SETTINGS.maxSilenceSeconds) * 1000;
  const observerAlive = state.observerHeardAt !== undefined && now - state.observerHeardAt < aliveMs;
  if (!observerAlive && (state.observerAskedAt === undefined || now - state.observerAskedAt >= aliveMs)) {
    state.observerAskedAt = now;
    return { kind: 'ensure-observer' };
  }
  const lookAt = observerAlive
    ? state.observerHeardAt! + aliveMs
    : (state.lastHeardAt ?? now) + (state.observerHeardAt === undefined ? spec.recovery.pollSeconds : Math.max(spec.recovery.pollSeconds, FALLBACK_LOOK_SECONDS)) * 1000;
  if (now >= lookAt) return { kind: 'look', attempt: live.attempt };
  const liveStep = liveIntervalStep(state, spec, live, now);
  if (liveStep) return liveStep;
  if (state.phase === Phase.Training) {
    const idle = idleVerdict(state, spec, now);
    if (idle?.kind === 'stop') return { kind: 'fail', failure: idle.failure, message: idle.message };
    if (idle?.kind === 'flag') {
      state.gpu!.idle = true;
      record(state, now, { kind: TimelineKind.GpuIdle, event: idle.message, attempt: live.attempt, zone: live.offer.zone });
    }
  }
  // The deadline can force a move from spot to on-demand while spot still runs; the
  // round's offers (kept while the attempt lives) give the policy its prices.
  if (autoPolicyApplies(state, spec) && live.offer.provisioningModel === ProvisioningModel.Spot && state.phase === Phase.Training) {
    state.policyCheckAt ??= now + POLICY_CHECK_SECONDS * 1000;
    if (now >= state.policyCheckAt) {
      state.policyCheckAt = now + POLICY_CHECK_SECONDS * 1000;
      const offers = state.placement?.offers ?? [];
      const move = offers.length > 0 ? askPolicy(state, spec, usableFlex(state, spec, offers, now), actionOf(live.offer), now).kind : undefined;
      if (move === ActionKind.OnDemand || move === ActionKind.FlexStart) return endAttempt(state, spec, live, AttemptOutcome.Switched, now);
    }
  }
  // A flex-start attempt moves before its cut: the agent checkpoints, then the run releases and places again.
  const move = state.phase === Phase.Training ? movePlanFor(state, spec, live) : undefined;
  if (move && now >= move.askAtMs) {
    live.moveAskedAt = new Date(now).toISOString();
    record(state, now, {
      kind: TimelineKind.MoveAsked,
      event: `asking ${live.ref.name} for its final checkpoint, ${Math.round(move.leadSeconds)} s before its flex-start cut`,
      attempt: live.attempt,
      zone: live.offer.zone,
      ...(state.step !== undefined ? { step: state.step } : {}),
    });
    return { kind: 'ask-move', attempt: live.attempt };
  }
  // A flex-start VM is cut at its run duration: look right after, not at the next poll.
  const cut = cutAtMs(live);
  const idleAt = state.phase === Phase.Training ? idleCheckAtMs(state, spec) : undefined;
  const intervalAt = liveIntervalTimer(state, spec, live);
  const timers = [lookAt, limitAtMs(state, spec, live, now), state.policyCheckAt, cut !== undefined && cut > now ? cut + CUT_LOOK_DELAY_MS : undefined, idleAt, move?.askAtMs, intervalAt].filter((t): t is number => t !== undefined);
  return { kind: 'wait', untilMs: Math.min(...timers) };
}
