/**
 * trainingRun: one training run, from spec to released resources. This file is wiring:
 * the rules live in the pure state machine (run/machine.ts); here its commands become
 * activities and timers, messages become events, and every path ends in a release.
 *
 *   validate -> loop { command = next(state, spec, event, now); event = carry out(command) }
 *   finally, non-cancellable: release every resource this run created.
 */
import {
  allHandlersFinished,
  CancellationScope,
  condition,
  continueAsNew,
  ContinueAsNew,
  isCancellation,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { SternaActivities } from './activity-contract';
import { acceptContinuation, isContinuedRun, type ContinuedRun } from './continuation';
import { failure, FailureType, namedFailureOf, nonRetryableFailureTypes } from './failures';
import { observationSignal, preemptionNoticeSignal, setBudgetUpdate, setDeadlineUpdate, statusQuery } from './messages';
import { executionToken, resourceLabels, runKey } from './naming';
import { deadlineMs } from './pricing';
import { absorbRelease, next, ownerOf, type Command, type Context, type RunEvent } from './run/machine';
import { resourceReleaseByMs } from './run/resource-limit';
import { AttemptOutcome, initialState, Phase, record, TimelineKind, type RunState } from './run/state';
import { budgetProblem, newDeadlineProblem } from './run/validators';
import { resultOf, searchAttributesOf, statusOf, type RunResult } from './run/views';
import { parseSpec, type RunSpec, type RunSpecInput } from './spec';

export type { ContinuedRun };

const SECOND = 1000;
const MINUTE = 60 * SECOND;

function activities(pollSeconds: number) {
  // Heartbeats arrive on a timer; a worker that dies is noticed after a few missed ones.
  const heartbeatTimeout = Math.max(10, Math.ceil(4 * pollSeconds)) * SECOND;
  // Transient API errors (5xx, 429 / rateLimitExceeded, timeouts, resets) are retried for
  // as long as the run's limits allow, never by a small attempt count: only the named
  // failures listed here end a step, and the limits are the machine's own timers.
  const retry = { initialInterval: SECOND, maximumInterval: MINUTE, nonRetryableErrorTypes: [...nonRetryableFailureTypes] };
  const quick: ActivityOptions = { startToCloseTimeout: MINUTE, retry };
  return {
    quick: proxyActivities<SternaActivities>(quick),
    provision: proxyActivities<SternaActivities>({ ...quick, startToCloseTimeout: 6 * 60 * MINUTE, heartbeatTimeout }),
    // Release must happen, whatever the API does meanwhile.
    release: proxyActivities<SternaActivities>({ startToCloseTimeout: 10 * MINUTE, heartbeatTimeout, retry }),
  };
}

export async function trainingRun(input: RunSpecInput | ContinuedRun): Promise<RunResult> {
  const info = workflowInfo();
  const execution = executionToken(info.firstExecutionRunId);
  // A bad spec (or a forged continued state) fails here, before anything exists.
  const { spec, state } = isContinuedRun(input)
    ? acceptContinuation(input, { workflowId: info.workflowId, execution, continuedFromExecutionRunId: info.continuedFromExecutionRunId })
    : fresh(input);
  const run = new Driver(spec, state, execution);
  run.installHandlers();
  let continuing = false;
  try {
    return await run.drive();
  } catch (err) {
    if (err instanceof ContinueAsNew) continuing = true;
    else run.stopped(isCancellation(err) ? Phase.Cancelled : Phase.Failed, err);
    throw err;
  } finally {
    // Runs on success, failure and cancellation alike, and cannot itself be cancelled.
    // A continue-as-new hands the live resource over to the next run instead.
    if (!continuing) await CancellationScope.nonCancellable(() => run.releaseAll());
  }
}

function fresh(input: RunSpecInput): { spec: RunSpec; state: RunState } {
  // Only a fresh start checks the deadline against now: a continued run's may have passed.
  const now = Date.now();
  const spec = parseSpec(input, { nowMs: now });
  return { spec, state: initialState(workflowInfo().workflowId, now, spec.pricing.budgetUsd, deadlineMs(spec, now)) };
}

class Driver {
  private readonly acts: ReturnType<typeof activities>;
  /** Messages that arrived, in order: the machine's next events. */
  private readonly inbox: RunEvent[] = [];
  private readonly attemptsAtStart: number;
  private published = '';

  constructor(
    private readonly spec: RunSpec,
    private readonly state: RunState,
    private readonly execution: string,
  ) {
    this.acts = activities(spec.recovery.pollSeconds);
    this.attemptsAtStart = state.attempts.length;
  }

  private context(): Context {
    const info = workflowInfo();
    return { nowMs: Date.now(), workflowId: info.workflowId, execution: this.execution, continueAsNewSuggested: info.continueAsNewSuggested, attemptsAtStart: this.attemptsAtStart };
  }

  installHandlers(): void {
    setHandler(statusQuery, () => statusOf(this.state, Date.now()));
    setHandler(
      setBudgetUpdate,
      (budgetUsd) => {
        this.state.budgetUsd = budgetUsd;
        this.limitMoved(`budget set to $${budgetUsd.toFixed(2)}`);
        return statusOf(this.state, Date.now());
      },
      { validator: (budgetUsd) => this.refuse(budgetProblem(this.state, budgetUsd, Date.now())) },
    );
    setHandler(
      setDeadlineUpdate,
      (deadline) => {
        this.state.deadline = new Date(Date.parse(deadline)).toISOString();
        this.limitMoved(`deadline set to ${this.state.deadline}`);
        return statusOf(this.state, Date.now());
      },
      { validator: (deadline) => this.refuse(newDeadlineProblem(deadline, Date.now())) },
    );
    setHandler(preemptionNoticeSignal, (notice) => void this.inbox.push({ kind: 'notice', ...notice }));
    setHandler(observationSignal, (observation) => void this.inbox.push({ kind: 'observed', observation, via: 'observer' }));
  }

  private refuse(problem: string | undefined): void {
    if (problem) throw failure(FailureType.InvalidSpec, problem);
  }

  private limitMoved(event: string): void {
    record(this.state, Date.now(), { kind: TimelineKind.LimitChanged, event });
    this.inbox.push({ kind: 'tick' });
  }

  async drive(): Promise<RunResult> {
    let event: RunEvent = { kind: 'start' };
    for (;;) {
      const command = next(this.state, this.spec, event, this.context());
      this.publish();
      if (command.kind === 'complete') return resultOf(this.state, Date.now());
      event = await this.carryOut(command);
    }
  }

  private async carryOut(command: Exclude<Command, { kind: 'complete' }>): Promise<RunEvent> {
    switch (command.kind) {
      case 'find-capacity':
        return { kind: 'offers', offers: await this.acts.quick.findCapacity(this.capacityRequest()) };
      case 'provision':
        return this.provision(command.attempt);
      case 'release':
        return this.release(command.attempt, command.createMayBeInFlight);
      case 'look':
        return this.look(command.attempt);
      case 'wait':
        return this.nextMessage(command.untilMs);
      case 'continue-as-new':
        await condition(allHandlersFinished);
        record(this.state, Date.now(), { kind: TimelineKind.ContinuedAsNew, event: 'continuing as new to keep the history short' });
        return continueAsNew<typeof trainingRun>({ continued: true, spec: this.spec, state: this.state });
      case 'fail':
        throw failure(command.failure, command.message, command.details);
    }
  }

  private capacityRequest() {
    const { backend, resources, placement } = this.spec;
    return {
      backend,
      request: { accelerators: resources.accelerators, machineType: resources.machineType, regions: placement.regions, zones: placement.zones, provisioningModels: ['SPOT', 'STANDARD'] as ('SPOT' | 'STANDARD')[] },
    };
  }

  private async provision(number: number): Promise<RunEvent> {
    const attempt = this.state.attempts[number - 1];
    const owner = ownerOf(this.context(), number);
    const { offer } = attempt;
    try {
      const result = await this.acts.provision.provision.executeWithOptions(
        { summary: `provision ${offer.machineType} (${offer.accelerator} x${offer.acceleratorCount}) ${offer.provisioningModel === 'SPOT' ? 'spot' : 'on-demand'} in ${offer.zone}` },
        [
          {
            name: attempt.ref.name,
            offer,
            owner,
            labels: resourceLabels(owner, this.spec.labels),
            diskSizeGb: this.spec.resources.diskSizeGb,
            image: this.spec.image,
            releaseBy: new Date(resourceReleaseByMs(this.state, this.spec, Date.now())).toISOString(),
            agent: {
              runId: this.state.runId,
              attempt: number,
              argv: this.spec.command,
              env: { ...this.spec.env, STERNA_CHECKPOINT_INTERVAL: String(this.spec.checkpoint.interval) },
              datasets: this.spec.datasets,
              // Each run checkpoints under its own prefix, so runs sharing a bucket never mix.
              checkpointUri: `${this.spec.checkpoint.uri.replace(/\/+$/, '')}/${runKey(this.state.runId)}`,
              resumeFrom: this.state.lastCheckpoint,
              pollSeconds: this.spec.recovery.pollSeconds,
            },
          },
        ],
      );
      attempt.ref = result.ref;
      return { kind: 'provisioned', attempt: number, startedAt: result.window.startedAt, adopted: result.adopted };
    } catch (err) {
      // A named failure is the create's definite answer; anything else (cancellation, a
      // lost worker) leaves open whether it may still land, and ends the run here.
      const named = namedFailureOf(err);
      if (!named) throw err;
      return { kind: 'provision-failed', attempt: number, failure: named.type, message: named.message };
    }
  }

  private async release(number: number, createMayBeInFlight: boolean): Promise<RunEvent> {
    const attempt = this.state.attempts[number - 1];
    const result = await this.acts.release.release.executeWithOptions({ summary: `release ${attempt.ref.name} in ${attempt.ref.zone}` }, [
      { ref: attempt.ref, owner: ownerOf(this.context(), number), createMayBeInFlight },
    ]);
    return { kind: 'released', attempt: number, ...result };
  }

  private async look(number: number): Promise<RunEvent> {
    const attempt = this.state.attempts[number - 1];
    const snapshot = await this.acts.quick.observe.executeWithOptions({ summary: `look at ${attempt.ref.name}` }, [{ ref: attempt.ref }]);
    return { kind: 'observed', via: 'look', observation: { name: attempt.ref.name, owner: ownerOf(this.context(), number), at: new Date(Date.now()).toISOString(), snapshot } };
  }

  /** The next message, or a tick when `untilMs` comes first. No activity slot is held. */
  private async nextMessage(untilMs?: number): Promise<RunEvent> {
    if (this.inbox.length === 0) {
      if (untilMs === undefined) await condition(() => this.inbox.length > 0);
      else await condition(() => this.inbox.length > 0, Math.max(1, untilMs - Date.now()));
    }
    return this.inbox.shift() ?? { kind: 'tick' };
  }

  /** Releases, in parallel, every attempt not yet released (the run is ending). */
  async releaseAll(): Promise<void> {
    const pending = this.state.attempts.filter((a) => !a.released);
    if (pending.length === 0) return;
    const phase = this.state.phase;
    this.state.phase = Phase.Releasing;
    const events = await Promise.all(pending.map((a) => this.release(a.attempt, !a.createSettled)));
    for (const event of events) if (event.kind === 'released') absorbRelease(this.state, event, Date.now());
    this.state.phase = phase === Phase.Releasing ? Phase.Failed : phase;
    this.publish();
  }

  stopped(phase: Phase, err: unknown): void {
    this.state.phase = phase;
    const live = this.state.attempts.find((a) => a.outcome === AttemptOutcome.Running);
    if (live) live.outcome = AttemptOutcome.Stopped;
    record(this.state, Date.now(), { kind: TimelineKind.Stopped, event: phase === Phase.Cancelled ? 'cancelled' : `failed: ${namedFailureOf(err)?.message ?? String(err)}` });
  }

  /** Upserts the search attributes when what they show has changed. */
  private publish(): void {
    const attributes = searchAttributesOf(this.state, this.spec, Date.now());
    const key = JSON.stringify(attributes);
    if (key === this.published) return;
    this.published = key;
    upsertSearchAttributes(attributes);
  }
}
