/**
 * The run as a state machine: `next(state, spec, event, context)` folds one event into
 * the state and returns the one command to carry out next. Pure: no I/O, no clock but
 * `context.nowMs`, so server-less tests and the workflow run the same rules.
 *
 *   start -> find-capacity -> offers -> provision -> provisioned -> wait/look -> observed
 *     ... -> (attempt ends) -> release -> released -> complete | next offer | place again
 *
 * The workflow (training-run.ts) only carries commands out: activities, timers, messages.
 */
import type { BucketAnswer, CreateWatch, DatasetAnswer, UnpricedZone } from '../activity-contract';
import { missingDatasets } from './datasets';
import { actionOf, decideAuto, offersFor } from '../auto-policy';
import { FailureType } from '../failures';
import { DEFAULT_FLEET_SETTINGS } from '../fleet/contract';
import type { ResourceObservation } from '../messages';
import { isOwnedBy, resourceName, runKey, type Owner } from '../naming';
import { sliceKey } from '../gpu-slices';
import { inCooldown, rankOffers, type PlacementPolicy } from '../placement';
import { ActionKind, idle } from '../policy';
import { flexStartMaxWaitSeconds, modelsOf } from '../pricing';
import type { PriceStamp } from '../pricing-book/contract';
import { PricingMode, type RunSpec } from '../spec';
import { ProvisioningModel, type AgentSnapshot, type Offer } from '../types';
import type { ZoneMemory } from '../zones/memory';
import { memoryFor, memoryStats, rankWithMemory, rememberedEvents } from '../zones/prior';
import { AGENT_EXITS, ENDINGS, exitReason, Next, NOT_RUNNABLE_EXITS, PROVISION_FAILURES } from './endings';
import { movedOff, movePlanFor, runEndMs } from './flex-cut';
import { cutAtMs, flexRunDurationSeconds, FLEX_START_MAX_RUN_SECONDS, isFlexStart, reachedRunDuration } from './flex-start';
import { limitAtMs, limitReached, remainingWorkSeconds } from './limits';
import { absorbGpu, idleCheckAtMs, idleVerdict } from './gpu-util';
import { gangObservation, gangRef, gangSize, namesPartOf } from './gang';
import { absorbCheckpointCost } from './checkpoint-interval';
import { absorbBucketLocations, absorbStaging, dataCostUsdFor, noteStaged } from './data-placement';
import { absorbIntervalSet, absorbLiveZoneMemory, liveIntervalStep, liveIntervalTimer, noteStartInterval, type IntervalUpdateOutcome } from './live-interval';
import { dataCostsFor, flexTermsFor } from './auto-costs';
import { absorbPrices, unpricedNote } from './prices';
import { markProgress, noteTraining } from './progress';
import { afterFailure, afterPreemption } from './recovery';
import { AttemptOutcome, currentAttempt, Phase, record, TimelineKind, type AppliedInterval, type Attempt, type Ending, type RunState } from './state';
import { absorbAdmission, asking, awaitingAdmission, reaskAt } from '../teams/run-admission';
import type { AdmissionDecision } from '../teams/rules';
import { checksFailureMessage, findingsThatStopARun, type Finding } from '../checks';

