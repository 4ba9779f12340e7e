/**
 * trainingRun: one training run, from spec to released resources.
 *
 *   validate -> loop { find capacity -> rank offers -> provision (next offer on stockout)
 *                      -> stage data -> train (record each verified checkpoint)
 *                      -> Completed | Preempted (resume elsewhere) | Failed (restart or stop) }
 *   finally, non-cancellable: release every resource this run created.
 *
 * Decisions are pure functions (placement, pricing); every side effect is an activity.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  ContinueAsNew,
  isCancellation,
  proxyActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
  allHandlersFinished,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { MonitorResult, ProvisionRequest, ReleaseResult, SternaActivities } from '../activities/contract';
import { actionOf, decideAuto, offersFor } from './auto-policy';
import { acceptContinuation, isContinuedRun, type ContinuedRun } from './continuation';
import { failure, FailureType, nonRetryableFailureTypes } from './failures';
import { preemptionNoticeSignal, setBudgetUpdate, setDeadlineUpdate, statusQuery } from './messages';
import { executionToken, resourceLabels, resourceName, runKey, type Owner } from './naming';
import { inCooldown, rankOffers, ZoneEventKind, type PlacementPolicy } from './placement';
import { ActionKind, idle, type Action } from './policy';
import { chooseModels, deadlineMs } from './pricing';
import {
  AttemptOutcome,
  currentAttempt,
  ledger,
  Phase,
  record,
  resultOf,
  statusOf,
  type Attempt,
  type RunResult,
  type RunState,
} from './run-state';
import { SternaAccelerator, SternaCostUsd, SternaPhase, SternaPreemptions, SternaTeam, SternaZone } from './search-attributes';
import { MAX_DURATION_SECONDS } from './duration';
import { deadlineProblem, MAX_BUDGET_USD, parseSpec, PricingMode, type RunSpec, type RunSpecInput } from './spec';
import { ProvisioningModel, type Offer } from './types';

export type { ContinuedRun };

/** Continue as new after this many attempts even if the server does not suggest it. */
const ATTEMPTS_PER_RUN = 50;
/** A monitor call returns at least this often, so the workflow can re-plan. */
const MONITOR_RETURN_SECONDS = 300;
/** Provision + stage + resume: paid time without progress after each start or switch. */
const CHANGEOVER_SECONDS = 120;
/** Wait between rounds when every acceptable offer failed: capacity comes back. */
const NO_CAPACITY_BACKOFF_MS = 30_000;
/** A run that meets this many resources squatting on its names stops with ResourceConflict. */
const MAX_CONFLICTS = 3;

const nonRetryableErrorTypes = [...nonRetryableFailureTypes];
const SECOND = 1000;
const MINUTE = 60 * SECOND;

function activities(pollSeconds: number) {
  // Heartbeats arrive every poll (and on a timer); a worker that dies is noticed after a
  // few missed ones.
  const heartbeatTimeout = Math.max(10, Math.ceil(4 * pollSeconds)) * SECOND;
  // Transient API errors (5xx, 429 / rateLimitExceeded, timeouts, resets) are retried for
  // as long as the run's limits allow, never by a small attempt count: only the named
  // failures listed here end a step, and the limits are the workflow's own timers.
  const retry = { initialInterval: SECOND, maximumInterval: MINUTE, nonRetryableErrorTypes };
  const base: ActivityOptions = { startToCloseTimeout: MINUTE, retry };
  return {
    quick: proxyActivities<SternaActivities>(base),
    long: proxyActivities<SternaActivities>({ ...base, startToCloseTimeout: 6 * 60 * MINUTE, heartbeatTimeout }),
    monitor: proxyActivities<SternaActivities>({ ...base, startToCloseTimeout: (MONITOR_RETURN_SECONDS + 600) * SECOND, heartbeatTimeout }),
    // Release must happen, whatever the API does meanwhile.
    release: proxyActivities<SternaActivities>({ startToCloseTimeout: 10 * MINUTE, heartbeatTimeout, retry }),
  };
}

