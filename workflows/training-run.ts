/**
 * trainingRun: one training run, from spec to released resources. This file is wiring:
 * the rules live in the pure state machine (run/machine.ts); here its commands become
 * activities and timers, messages become events, and every path ends in a release.
 *
 *   validate -> loop { command = next(state, spec, event, now); event = carry out(command) }
 *   finally, non-cancellable: release every resource this run created.
 */
import { allHandlersFinished, CancellationScope, condition, continueAsNew, ContinueAsNew, isCancellation, patched, proxyActivities, setCurrentDetails, setHandler, upsertMemo, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { acceptContinuation, isContinuedRun, type ContinuedRun } from './continuation';
import { failure, FailureType, namedFailureOf } from './failures';
import { observationSignal, preemptionNoticeSignal, setBudgetUpdate, setDeadlineUpdate, statusQuery } from './messages';
import { Inbox } from './inbox';
import { executionToken } from './naming';
import { absorbRelease, next, ownerOf, stopRun, type Command, type Context, type RunEvent } from './run/machine';
import { mayNotify, notificationsDue, notifyWakeAtMs, remember, type NotifyMoment } from './run/notify';
import { NOTIFY_ACTIVITY_OPTIONS, type NotifyActivities } from './run/notify-contract';
import { capacityFound } from './run/prices';
import { capacityRequest, provisionRequest, provisionSummary, startingState } from './run/requests';
import { Phase, record, TimelineKind, type RunState } from './run/state';
import { budgetProblem, newDeadlineProblem, setBudget, setDeadline } from './run/validators';
import { currentDetailsOf, resultOf, searchAttributesOf, statusOf, type RunResult } from './run/views';
import { runActivities } from './run-activities';
import { parseSpec, type RunSpec, type RunSpecInput } from './spec';
import { costRefreshAt, costMemoOf, COST_MEMO } from './run/cost-refresh';
import { TeamLink } from './teams/run-link';
import { outcomesToTell } from './zones/from-run';
import type { ZoneMemory } from './zones/memory';
import { usesZoneMemory, zoneMemoryActivities } from './zones/run-link';

export type { ContinuedRun };

/** How long an ending run waits for its last notifications to be answered. */
const FINAL_DELIVERY_WAIT_MS = 5 * 60 * 1000;

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
  let failed: NotifyMoment | undefined;
  try {
    return await run.drive();
  } catch (err) {
    if (err instanceof ContinueAsNew) continuing = true;
    else {
      const named = namedFailureOf(err);
      stopRun(state, isCancellation(err) ? Phase.Cancelled : Phase.Failed, named?.message ?? String(err), Date.now());
      if (!isCancellation(err)) failed = { kind: 'ended', phase: Phase.Failed, failure: named?.type, message: named?.message ?? String(err) };
    }
    throw err;
  } finally {
    // Runs on success, failure and cancellation alike, and cannot itself be cancelled.
    // A continue-as-new hands the live resource over to the next run instead.
    if (!continuing) {
      await CancellationScope.nonCancellable(async () => {
        try {
          await run.releaseAll();
        } finally {
          // The team gets its GPUs back before the run waits for its last notifications.
          await run.endRun();
        }
        if (failed) run.tell(failed);
        await run.deliveriesSettled(FINAL_DELIVERY_WAIT_MS);
      });
    }
  }
}

function refuse(problem: string | undefined): void {
  if (problem) throw failure(FailureType.InvalidSpec, problem);
}

function fresh(input: RunSpecInput): { spec: RunSpec; state: RunState } {
  // Only a fresh start checks the deadline against now: a continued run's may have passed.
  const now = Date.now();
  const spec = parseSpec(input, { nowMs: now });
  return { spec, state: startingState(spec, workflowInfo().workflowId, now) };
}

class Driver {
  private readonly acts: ReturnType<typeof runActivities>;
  private readonly inbox = new Inbox();
  private readonly attemptsAtStart: number;
  private readonly zones = zoneMemoryActivities();
  /** Attempts whose outcome the zone memory has been told (those released before this execution were, or predate it). */
  private readonly told: Set<number>;
  private published = '';
  private memo = '';
  private readonly team: TeamLink;
  private readonly notifyActs = proxyActivities<NotifyActivities>(NOTIFY_ACTIVITY_OPTIONS);
  private notifying: boolean | undefined;
  /** Deliveries handed out and not yet answered. */
  private deliveriesInFlight = 0;

  constructor(
    private readonly spec: RunSpec,
    private readonly state: RunState,
    private readonly execution: string,
  ) {
    this.acts = runActivities(spec.recovery.pollSeconds);
    this.attemptsAtStart = state.attempts.length;
    this.team = new TeamLink(spec, state, this.inbox);
    this.told = new Set(state.attempts.filter((a) => a.released).map((a) => a.attempt));
  }