/** What happened, as the workflow tells the machine. */
export type RunEvent =
  | { kind: 'start' }
  /**
   * `zoneMemory`: the project's zone memory for this run's accelerators, when the run read it (workflows/zones).
   * `bucketLocations`: the storage API's word on the datasets' buckets, when the run asked (run/data-placement.ts).
   * `datasets`: whether each dataset exists, asked before the run's first VM (run/datasets.ts).
   */
  | { kind: 'offers'; offers: Offer[]; unpriced?: UnpricedZone[]; prices?: PriceStamp; zoneMemory?: ZoneMemory; bucketLocations?: BucketAnswer[]; datasets?: DatasetAnswer[] }
  /** The zone memory read again while an attempt trains (undefined: not reachable). */
  | { kind: 'zone-memory'; memory?: ZoneMemory }
  /** What came of handing the live attempt's agent a new checkpoint interval (run/live-interval.ts). */
  | { kind: 'checkpoint-interval-set'; attempt: number; interval: AppliedInterval; outcome: IntervalUpdateOutcome; message?: string }
  | { kind: 'provisioned'; attempt: number; startedAt?: string; adopted: boolean; observerAsked?: boolean }
  /** A provision that ended with a named failure (workflows/failures.ts). */
  | { kind: 'provision-failed'; attempt: number; failure: string; message: string }
  | { kind: 'released'; attempt: number; outcome: 'deleted' | 'absent' | 'not-ours'; startedAt?: string; stoppedAt?: string; createWatch?: CreateWatch }
  /** A release running beside the run began (its `released` comes later), or it failed: it is asked again, before anything else. */
  | { kind: 'releasing'; attempt: number }
  | { kind: 'release-failed'; attempt: number; message: string }
  /** What the fleet observer signalled, or what the run's own look saw. */
  | { kind: 'observed'; observation: ResourceObservation; via: 'observer' | 'look' }
  | { kind: 'notice'; name: string; reason?: string }
  /** The fleet observer was asked for (started if it was not running), or could not be. */
  | { kind: 'observer-asked' }
  /** A timer fired or a limit moved: re-evaluate. */
  | { kind: 'tick' }
  /** What the checks before the run found; undefined: this worker could not check (the run goes on). */
  | { kind: 'checked'; findings?: Finding[] }
  /** The team's answer to the run's admission request (workflows/teams). */
  | { kind: 'admission'; decision: AdmissionDecision }
  /** The admission request reached the team. */
  | { kind: 'admission-asked'; teamWebhooks?: boolean }
  /** The ask for a final checkpoint before the flex-start cut reached the agent, or could not (`detail` says why). */
  | { kind: 'move-asked'; attempt: number; delivered: boolean; detail?: string };

/** What to do next. */
export type Command =
  /** The checks before the run (credentials, quotas, buckets, image): answered by `checked`. */
  | { kind: 'check' }
  | { kind: 'find-capacity' }
  | { kind: 'provision'; attempt: number }
  /** `beside`: the run goes on while it runs, and hears `releasing` now and `released` when it is done. */
  | { kind: 'release'; attempt: number; createMayBeInFlight: boolean; beside?: boolean }
  /** One direct look at the live attempt: the fallback when nothing was heard for a while. */
  | { kind: 'look'; attempt: number }
  /** Ask for the fleet observer of this run's backend: it starts it if it is not running. */
  | { kind: 'ensure-observer' }
  /** Ask the run's team to admit it (workflows/teams); its answer comes as an `admission` event. */
  | { kind: 'ask-admission' }
  /** Ask a flex-start attempt's agent for its final checkpoint, to move before the cut (flex-cut.ts); answered by `move-asked`. */
  | { kind: 'ask-move'; attempt: number }
  /** Read the project's zone memory again (a `zone-memory` event): the live attempt's interval may move. */
  | { kind: 'read-zone-memory' }
  /** Hand the live attempt's agent a new checkpoint interval (a `checkpoint-interval-set` event). */
  | { kind: 'set-checkpoint-interval'; attempt: number; interval: AppliedInterval }
  /** Wait for the next message, or until `untilMs`. */
  | { kind: 'wait'; untilMs?: number }
  | { kind: 'continue-as-new' }
  | { kind: 'complete' }
  /** `logTailOf`: the attempt whose log's last lines the failure carries (its agent or command failed). */
  | { kind: 'fail'; failure: FailureType; message: string; details?: unknown; logTailOf?: number };

export interface Context {
  nowMs: number;
  workflowId: string;
  /** This execution chain's token (naming.ts). */
  execution: string;
  continueAsNewSuggested: boolean;
  /** A newer version of the worker deployment is current: continue as new onto it (workflows/versions.ts). */
  newVersionCurrent?: boolean;
  /** Events in this execution's history so far (the SDK's `historyLength`). */
  historyLength?: number;
  /** Attempts the state held when this execution began (continue-as-new bound). */
  attemptsAtStart: number;
}

/** Continue as new after this many attempts even if the server does not suggest it. */
export const ATTEMPTS_PER_RUN = 50;