export async function trainingRun(input: RunSpecInput | ContinuedRun): Promise<RunResult> {
  const info = workflowInfo();
  const execution = { workflowId: info.workflowId, execution: executionToken(info.firstExecutionRunId), continuedFromExecutionRunId: info.continuedFromExecutionRunId };
  // A bad spec (or a forged continued state) fails here, before anything exists:
  // InvalidSpec, never retried.
  const { spec, state } = isContinuedRun(input) ? acceptContinuation(input, execution) : fresh(input);
  const run = new Run(spec, state, execution.execution);
  run.installHandlers();
  let continuing = false;
  try {
    return await run.execute();
  } catch (err) {
    if (err instanceof ContinueAsNew) {
      continuing = true;
    } else {
      run.setPhase(isCancellation(err) ? Phase.Cancelled : Phase.Failed);
      run.note(isCancellation(err) ? 'cancelled' : `failed: ${describe(err)}`);
    }
    throw err;
  } finally {
    // Runs on success, failure and cancellation alike, and cannot itself be cancelled.
    // A continue-as-new hands the live resource over to the next run instead.
    if (!continuing) await CancellationScope.nonCancellable(() => run.releaseAll());
  }
}

function fresh(input: RunSpecInput): { spec: RunSpec; state: RunState } {
  // Only a fresh start checks the deadline against now: a continued run's may have passed.
  const spec = parseSpec(input, { nowMs: Date.now() });
  return { spec, state: initialState(spec) };
}

function initialState(spec: RunSpec): RunState {
  const now = Date.now();
  const deadline = deadlineMs(spec, now);
  const state: RunState = {
    runId: workflowInfo().workflowId,
    phase: Phase.Validating,
    startedAt: new Date(now).toISOString(),
    attempts: [],
    zoneEvents: [],
    preemptions: 0,
    restarts: 0,
    budgetUsd: spec.pricing.budgetUsd,
    deadline: deadline === undefined ? undefined : new Date(deadline).toISOString(),
    timeline: [],
  };
  record(state, now, 'run started');
  return state;
}

function describe(err: unknown): string {
  const root = err instanceof ActivityFailure && err.cause ? err.cause : err;
  return root instanceof Error ? root.message : String(root);
}

function failureTypeOf(err: unknown): string | undefined {
  const root = err instanceof ActivityFailure ? err.cause : err;
  return root instanceof ApplicationFailure ? (root.type ?? undefined) : undefined;
}

type AttemptEnd = { kind: 'completed' } | { kind: 'preempted' } | { kind: 'switched' } | { kind: 'failed'; exitCode: number; reason: string };

class Run {
  private readonly acts: ReturnType<typeof activities>;
  /** Bumped by every update that moves a limit, so waits re-evaluate their timers. */
  private limitsVersion = 0;
  private noticeFor: string | undefined;
  /** The offers of the last capacity search, for policy decisions while training. */
  private lastOffers: Offer[] | undefined;
  private readonly attemptsAtStart: number;

  constructor(
    private readonly spec: RunSpec,
    private readonly state: RunState,
    /** This execution chain's token (workflows/naming.ts): part of every name and owner label. */
    private readonly execution: string,
  ) {
    this.acts = activities(spec.recovery.pollSeconds);
    this.attemptsAtStart = state.attempts.length;
  }

  installHandlers(): void {
    setHandler(statusQuery, () => statusOf(this.state, Date.now()));
    setHandler(
      setBudgetUpdate,
      (budgetUsd) => {
        this.state.budgetUsd = budgetUsd;
        this.limitsVersion++;
        this.note(`budget set to $${budgetUsd.toFixed(2)}`);
        return statusOf(this.state, Date.now());
      },
      {
        validator: (budgetUsd) => {
          const spent = ledger(this.state, Date.now()).totalCostUsd;
          if (!(typeof budgetUsd === 'number' && Number.isFinite(budgetUsd) && budgetUsd > 0 && budgetUsd <= MAX_BUDGET_USD)) {
            throw failure(FailureType.InvalidSpec, `budget must be a positive number of USD up to ${MAX_BUDGET_USD}, got ${String(budgetUsd)}`);
          }
          if (budgetUsd < spent) throw failure(FailureType.InvalidSpec, `budget $${budgetUsd} is below the $${spent.toFixed(4)} already spent`);
        },
      },
    );
    setHandler(
      setDeadlineUpdate,
      (deadline) => {
        this.state.deadline = new Date(Date.parse(deadline)).toISOString();
        this.limitsVersion++;
        this.note(`deadline set to ${this.state.deadline}`);
        return statusOf(this.state, Date.now());
      },
      {
        validator: (deadline) => {
          const problem = deadlineProblem(deadline, Date.now());
          if (problem) throw failure(FailureType.InvalidSpec, `deadline ${problem}`);
        },
      },
    );
    setHandler(preemptionNoticeSignal, (notice) => {
      const live = currentAttempt(this.state);
      if (live && notice.name === live.ref.name) {
        this.noticeFor = notice.name;
        this.note(`preemption notice for ${notice.name}${notice.reason ? `: ${notice.reason}` : ''}`);
      }
    });
  }