  private context(): Context {
    const info = workflowInfo();
    // Runs recorded before runs asked for the observer themselves replay without asking.
    const asksObserver = patched('sterna-run-asks-observer');
    // Runs recorded before team admission place without asking their team.
    const teamAdmission = patched('sterna-team-admission');
    // Runs recorded before GPU readings and the idle rule replay without them.
    const gpuUtil = patched('sterna-gpu-util');
    return { nowMs: Date.now(), workflowId: info.workflowId, execution: this.execution, continueAsNewSuggested: info.continueAsNewSuggested, attemptsAtStart: this.attemptsAtStart, asksObserver, teamAdmission, gpuUtil };
  }

  installHandlers(): void {
    const status = () => statusOf(this.state, Date.now(), this.spec);
    setHandler(statusQuery, status);
    setHandler(setBudgetUpdate, (usd) => this.limitMoved(() => setBudget(this.state, usd, Date.now())), {
      validator: (usd) => refuse(budgetProblem(this.state, usd, Date.now())),
    });
    setHandler(setDeadlineUpdate, (deadline) => this.limitMoved(() => setDeadline(this.state, deadline, Date.now())), {
      validator: (deadline) => refuse(newDeadlineProblem(deadline, Date.now())),
    });
    setHandler(preemptionNoticeSignal, (notice) => void this.inbox.push({ kind: 'notice', ...notice }));
    setHandler(observationSignal, (observation) => void this.inbox.push({ kind: 'observed', observation, via: 'observer' }));
    this.team.installHandlers();
  }

  /** A limit moved: the machine looks at the run again at once. */
  private limitMoved(apply: () => void) {
    apply();
    this.inbox.push({ kind: 'tick' });
    return statusOf(this.state, Date.now(), this.spec);
  }

  async drive(): Promise<RunResult> {
    let event: RunEvent = { kind: 'start' };
    for (;;) {
      let command = next(this.state, this.spec, event, this.context());
      // An attempt's ledger line is final once its release is folded in: the team records it.
      this.team.billed(event.kind === 'released');
      this.publish();
      this.tell({ kind: 'step' });
      await this.tellZoneMemory();
      if (command.kind === 'complete') {
        this.tell({ kind: 'ended', phase: Phase.Completed });
        return resultOf(this.state, Date.now());
      }
      if (command.kind === 'wait') command = { ...command, untilMs: this.wakeForNotifications(command.untilMs) };
      event = await this.carryOut(command);
    }
  }

  /**
   * Whether this run sends notifications: someone may listen, and the run was not
   * recorded before runs did (their histories replay without the activities).
   */
  private notifies(): boolean {
    return (this.notifying ??= mayNotify(this.spec) && patched('sterna-notify'));
  }

  /**
   * Hands what is due to delivery (run/notify.ts decides), without waiting: the run goes
   * on, and a webhook that is down never holds it up. The deliveries outlive a
   * cancellation of the run, and the run waits for them before it ends or continues.
   */
  tell(moment: NotifyMoment): void {
    if (!this.notifies()) return;
    const due = notificationsDue(this.state, this.spec, moment, Date.now(), this.state.notify);
    if (due.length === 0) return;
    this.state.notify = remember(this.state.notify, due);
    for (const event of due) {
      this.deliveriesInFlight++;
      void CancellationScope.nonCancellable(() => this.notifyActs.deliverNotification({ event, webhooks: this.spec.notify?.webhooks ?? [] }))
        .then(
          (report) => {
            for (const f of report.failed) record(this.state, Date.now(), { kind: TimelineKind.Warning, event: `notification ${event.kind} refused by ${f.target}: ${f.problem}` });
          },
          (err: unknown) => record(this.state, Date.now(), { kind: TimelineKind.Warning, event: `notification ${event.kind} not delivered: ${String(err)}` }),
        )
        .finally(() => this.deliveriesInFlight--);
    }
  }

  /**
   * Waits for the deliveries in flight: all of them before a continue-as-new (the next run
   * would not send them again), at most `limitMs` as the run ends, so a webhook that is
   * down delays a run's end by minutes, not by the hour its delivery may retry.
   */
  async deliveriesSettled(limitMs?: number): Promise<void> {
    if (this.deliveriesInFlight === 0) return;
    if (limitMs === undefined) await condition(() => this.deliveriesInFlight === 0);
    else await condition(() => this.deliveriesInFlight === 0, limitMs);
  }

  /** A wait ends early when a budget or deadline warning falls due meanwhile. */
  private wakeForNotifications(untilMs: number | undefined): number | undefined {
    if (!this.notifies()) return untilMs;
    const wake = notifyWakeAtMs(this.state, this.spec, Date.now(), this.state.notify);
    return wake !== undefined && (untilMs === undefined || wake < untilMs) ? wake : untilMs;
  }