/**
 * Continue as new once an execution's history has this many events, well before the
 * server's suggestion (about 4,000). A cached run's memory on the worker grows with its
 * history: the SDK core keeps a state machine for every command the execution issued,
 * about 1 KB of worker memory per event in all (bench/README.md, rows Q and Q4), so a
 * worker's memory is bounded by its runs times this budget, not by how long they run.
 * A training run adds about 11 events a minute (an observer signal, its task, the wake
 * timer moved), so this is a new execution every 10 to 15 minutes; a new execution
 * costs a handful of events (its start, first task, the search attributes it publishes).
 */
export const HISTORY_EVENTS_PER_EXECUTION = 150;
/** Provision + stage + resume: paid time without progress after each start or switch. */
export const CHANGEOVER_SECONDS = 120;
/** How often the deadline-aware policy is asked again while spot trains. */
export const POLICY_CHECK_SECONDS = 300;
/** Wait between rounds when every acceptable offer failed: capacity comes back. */
export const NO_CAPACITY_BACKOFF_MS = 30_000;
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
/** A run that meets this many resources squatting on its names stops with ResourceConflict. */
export const MAX_CONFLICTS = 3;

/** Derived from the workflow's identity, never from its (continued) input. */
export function ownerOf(context: Context, attempt: number): Owner {
  return { run: runKey(context.workflowId), execution: context.execution, attempt };
}

/** Folds `event` into `state` and says what to do next. */
export function next(state: RunState, spec: RunSpec, event: RunEvent, context: Context): Command {
  const stop = absorb(state, spec, event, context);
  return stop ?? decide(state, spec, context);
}

// --- events -----------------------------------------------------------------------------