  async execute(): Promise<RunResult> {
    this.setPhase(Phase.FindingCapacity);
    // A continued run may hand over an attempt that is already training.
    const handedOver = currentAttempt(this.state);
    if (handedOver) {
      const end = await this.train(handedOver);
      const result = await this.settle(handedOver, end);
      if (result) return result;
    }
    for (;;) {
      this.enforceLimits();
      await this.maybeContinueAsNew();
      const attempt = await this.place();
      if (!attempt) {
        await sleep(NO_CAPACITY_BACKOFF_MS);
        continue;
      }
      const staged = await this.stage(attempt);
      const end = staged ?? (await this.train(attempt));
      const result = await this.settle(attempt, end);
      if (result) return result;
    }
  }

  /** Tries the ranked offers in order until one provisions; undefined if all failed. */
  private async place(): Promise<Attempt | undefined> {
    this.setPhase(Phase.FindingCapacity);
    const offers = await this.acts.quick.findCapacity({
      backend: this.spec.backend,
      request: {
        accelerators: this.spec.resources.accelerators,
        machineType: this.spec.resources.machineType,
        regions: this.spec.placement.regions,
        zones: this.spec.placement.zones,
        provisioningModels: ['SPOT', 'STANDARD'],
      },
    });
    if (offers.length === 0) {
      throw failure(
        FailureType.NoCapacity,
        `resources.accelerators: no zone offers ${this.spec.resources.accelerators.map((a) => `${a.type} x${a.count}`).join(' or ')} within the placement constraints; choose another accelerator or count, or widen placement`,
      );
    }
    this.refuseUnreachablePrice(offers);
    this.lastOffers = offers;
    const candidates = this.autoPolicyApplies() ? this.policyCandidates(offers) : this.rankedCandidates(offers);
    for (let next = candidates.next(); !next.done; next = candidates.next()) {
      const offer = next.value;
      const attempt = this.beginAttempt(offer);
      try {
        const result = await this.acts.long.provision.executeWithOptions(
          { summary: `provision ${offer.machineType} (${offer.accelerator} x${offer.acceleratorCount}) ${offer.provisioningModel === 'SPOT' ? 'spot' : 'on-demand'} in ${offer.zone}` },
          [this.provisionRequest(attempt)],
        );
        attempt.ref = result.ref;
        attempt.startedAt = result.window.startedAt;
        attempt.createSettled = true;
        this.note(`attempt ${attempt.attempt} running in ${offer.zone}${result.adopted ? ' (adopted after a retried create)' : ''}`);
        return attempt;
      } catch (err) {
        const type = failureTypeOf(err);
        // A named failure is the create's definite answer; anything else (cancellation, a
        // timeout, a lost worker) leaves open whether it may still land.
        attempt.createSettled = type !== undefined;
        if (type === FailureType.ResourceConflict) {
          // Something that is not ours holds this name. It is never deleted; the next
          // attempt gets a new name.
          attempt.outcome = AttemptOutcome.Conflict;
          this.note(`${attempt.ref.name} ${describe(err)}`);
          await this.release(attempt);
          if (this.state.attempts.filter((a) => a.outcome === AttemptOutcome.Conflict).length >= MAX_CONFLICTS) throw err;
          continue;
        }
        const kind =
          type === FailureType.Stockout ? ZoneEventKind.Stockout : type === FailureType.QuotaExceeded ? ZoneEventKind.Quota : type === FailureType.Preempted ? ZoneEventKind.Preempted : undefined;
        if (!kind) throw err;
        attempt.outcome = kind === ZoneEventKind.Quota ? AttemptOutcome.QuotaExceeded : kind === ZoneEventKind.Stockout ? AttemptOutcome.Stockout : AttemptOutcome.Preempted;
        this.state.zoneEvents.push({ zone: offer.zone, region: offer.region, provisioningModel: offer.provisioningModel, kind, at: Date.now() });
        this.note(`${offer.zone} ${kind}: ${describe(err)}`);
        await this.release(attempt);
      }
    }
    return undefined;
  }