  private async carryOut(command: Exclude<Command, { kind: 'complete' }>): Promise<RunEvent> {
    switch (command.kind) {
      case 'find-capacity': {
        const [found, zoneMemory] = await Promise.all([this.acts.quick.findCapacity(capacityRequest(this.spec)), this.readZoneMemory()]);
        return { kind: 'offers', ...capacityFound(found), ...(zoneMemory ? { zoneMemory } : {}) };
      }
      case 'provision':
        return this.provision(command.attempt);
      case 'release':
        return this.release(command.attempt, command.createMayBeInFlight);
      case 'look':
        return this.look(command.attempt);
      case 'wait':
        return this.inbox.next(this.refreshingCost(command.untilMs));
      case 'ask-admission':
        return this.team.ask();
      case 'ensure-observer':
        await this.acts.observer.ensureObserver({ backend: this.spec.backend }).catch(() => undefined);
        return { kind: 'observer-asked' };
      case 'continue-as-new':
        await this.deliveriesSettled();
        await condition(allHandlersFinished);
        record(this.state, Date.now(), { kind: TimelineKind.ContinuedAsNew, event: 'continuing as new to keep the history short' });
        return continueAsNew<typeof trainingRun>({ continued: true, spec: this.spec, state: this.state });
      case 'fail':
        throw failure(command.failure, command.message, command.details);
    }
  }

  private async provision(number: number): Promise<RunEvent> {
    const attempt = this.state.attempts[number - 1];
    try {
      const result = await this.acts.provision.provision.executeWithOptions({ summary: provisionSummary(attempt.offer) }, [
        provisionRequest(this.spec, this.state, attempt, ownerOf(this.context(), number), Date.now()),
      ]);
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
      { ref: attempt.ref, owner: ownerOf(this.context(), number), createMayBeInFlight, startedAt: attempt.startedAt },
    ]);
    return { kind: 'released', attempt: number, ...result };
  }

  /** While a resource is billed, wake at least every few minutes so the cost shown stays current. */
  private refreshingCost(untilMs: number | undefined): number | undefined {
    const billing = this.state.attempts.some((a) => a.startedAt && !a.stoppedAt);
    return billing && patched('sterna-cost-refresh') ? costRefreshAt(untilMs, Date.now()) : untilMs;
  }

  private async look(number: number): Promise<RunEvent> {
    const attempt = this.state.attempts[number - 1];
    const snapshot = await this.acts.quick.observe.executeWithOptions({ summary: `look at ${attempt.ref.name}` }, [{ ref: attempt.ref }]);
    return { kind: 'observed', via: 'look', observation: { name: attempt.ref.name, owner: ownerOf(this.context(), number), at: new Date(Date.now()).toISOString(), snapshot } };
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
    await this.tellZoneMemory();
  }

  /** The project's zone memory for this run's accelerators: placement's prior. Recorded in history, so replay reads the same. */
  private async readZoneMemory(): Promise<ZoneMemory | undefined> {
    if (!usesZoneMemory()) return undefined;
    const accelerators = this.spec.resources.accelerators.map((a) => a.type);
    return this.zones.readZoneMemory({ backend: this.spec.backend, accelerators }).catch(() => undefined);
  }

  /** Tells the zone memory how each newly released attempt ended (stockout, preemption, lifetime). */
  private async tellZoneMemory(): Promise<void> {
    const { attempts, outcomes } = outcomesToTell(this.state.attempts, this.told, Date.now());
    for (const attempt of attempts) this.told.add(attempt);
    if (outcomes.length === 0 || !usesZoneMemory()) return;
    await this.zones.recordZoneOutcomes({ backend: this.spec.backend, outcomes }).catch(() => undefined);
  }

  /** The run is over, however it ended: its team gets its GPUs back and its final spend; the cost report its memo. */
  async endRun(): Promise<void> {
    await this.team.ended();
    if (patched('sterna-cost-refresh')) this.publishMemo();
  }

  /** Upserts the search attributes when what they show has changed; keeps the UI's current details current. */
  private publish(): void {
    // Not a command (the UI reads it through the metadata query), but behind a patch so runs
    // recorded before it replay exactly as they ran.
    if (patched('sterna-current-details')) setCurrentDetails(currentDetailsOf(this.state, this.spec, Date.now()));
    const attributes = searchAttributesOf(this.state, this.spec, Date.now());
    const key = JSON.stringify(attributes);
    if (key === this.published) return;
    this.published = key;
    upsertSearchAttributes(attributes);
  }

  /** The run's cost summary, for `sterna cost` (a memo: listed with the run, no worker needed). */
  private publishMemo(): void {
    const memo = costMemoOf(this.state, this.spec, Date.now());
    const key = JSON.stringify(memo);
    if (key === this.memo) return;
    this.memo = key;
    upsertMemo({ [COST_MEMO]: memo });
  }
}