function absorb(state: RunState, spec: RunSpec, event: RunEvent, context: Context): Command | undefined {
  const now = context.nowMs;
  switch (event.kind) {
    case 'start':
      // A release in flight belongs to the execution that began it: this one asks again.
      for (const a of state.attempts) if (a.releasing && !a.released) a.releasing = undefined;
      return undefined;
    case 'tick':
    case 'observer-asked':
    case 'releasing':
      return undefined;
    case 'release-failed': {
      const attempt = state.attempts[event.attempt - 1];
      attempt.releasing = undefined;
      record(state, now, { kind: TimelineKind.Released, event: `release of ${attempt.ref.name} failed (${event.message}); asking again`, attempt: attempt.attempt, zone: attempt.offer.zone });
      return undefined;
    }
    case 'checked':
      return absorbChecks(state, event.findings, now);
    case 'admission-asked':
      if (event.teamWebhooks !== undefined && state.admission) state.admission.teamWebhooks = event.teamWebhooks;
      return undefined;
    case 'admission': {
      const refused = absorbAdmission(state, event.decision, now);
      return refused && { kind: 'fail', ...refused };
    }
    case 'offers': {
      // A dataset that is not there would fail staging on every VM: fail before creating one.
      const missing = event.datasets && missingDatasets(spec, event.datasets);
      if (missing) return { kind: 'fail', ...missing };
      if (event.bucketLocations) absorbBucketLocations(state, event.bucketLocations, now);
      absorbPrices(state, event);
      if (event.zoneMemory) state.zoneMemory = memoryFor(event.zoneMemory, event.offers);
      return absorbOffers(state, spec, event.offers);
    }
    case 'provisioned': {
      const attempt = state.attempts[event.attempt - 1];
      attempt.createSettled = true;
      attempt.startedAt = event.startedAt;
      state.phase = Phase.Staging;
      state.lastHeardAt = now;
      // The worker asked for the observer as it created the resource: no ask of the run's own for now.
      if (event.observerAsked) state.observerAskedAt = now;
      record(state, now, {
        kind: TimelineKind.Running,
        event: `attempt ${attempt.attempt} running in ${attempt.offer.zone}${event.adopted ? ' (adopted after a retried create)' : ''}`,
        attempt: attempt.attempt,
        zone: attempt.offer.zone,
      });
      return undefined;
    }
    case 'provision-failed': {
      const attempt = state.attempts[event.attempt - 1];
      attempt.createSettled = true;
      const outcome = PROVISION_FAILURES[event.failure as FailureType];
      if (!outcome) return { kind: 'fail', failure: event.failure as FailureType, message: event.message };
      return endAttempt(state, spec, attempt, outcome, now, event.message);
    }
    case 'released':
      absorbRelease(state, event, now);
      return undefined;
    case 'zone-memory':
      absorbLiveZoneMemory(state, event.memory, currentAttempt(state));
      return undefined;
    case 'checkpoint-interval-set':
      absorbIntervalSet(state, event.attempt, event.interval, event.outcome, now, event.message);
      return undefined;
    case 'observed':
      return absorbObservation(state, spec, event.observation, event.via, context);
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

function absorbOffers(state: RunState, spec: RunSpec, offers: Offer[]): Command | undefined {
  if (offers.length === 0) {
    return {
      kind: 'fail',
      failure: FailureType.NoCapacity,
      message: `resources.accelerators: no zone offers ${spec.resources.accelerators.map((a) => `${a.type} x${a.count}`).join(' or ')} within the placement constraints${unpricedNote(state.prices)}; choose another accelerator or count, or widen placement`,
    };
  }
  const max = spec.pricing.maxPricePerHour;
  const cheapest = offers.reduce((best, o) => (o.pricePerHour < best.pricePerHour ? o : best));
  if (max !== undefined && cheapest.pricePerHour > max) {
    return {
      kind: 'fail',
      failure: FailureType.NoCapacity,
      message: `pricing.maxPricePerHour $${max}/h is below every offer; the cheapest is $${cheapest.pricePerHour.toFixed(4)}/h (${cheapest.provisioningModel} ${cheapest.accelerator} x${cheapest.acceleratorCount} in ${cheapest.zone}); raise it or allow other accelerators`,
    };
  }
  state.placement = { offers, tried: [] };
  return undefined;
}

/** The run stops (cancelled, or failed with `reason`): its live attempt is stopped, not running. */
export function stopRun(state: RunState, phase: Phase, reason: string, nowMs: number): void {
  state.phase = phase;
  const live = state.attempts.find((a) => a.outcome === AttemptOutcome.Running);
  if (live) live.outcome = AttemptOutcome.Stopped;
  record(state, nowMs, { kind: TimelineKind.Stopped, event: phase === Phase.Cancelled ? 'cancelled' : `failed: ${reason}` });
}

/** Records what release found; the ledger counts only a resource that was ours. */
export function absorbRelease(state: RunState, event: Extract<RunEvent, { kind: 'released' }>, nowMs: number): void {
  const attempt = state.attempts[event.attempt - 1];
  if (attempt.released) return;
  if (event.outcome === 'deleted') {
    attempt.startedAt ??= event.startedAt;
    attempt.stoppedAt = event.stoppedAt ?? (attempt.startedAt ? new Date(nowMs).toISOString() : undefined);
  } else if (attempt.startedAt && !attempt.stoppedAt) {
    // Ours and running, then gone before release (its VM-side limit, by hand, or this
    // release's own earlier try): when it stopped if the provider knows, else now.
    attempt.stoppedAt = event.stoppedAt ?? new Date(nowMs).toISOString();
  }
  attempt.released = true;
  if (attempt.outcome === AttemptOutcome.Running) attempt.outcome = AttemptOutcome.Stopped;
  const said = { deleted: 'deleted', absent: 'never created (its create did not land)', 'not-ours': 'not ours, left alone' } as const;
  record(state, nowMs, {
    kind: TimelineKind.Released,
    event: `released: ${attempt.ref.name} ${said[event.outcome]}${event.createWatch ? ` ${createWatchSaid(event.createWatch)}` : ''}`,
    attempt: attempt.attempt,
    zone: attempt.offer.zone,
    released: event.outcome,
    ...(event.createWatch ? { createWatch: event.createWatch.outcome } : {}),
  });
}

/** What the release's watch for a create that may still have landed found, for the timeline. */
function createWatchSaid(watch: CreateWatch): string {
  if (watch.outcome === 'landed-late') return `(its create landed late, ${watch.afterSeconds ?? '?'} s after the release began; found under its name while watching)`;
  return `(watched for a create that might still land until ${watch.until}, after which none can)`;
}

function absorbObservation(state: RunState, spec: RunSpec, heard: ResourceObservation, via: 'observer' | 'look', context: Context): Command | undefined {
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

/** Ends an attempt: the ending's zone event, counters and recovery, from the tables. */
function endAttempt(state: RunState, spec: RunSpec, attempt: Attempt, outcome: Ending, now: number, detail?: string): Command | undefined {
  attempt.outcome = outcome;
  if (detail && outcome !== AttemptOutcome.Completed) attempt.reason = detail;
  if (state.notice === attempt.ref.name) state.notice = undefined;
  const rule = ENDINGS[outcome];
  const { zone, region, provisioningModel } = attempt.offer;
  if (rule.zoneEvent) state.zoneEvents.push({ zone, region, provisioningModel, kind: rule.zoneEvent, at: now });
  const where = { attempt: attempt.attempt, zone, outcome };
  switch (rule.next) {
    case Next.Complete:
      state.phase = Phase.Releasing;
      record(state, now, { ...where, kind: rule.timeline, event: `completed at step ${state.step ?? '?'}`, step: state.step });
      return undefined;
    case Next.NextOffer:
      state.phase = Phase.Provisioning;
      record(state, now, { ...where, kind: rule.timeline, event: `${zone} ${outcome}: ${detail ?? ''}`.trim() });
      if (outcome === AttemptOutcome.Conflict && state.attempts.filter((a) => a.outcome === AttemptOutcome.Conflict).length >= MAX_CONFLICTS) {
        return { kind: 'fail', failure: FailureType.ResourceConflict, message: `${MAX_CONFLICTS} resources that are not this run's held its names; the last: ${detail ?? attempt.ref.name}` };
      }
      return undefined;
    case Next.Resume: {
      state.phase = Phase.Recovering;
      state.preemptions++;
      state.placement = undefined;
      record(state, now, { ...where, kind: rule.timeline, event: `preempted in ${zone}; resuming from step ${state.lastCheckpoint?.step ?? 0}`, step: state.lastCheckpoint?.step ?? 0 });
      const decision = afterPreemption(state, spec);
      return decision.retry ? undefined : { kind: 'fail', failure: decision.failure, message: decision.message };
    }
    case Next.Move:
      state.phase = Phase.Recovering;
      state.placement = undefined;
      record(state, now, {
        ...where,
        kind: rule.timeline,
        event: `${attempt.moveAskedAt ? `moved off flex-start in ${zone} before its cut` : `flex-start run duration reached in ${zone}`}; resuming from step ${state.lastCheckpoint?.step ?? 0}`,
        step: state.lastCheckpoint?.step ?? 0,
      });
      return undefined;
    case Next.Restart: {
      state.phase = Phase.Recovering;
      state.placement = undefined;
      const decision = afterFailure(state, spec, attempt);
      if (!decision.retry) return { kind: 'fail', failure: decision.failure, message: decision.message, details: decision.details, logTailOf: attempt.attempt };
      state.restarts++;
      record(state, now, {
        ...where,
        kind: TimelineKind.Restarting,
        event: `training failed with ${attempt.reason ?? `exit code ${attempt.exitCode}`}; restart ${state.restarts} of ${spec.recovery.maxRestartsOnError}`,
      });
      return undefined;
    }
    case Next.Place:
      state.phase = Phase.Recovering;
      state.placement = undefined;
      record(state, now, { ...where, kind: rule.timeline, event: `policy: switch to on-demand to meet the deadline` });
      return undefined;
    case Next.Stop:
      return undefined;
    case Next.Fail: {
      const program = JSON.stringify(spec.command[0] ?? '').slice(0, 200);
      const why = attempt.exitCode !== undefined ? NOT_RUNNABLE_EXITS[attempt.exitCode]?.(program) : undefined;
      // The agent's own endings (AGENT_EXITS) say what failed; anything else is the training command's.
      const agents = Object.values(AGENT_EXITS).some((row) => row.ending === outcome);
      const message = `${why ?? (agents ? (detail ?? outcome) : `training failed with ${detail ?? outcome}`)}; not retried: a new VM would fail the same way`;
      record(state, now, { ...where, kind: rule.timeline, event: `${outcome} in ${zone}: ${message}` });
      return { kind: 'fail', failure: rule.failure ?? FailureType.UserCodeFailed, message, details: { exitCode: attempt.exitCode }, logTailOf: attempt.attempt };
    }
  }
}

// --- decisions ----------------------------------------------------------------------------

function decide(state: RunState, spec: RunSpec, context: Context): Command {
  const now = context.nowMs;
  const last = state.attempts[state.attempts.length - 1];
  // An ended attempt is released before anything else happens; where nothing of it can
  // still write, its release runs beside the next placement (run/endings.ts).
  const unreleased = state.attempts.find((a) => a.outcome !== AttemptOutcome.Running && !a.released && !a.releasing);
  if (unreleased) {
    const beside = ENDINGS[unreleased.outcome as Ending].releaseBeside;
    if (beside) unreleased.releasing = true;
    return { kind: 'release', attempt: unreleased.attempt, createMayBeInFlight: !unreleased.createSettled, ...(beside ? { beside } : {}) };
  }
  const releasing = state.attempts.some((a) => a.releasing && !a.released);
  if (last?.outcome === AttemptOutcome.Completed) {
    // Done only when every resource is released: until then, wait for the last `released`.
    if (releasing) return { kind: 'wait' };
    state.phase = Phase.Completed;
    return { kind: 'complete' };
  }
  const limit = limitReached(state, spec, now);
  if (limit) return { kind: 'fail', failure: limit.failure, message: limit.message };

  const live = currentAttempt(state);
  if (live && state.phase === Phase.Provisioning) return { kind: 'provision', attempt: live.attempt };
  // A release in flight is this execution's to finish: the next one would not hear of it.
  if (!releasing && shouldContinueAsNew(state, context)) return { kind: 'continue-as-new' };
  if (live) return follow(state, spec, live, context);
  // Before anything costs money or a place in the team's queue: the checks, once.
  if (state.checked === undefined && state.attempts.length === 0) return { kind: 'check' };
  if (awaitingAdmission(state)) return admission(state, spec, now);
  return place(state, spec, context);
}

/** The checks' answer: a run that cannot succeed fails now, before any VM exists, naming each problem and its fix. */
function absorbChecks(state: RunState, findings: Finding[] | undefined, now: number): Command | undefined {
  state.checked = true;
  if (findings === undefined) {
    record(state, now, { kind: TimelineKind.Checked, event: 'checks before the run: not run (this worker cannot check); going on' });
    return undefined;
  }
  const blocking = findingsThatStopARun(findings);
  const warnings = findings.filter((f) => f.problem && !blocking.includes(f));
  record(state, now, { kind: TimelineKind.Checked, event: `checks before the run: ${findings.length - blocking.length} of ${findings.length} passed${warnings.length ? `; ${warnings.map((w) => `${w.check}: ${w.problem}`).join('; ')}` : ''}` });
  if (blocking.length === 0) return undefined;
  return { kind: 'fail', failure: FailureType.ChecksFailed, message: `the run cannot succeed as things stand, so nothing was created: ${checksFailureMessage(findings, blocking)}` };
}

/** Before the first placement: ask the team, then wait for its answer (asking again if it stays silent). */
function admission(state: RunState, spec: RunSpec, now: number): Command {
  const again = reaskAt(state);
  if (again === undefined || now >= again) {
    asking(state, spec, now);
    return { kind: 'ask-admission' };
  }
  const limitAt = limitAtMs(state, spec, undefined, now);
  return { kind: 'wait', untilMs: Math.min(again, limitAt ?? Infinity) };
}

function shouldContinueAsNew(state: RunState, context: Context): boolean {
  if (context.continueAsNewSuggested || context.newVersionCurrent || state.attempts.length - context.attemptsAtStart >= ATTEMPTS_PER_RUN) return true;
  return (context.historyLength ?? 0) >= HISTORY_EVENTS_PER_EXECUTION;
}

/** While an attempt stages or trains: ask for the observer, look when it is silent, ask the policy, wait. */
function follow(state: RunState, spec: RunSpec, live: Attempt, context: Context): Command {
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
      if (move === ActionKind.OnDemand || move === ActionKind.FlexStart) {
        const stop = endAttempt(state, spec, live, AttemptOutcome.Switched, now);
        return stop ?? decide(state, spec, context);
      }
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

/** Between attempts: find capacity, then try the next candidate of the round. */
function place(state: RunState, spec: RunSpec, context: Context): Command {
  const now = context.nowMs;
  if (state.capacityRetryAt !== undefined && now < state.capacityRetryAt) {
    const limitAt = limitAtMs(state, spec, undefined, now);
    return { kind: 'wait', untilMs: Math.min(state.capacityRetryAt, limitAt ?? Infinity) };
  }
  if (!state.placement) {
    state.capacityRetryAt = undefined;
    state.phase = Phase.FindingCapacity;
    return { kind: 'find-capacity' };
  }
  const offer = nextCandidate(state, spec, now);
  if (!offer) {
    state.placement = undefined;
    state.capacityRetryAt = now + NO_CAPACITY_BACKOFF_MS;
    return { kind: 'wait', untilMs: state.capacityRetryAt };
  }
  state.placement.tried.push(triedKey(offer));
  const attempt = beginAttempt(state, offer, context);
  noteStartInterval(state, spec, attempt, now);
  if (isFlexStart(offer)) {
    attempt.requestedAt = new Date(now).toISOString();
    // From the run's own end (flex-cut.ts).
    attempt.runDurationSeconds = flexRunDurationSeconds(runEndMs(state, spec) ?? now + FLEX_START_MAX_RUN_SECONDS * 1000, now);
    record(state, now, {
      kind: TimelineKind.Placing,
      event: `flex-start request in ${offer.zone}: waiting for DWS capacity for up to ${flexStartMaxWaitSeconds(spec)} s, then running at most ${attempt.runDurationSeconds} s`,
      attempt: attempt.attempt,
      zone: offer.zone,
      model: offer.provisioningModel,
    });
  }
  return { kind: 'provision', attempt: attempt.attempt };
}

/** One offer's place in a round: zone, model, accelerator and count. */
export function triedKey(offer: Offer): string {
  // A slice is its own shape (absent for whole GPUs, so a whole-GPU key reads as it always did).
  return `${offer.zone}/${offer.provisioningModel}/${offer.accelerator}/${offer.acceleratorCount}${sliceKey(offer)}`;
}

function beginAttempt(state: RunState, offer: Offer, context: Context): Attempt {
  const number = state.attempts.length + 1;
  // Recorded before the create, so the run releases it even if the worker dies between
  // the API call and the activity's result.
  const attempt: Attempt = {
    attempt: number,
    ref: gangRef({ backend: offer.backend, name: resourceName(context.workflowId, context.execution, number, gangSize(offer)), zone: offer.zone }, offer),
    offer,
    outcome: AttemptOutcome.Running,
    resumedFromStep: state.lastCheckpoint?.step,
    released: false,
    createSettled: false,
  };
  state.attempts.push(attempt);
  state.phase = Phase.Provisioning;
  state.lastHeardAt = undefined;
  state.policyCheckAt = undefined;
  return attempt;
}

/** The next offer to try in this round, or undefined when the round is over. */
export function nextCandidate(state: RunState, spec: RunSpec, nowMs: number): Offer | undefined {
  const round = state.placement!;
  const untried = (o: Offer) => !round.tried.includes(triedKey(o));
  if (autoPolicyApplies(state, spec)) return autoCandidate(state, spec, nowMs);
  const models = modelsOf(spec);
  // Offers another run saw stock out lately go last (the project's zone memory).
  const policy = placementPolicy(state, spec, models, nowMs);
  const ranked = rankWithMemory(rankOffers(round.offers, state.zoneEvents, policy), state.zoneMemory, policy).filter(untried);
  ranked.sort((a, b) => models.indexOf(a.provisioningModel) - models.indexOf(b.provisioningModel));
  if (ranked.length === 0 && round.tried.length === 0) {
    record(state, nowMs, { kind: TimelineKind.NoAcceptableOffer, event: `no acceptable offer now (${round.offers.length} offers, all over price, out of quota or cooling down); waiting` });
  }
  return ranked[0];
}

/**
 * `auto`: the deadline-aware policy picks the zone and the model - spot, on-demand or (a
 * spec with `pricing.flexStart`) flex-start - by expected cost, the run's data cost
 * included; after each failed try it is asked again, now knowing that zone is out.
 */
function autoCandidate(state: RunState, spec: RunSpec, nowMs: number): Offer | undefined {
  const round = state.placement!;
  const models = spec.pricing.flexStart ? [ProvisioningModel.Spot, ProvisioningModel.FlexStart, ProvisioningModel.OnDemand] : [ProvisioningModel.Spot, ProvisioningModel.OnDemand];
  const ranked = rankOffers(round.offers, [], placementPolicy(state, spec, models, nowMs));
  const decision = askPolicy(state, spec, usableFlex(state, spec, round.offers, nowMs), idle, nowMs);
  const chosen = offersFor(decision, ranked).find((o) => usable(state, spec, o, nowMs));
  if (decision.kind === ActionKind.Idle) {
    record(state, nowMs, { kind: TimelineKind.PolicyWait, event: 'policy: wait for cheaper capacity' });
    return undefined;
  }
  const why = decision.kind === ActionKind.FlexStart ? ' (the lowest expected cost under the deadline, a full wait included)' : '';
  if (chosen) record(state, nowMs, { kind: TimelineKind.PolicyChoice, event: `policy: ${decision.kind} in ${decision.zone}${why}`, zone: decision.zone, model: chosen.provisioningModel });
  return chosen;
}

/** Untried in this round and not cooling down for its model. */
function usable(state: RunState, spec: RunSpec, offer: Offer, nowMs: number): boolean {
  return !state.placement!.tried.includes(triedKey(offer)) && !inCooldown(offer, state.zoneEvents, placementPolicy(state, spec, [offer.provisioningModel], nowMs));
}

/** The offers the policy weighs: flex-start only where a request can be made now (acceptable, untried, not cooling down). */
function usableFlex(state: RunState, spec: RunSpec, offers: readonly Offer[], nowMs: number): Offer[] {
  if (!spec.pricing.flexStart || state.placement === undefined) return offers.filter((o) => !isFlexStart(o));
  const flex = rankOffers(offers, state.zoneEvents, placementPolicy(state, spec, [ProvisioningModel.FlexStart], nowMs)).filter((o) => usable(state, spec, o, nowMs));
  return offers.filter((o) => !isFlexStart(o) || flex.includes(o));
}

function autoPolicyApplies(state: RunState, spec: RunSpec): boolean {
  return spec.pricing.mode === PricingMode.Auto && state.deadline !== undefined && spec.time.expectedDuration !== undefined;
}

function placementPolicy(state: RunState, spec: RunSpec, models: readonly ProvisioningModel[], nowMs: number): PlacementPolicy {
  return {
    nowMs,
    cooldownSeconds: spec.recovery.zoneCooldown,
    expectedHours: (remainingWorkSeconds(state, spec) ?? 3600) / 3600,
    maxPricePerHour: spec.pricing.maxPricePerHour,
    models,
    dataCostUsd: dataCostUsdFor(spec, state),
  };
}

function askPolicy(state: RunState, spec: RunSpec, offers: readonly Offer[], current: ReturnType<typeof actionOf> | typeof idle, nowMs: number) {
  // A run that read the zone memory starts the policy from it, and sees its stockouts.
  const { action, state: policyState } = decideAuto(state.policyState, {
    memory: state.zoneMemory ? memoryStats(state.zoneMemory, nowMs, Date.parse(state.startedAt)) : undefined,
    offers,
    events: state.zoneEvents,
    others: rememberedEvents(state.zoneMemory),
    placement: placementPolicy(state, spec, [ProvisioningModel.Spot, ProvisioningModel.OnDemand], nowMs),
    nowMs,
    runStartMs: Date.parse(state.startedAt),
    deadlineMs: Date.parse(state.deadline!),
    remainingWorkSeconds: remainingWorkSeconds(state, spec) ?? 0,
    changeoverSeconds: CHANGEOVER_SECONDS,
    stepSeconds: POLICY_CHECK_SECONDS,
    current,
    flexStart: flexTermsFor(spec),
    dataCost: dataCostsFor(spec, state),
  });
  state.policyState = policyState;
  return action;
}