  private placementPolicy(models: readonly ProvisioningModel[]): PlacementPolicy {
    return {
      nowMs: Date.now(),
      cooldownSeconds: this.spec.recovery.zoneCooldown,
      expectedHours: (this.remainingWorkSeconds() ?? 3600) / 3600,
      maxPricePerHour: this.spec.pricing.maxPricePerHour,
      models,
    };
  }

  /** spot / on-demand / auto without a deadline: ranked offers, preferred model first. */
  private *rankedCandidates(offers: Offer[]): Generator<Offer> {
    const models = chooseModels(this.spec.pricing.mode);
    const ranked = rankOffers(offers, this.state.zoneEvents, this.placementPolicy(models));
    ranked.sort((a, b) => models.indexOf(a.provisioningModel) - models.indexOf(b.provisioningModel));
    if (ranked.length === 0) this.note(`no acceptable offer now (${offers.length} offers, all over price, out of quota or cooling down); waiting`);
    yield* ranked;
  }

  /**
   * auto with a deadline: the deadline-aware policy picks the zone and model; after each
   * failed try it is asked again, now knowing that zone is out.
   */
  private *policyCandidates(offers: Offer[]): Generator<Offer> {
    for (let round = 0; round < offers.length; round++) {
      const ranked = rankOffers(offers, [], this.placementPolicy([ProvisioningModel.Spot, ProvisioningModel.OnDemand]));
      const decision = this.decide(offers, idle);
      if (decision.kind === ActionKind.Idle) {
        this.note('policy: wait for cheaper capacity');
        return;
      }
      const chosen = offersFor(decision, ranked).find((o) => !inCooldown(o, this.state.zoneEvents, this.placementPolicy([o.provisioningModel])));
      if (!chosen) return;
      this.note(`policy: ${decision.kind} in ${decision.zone}`);
      yield chosen;
    }
  }

  private decide(offers: readonly Offer[], current: Action): Action {
    const now = Date.now();
    const { action, state } = decideAuto(this.state.policyState, {
      offers,
      events: this.state.zoneEvents,
      placement: this.placementPolicy([ProvisioningModel.Spot, ProvisioningModel.OnDemand]),
      nowMs: now,
      runStartMs: Date.parse(this.state.startedAt),
      deadlineMs: Date.parse(this.state.deadline!),
      remainingWorkSeconds: this.remainingWorkSeconds() ?? 0,
      changeoverSeconds: CHANGEOVER_SECONDS,
      stepSeconds: MONITOR_RETURN_SECONDS,
      current,
    });
    this.state.policyState = state;
    return action;
  }

  private autoPolicyApplies(): boolean {
    return this.spec.pricing.mode === PricingMode.Auto && this.state.deadline !== undefined && this.spec.time.expectedDuration !== undefined;
  }

  /** Derived from the workflow's identity, never from its (continued) input. */
  private owner(attempt: Attempt): Owner {
    return { run: runKey(workflowInfo().workflowId), execution: this.execution, attempt: attempt.attempt };
  }

  /** Every offer costs more than pricing.maxPricePerHour: waiting cannot help, so say so now. */
  private refuseUnreachablePrice(offers: Offer[]): void {
    const max = this.spec.pricing.maxPricePerHour;
    if (max === undefined) return;
    const cheapest = offers.reduce((best, o) => (o.pricePerHour < best.pricePerHour ? o : best));
    if (cheapest.pricePerHour > max) {
      throw failure(
        FailureType.NoCapacity,
        `pricing.maxPricePerHour $${max}/h is below every offer; the cheapest is $${cheapest.pricePerHour.toFixed(4)}/h (${cheapest.provisioningModel} ${cheapest.accelerator} x${cheapest.acceleratorCount} in ${cheapest.zone}); raise it or allow other accelerators`,
      );
    }
  }

  private provisionRequest(attempt: Attempt): ProvisionRequest {
    const owner = this.owner(attempt);
    return {
      name: attempt.ref.name,
      offer: attempt.offer,
      owner,
      labels: resourceLabels(owner, this.spec.labels),
      diskSizeGb: this.spec.resources.diskSizeGb,
      image: this.spec.image,
      agent: {
        runId: this.state.runId,
        attempt: attempt.attempt,
        argv: this.spec.command,
        env: { ...this.spec.env, STERNA_CHECKPOINT_INTERVAL: String(this.spec.checkpoint.interval) },
        datasets: this.spec.datasets,
        // Each run checkpoints under its own prefix, so runs sharing a bucket never mix.
        checkpointUri: `${this.spec.checkpoint.uri.replace(/\/+$/, '')}/${runKey(this.state.runId)}`,
        resumeFrom: this.state.lastCheckpoint,
        pollSeconds: this.spec.recovery.pollSeconds,
      },
    };
  }

  private beginAttempt(offer: Offer): Attempt {
    const number = this.state.attempts.length + 1;
    // Recorded before the create, so the finally block releases it even if the worker
    // dies between the API call and the activity's result.
    const attempt: Attempt = {
      attempt: number,
      ref: { backend: offer.backend, name: resourceName(this.state.runId, this.execution, number), zone: offer.zone },
      offer,
      outcome: AttemptOutcome.Running,
      resumedFromStep: this.state.lastCheckpoint?.step,
      released: false,
      createSettled: false,
    };
    this.state.attempts.push(attempt);
    this.setPhase(Phase.Provisioning);
    return attempt;
  }

  /** Stages the datasets; returns how the attempt ended if it ended during staging. */
  private async stage(attempt: Attempt): Promise<AttemptEnd | undefined> {
    this.setPhase(Phase.Staging);
    const staged = await this.acts.long.stageData.executeWithOptions({ summary: `stage ${this.spec.datasets.length} dataset(s) on ${attempt.ref.name}` }, [
      { ref: attempt.ref, pollSeconds: this.spec.recovery.pollSeconds },
    ]);
    if (staged.kind === 'preempted') return { kind: 'preempted' };
    if (staged.kind === 'failed') return { kind: 'failed', exitCode: staged.exitCode, reason: staged.reason };
    this.note(`staged ${staged.stagedBytes} bytes`);
    return undefined;
  }

  /** Follows training until the attempt ends, recording each verified checkpoint. */
  private async train(attempt: Attempt): Promise<AttemptEnd> {
    this.setPhase(Phase.Training);
    for (;;) {
      const draining = this.noticeFor === attempt.ref.name;
      const scope = new CancellationScope();
      const settled: { done: boolean; result?: MonitorResult; error?: unknown } = { done: false };
      const call = scope
        .run(() =>
          this.acts.monitor.monitorTraining.executeWithOptions({ summary: `train on ${attempt.ref.name} in ${attempt.ref.zone}` }, [
            {
              ref: attempt.ref,
              knownCheckpointStep: this.state.lastCheckpoint?.step ?? -1,
              returnAfterSeconds: MONITOR_RETURN_SECONDS,
              pollSeconds: this.spec.recovery.pollSeconds,
            },
          ]),
        )
        .then(
          (result) => Object.assign(settled, { done: true, result }),
          (error: unknown) => Object.assign(settled, { done: true, error }),
        );
      const version = this.limitsVersion;
      const limitMs = this.msUntilLimit(attempt);
      const wake = () => settled.done || (!draining && this.noticeFor === attempt.ref.name) || this.limitsVersion !== version;
      if (limitMs === undefined) await condition(wake);
      else await condition(wake, Math.max(limitMs, 1));
      if (!settled.done) {
        // Woken by a notice, a moved limit or the limit's timer: stop this call first.
        scope.cancel();
        await call;
        if (!settled.result) {
          this.enforceLimits(); // throws once a limit is reached
          continue; // otherwise follow the attempt again: through its notice, or with the new limits
        }
      }
      if (!settled.result) throw settled.error;
      const result = settled.result;
      this.observe(result);
      if (result.kind === 'exited') {
        return result.exitCode === 0 ? { kind: 'completed' } : { kind: 'failed', exitCode: result.exitCode, reason: `exit code ${result.exitCode}` };
      }
      if (result.kind === 'preempted') return { kind: 'preempted' };
      if (this.autoPolicyApplies() && this.lastOffers && attempt.offer.provisioningModel === ProvisioningModel.Spot) {
        // The deadline can force a move from spot to on-demand while spot still runs.
        const action = this.decide(this.lastOffers, actionOf(attempt.offer));
        if (action.kind === ActionKind.OnDemand) {
          this.note(`policy: switch to on-demand in ${action.zone} to meet the deadline`);
          return { kind: 'switched' };
        }
      }
      await this.maybeContinueAsNew();
    }
  }

  private observe(result: MonitorResult): void {
    if (result.step !== undefined) this.state.step = result.step;
    if (result.checkpoint && result.checkpoint.step > (this.state.lastCheckpoint?.step ?? -1)) {
      this.state.lastCheckpoint = result.checkpoint;
      this.note(`checkpoint at step ${result.checkpoint.step}`);
    }
  }

  /** Releases the attempt and decides what comes next; returns the result when done. */
  private async settle(attempt: Attempt, end: AttemptEnd): Promise<RunResult | undefined> {
    this.setPhase(end.kind === 'completed' ? Phase.Releasing : Phase.Recovering);
    attempt.outcome = ({ completed: AttemptOutcome.Completed, preempted: AttemptOutcome.Preempted, switched: AttemptOutcome.Stopped, failed: AttemptOutcome.Failed } as const)[end.kind];
    if (end.kind === 'failed') attempt.exitCode = end.exitCode;
    await this.release(attempt);
    if (this.noticeFor === attempt.ref.name) this.noticeFor = undefined;
    switch (end.kind) {
      case 'completed':
        this.note(`completed at step ${this.state.step ?? '?'}`);
        this.setPhase(Phase.Completed);
        return resultOf(this.state, Date.now());
      case 'switched':
        return undefined;
      case 'preempted': {
        this.state.preemptions++;
        const { zone, region, provisioningModel } = attempt.offer;
        this.state.zoneEvents.push({ zone, region, provisioningModel, kind: ZoneEventKind.Preempted, at: Date.now() });
        this.note(`preempted in ${zone}; resuming from step ${this.state.lastCheckpoint?.step ?? 0}`);
        if (this.state.preemptions > this.spec.recovery.maxPreemptions) {
          throw failure(FailureType.Preempted, `preempted ${this.state.preemptions} times, more than recovery.maxPreemptions = ${this.spec.recovery.maxPreemptions}`);
        }
        return undefined;
      }
      case 'failed': {
        const noRetry = this.spec.recovery.noRetryExitCodes.includes(end.exitCode);
        if (noRetry || this.state.restarts >= this.spec.recovery.maxRestartsOnError) {
          const why = noRetry ? `exit code ${end.exitCode} is listed in recovery.noRetryExitCodes` : `after ${this.state.restarts} restarts (recovery.maxRestartsOnError)`;
          throw failure(FailureType.UserCodeFailed, `training failed with ${end.reason}; not retried: ${why}`, { exitCode: end.exitCode });
        }
        this.state.restarts++;
        this.note(`training failed with ${end.reason}; restart ${this.state.restarts} of ${this.spec.recovery.maxRestartsOnError}`);
        return undefined;
      }
    }
  }

  private async release(attempt: Attempt): Promise<ReleaseResult | undefined> {
    if (attempt.released) return undefined;
    const result = await this.acts.release.release.executeWithOptions({ summary: `release ${attempt.ref.name} in ${attempt.ref.zone}` }, [
      { ref: attempt.ref, owner: this.owner(attempt), createMayBeInFlight: !attempt.createSettled },
    ]);
    if (result.outcome === 'deleted') {
      attempt.startedAt ??= result.startedAt;
      attempt.stoppedAt = result.stoppedAt ?? (attempt.startedAt ? new Date(Date.now()).toISOString() : undefined);
    } else if (attempt.startedAt && !attempt.stoppedAt) {
      // Ours and running, then gone before release (deleted by its VM-side limit or by hand).
      attempt.stoppedAt = new Date(Date.now()).toISOString();
    }
    attempt.released = true;
    if (attempt.outcome === AttemptOutcome.Running) attempt.outcome = AttemptOutcome.Stopped;
    this.upsertSearchAttributes();
    return result;
  }

  async releaseAll(): Promise<void> {
    const pending = this.state.attempts.filter((a) => !a.released);
    if (pending.length === 0) return;
    const phase = this.state.phase;
    this.state.phase = Phase.Releasing;
    const results = await Promise.all(pending.map((a) => this.release(a)));
    const said = { deleted: 'deleted', absent: 'never created (its create did not land)', 'not-ours': 'not ours, left alone' } as const;
    this.note(`released: ${pending.map((a, i) => `${a.ref.name} ${results[i] ? said[results[i].outcome] : 'already released'}`).join(', ')}`);
    this.setPhase(phase === Phase.Releasing ? Phase.Failed : phase);
  }

  /** Milliseconds until the budget, deadline or maximum duration stops the attempt. */
  private msUntilLimit(attempt: Attempt): number | undefined {
    const now = Date.now();
    const limits: number[] = [];
    if (this.state.budgetUsd !== undefined) {
      const remaining = this.state.budgetUsd - ledger(this.state, now).totalCostUsd;
      limits.push((remaining / attempt.offer.pricePerHour) * 3_600_000);
    }
    if (this.state.deadline) limits.push(Date.parse(this.state.deadline) - now);
    if (this.spec.time.maxRunDuration !== undefined) limits.push(Date.parse(this.state.startedAt) + this.spec.time.maxRunDuration * 1000 - now);
    // A large budget at a cheap price is a limit beyond what a timer can hold; waits
    // re-check the limits whenever they wake, so capping it loses nothing.
    return limits.length ? Math.min(MAX_DURATION_SECONDS * 1000, ...limits) : undefined;
  }

  /** Stops the run with a clear failure once a limit is reached; checkpoints are kept. */
  private enforceLimits(): void {
    const now = Date.now();
    const spent = ledger(this.state, now).totalCostUsd;
    const checkpoint = this.state.lastCheckpoint ? `; last checkpoint ${this.state.lastCheckpoint.uri} (step ${this.state.lastCheckpoint.step}) is kept` : '';
    if (this.state.budgetUsd !== undefined && spent >= this.state.budgetUsd - 1e-9) {
      throw failure(FailureType.BudgetExceeded, `spent $${spent.toFixed(4)} of a $${this.state.budgetUsd.toFixed(4)} budget${checkpoint}`);
    }
    if (this.state.deadline && now >= Date.parse(this.state.deadline)) {
      throw failure(FailureType.DeadlineMissed, `deadline ${this.state.deadline} passed before training finished${checkpoint}`);
    }
    if (this.spec.time.maxRunDuration !== undefined && now >= Date.parse(this.state.startedAt) + this.spec.time.maxRunDuration * 1000) {
      throw failure(FailureType.DeadlineMissed, `run exceeded time.maxRunDuration (${this.spec.time.maxRunDuration} s)${checkpoint}`);
    }
  }

  /** Accelerator seconds still to run: the estimate minus the time attempts have trained. */
  private remainingWorkSeconds(): number | undefined {
    const expected = this.spec.time.expectedDuration;
    if (expected === undefined) return undefined;
    const trained = this.state.attempts.reduce((sum, a) => sum + (a.startedAt && a.stoppedAt ? (Date.parse(a.stoppedAt) - Date.parse(a.startedAt)) / 1000 : 0), 0);
    return Math.max(0, expected - trained);
  }

  private async maybeContinueAsNew(): Promise<void> {
    const attemptsThisRun = this.state.attempts.length - this.attemptsAtStart;
    if (!workflowInfo().continueAsNewSuggested && attemptsThisRun < ATTEMPTS_PER_RUN) return;
    await condition(allHandlersFinished);
    this.note('continuing as new to keep the history short');
    await continueAsNew<typeof trainingRun>({ continued: true, spec: this.spec, state: this.state });
  }

  note(event: string): void {
    record(this.state, Date.now(), event);
  }

  setPhase(phase: Phase): void {
    this.state.phase = phase;
    this.upsertSearchAttributes();
  }

  private upsertSearchAttributes(): void {
    const live = this.state.attempts[this.state.attempts.length - 1];
    upsertSearchAttributes([
      { key: SternaPhase, value: this.state.phase },
      { key: SternaPreemptions, value: this.state.preemptions },
      { key: SternaCostUsd, value: Math.round(ledger(this.state, Date.now()).totalCostUsd * 1e6) / 1e6 },
      ...(live ? [{ key: SternaZone, value: live.offer.zone }, { key: SternaAccelerator, value: live.offer.accelerator }] : []),
      ...(this.spec.labels.team ? [{ key: SternaTeam, value: this.spec.labels.team }] : []),
    ]);
  }
}

