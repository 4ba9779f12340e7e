/**
 * trainingRun: one training run, from spec to released resources. This file is wiring:
 * the rules live in the pure state machine (run/machine.ts); here its commands become
 * activities and timers, messages become events, and every path ends in a release.
 *
 *   validate -> loop { command = next(state, spec, event, now); event = carry out(command) }
 *   finally, non-cancellable: release every resource this run created.
 */
import { allHandlersFinished, CancellationScope, condition, ContinueAsNew, isCancellation, workflowInfo } from '@temporalio/workflow';
import { acceptContinuation, executionProblem, isContinuedRun, type ContinuedRun, type Execution } from './continuation';
import { failure, FailureType, namedFailureOf } from './failures';
import { Inbox } from './inbox';
import { executionToken, runKey } from './naming';
import { AttemptActs } from './run/attempt-acts';
import { next, stopRun, type Command, type Context, type RunEvent } from './run/machine';
import type { NotifyMoment } from './run/notify';
import { NotifyLink } from './run/notify-link';
import { freshRun } from './run/requests';
import { Phase, record, TimelineKind, type RunState } from './run/state';
import { Publisher } from './run/publish';
import { installRunHandlers } from './run/handlers';
import { resultOf, type RunResult } from './run/views';
import { runActivities } from './run-activities';
import type { RunSpec, RunSpecInput } from './spec';
import { costRefreshAt } from './run/cost-refresh';
import { TeamLink } from './teams/run-link';
import { MemoryLink } from './run/memory-link';
import { PlacementActs } from './run/placement-acts';
import { Releases } from './run/releases';
import { continueOnCurrentVersion, newVersionCurrent } from './versions';

export type { ContinuedRun };

/** How many of a failed attempt's last log lines its run's failure carries. */
const LOG_TAIL_LINES = 20;

/** How long an ending run waits for its last notifications to be answered. */
const FINAL_DELIVERY_WAIT_MS = 5 * 60 * 1000;

export async function trainingRun(input: RunSpecInput | ContinuedRun): Promise<RunResult> {
  const info = workflowInfo();
  const execution = executionToken(info.firstExecutionRunId);
  // A bad spec (or a forged continued state) fails here, before anything exists.
  const started: Execution = { workflowId: info.workflowId, execution, continuedFromExecutionRunId: info.continuedFromExecutionRunId, cronSchedule: info.cronSchedule, attempt: info.attempt };
  const problem = executionProblem(started);
  if (problem) throw failure(FailureType.InvalidSpec, problem);
  const { spec, state } = isContinuedRun(input) ? acceptContinuation(input, started) : freshRun(input, info.workflowId, Date.now());
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
        await run.memories.settled();
        if (failed) run.notify.tell(failed);
        await run.notify.settled(FINAL_DELIVERY_WAIT_MS);
      });
    }
  }
}

class Driver {
  private readonly acts: ReturnType<typeof runActivities>;
  private readonly inbox = new Inbox();
  private readonly attemptsAtStart: number;
  private readonly team: TeamLink;
  readonly memories: MemoryLink;
  private readonly shown: Publisher;
  private readonly attempt: AttemptActs;
  private readonly placement: PlacementActs;
  readonly notify: NotifyLink;
  private readonly releases: Releases;

  constructor(
    private readonly spec: RunSpec,
    private readonly state: RunState,
    private readonly execution: string,
  ) {
    this.acts = runActivities(spec.recovery.pollSeconds);
    this.attemptsAtStart = state.attempts.length;
    this.team = new TeamLink(spec, state, this.inbox);
    this.memories = new MemoryLink(spec, state);
    this.placement = new PlacementActs(spec, state, this.acts, this.memories);
    this.shown = new Publisher(spec, state);
    this.notify = new NotifyLink(spec, state);
    this.attempt = new AttemptActs(spec, state, this.acts, (attempt) => ({ run: runKey(workflowInfo().workflowId), execution, attempt }));
    this.releases = new Releases(state, this.attempt, this.inbox);
  }

  private context(): Context {
    const info = workflowInfo();
    return { nowMs: Date.now(), workflowId: info.workflowId, execution: this.execution, continueAsNewSuggested: info.continueAsNewSuggested, newVersionCurrent: newVersionCurrent(), historyLength: info.historyLength, attemptsAtStart: this.attemptsAtStart };
  }

  installHandlers(): void {
    installRunHandlers(this.spec, this.state, this.inbox);
    this.team.installHandlers();
  }

  async drive(): Promise<RunResult> {
    let event: RunEvent = { kind: 'start' };
    for (;;) {
      let command = next(this.state, this.spec, event, this.context());
      // An attempt's ledger line is final once its release is folded in: the team records it.
      this.team.billed(event.kind === 'released');
      this.shown.attributesAndDetails();
      this.notify.tell({ kind: 'step' });
      await this.memories.tell();
      if (command.kind === 'complete') {
        this.notify.tell({ kind: 'ended', phase: Phase.Completed });
        return resultOf(this.state, Date.now());
      }
      if (command.kind === 'wait') command = { ...command, untilMs: this.notify.wakeAt(command.untilMs) };
      event = await this.carryOut(command);
    }
  }

  private async carryOut(command: Exclude<Command, { kind: 'complete' }>): Promise<RunEvent> {
    switch (command.kind) {
      case 'check':
        return this.placement.check();
      case 'find-capacity':
        return this.placement.findCapacity();
      case 'read-zone-memory':
        return { kind: 'zone-memory', memory: await this.memories.zones.read() };
      case 'set-checkpoint-interval':
        return this.attempt.setInterval(command.attempt, command.interval);
      case 'provision':
        return this.attempt.provision(command.attempt);
      case 'release':
        return command.beside ? this.releases.beside(command.attempt, command.createMayBeInFlight) : this.attempt.release(command.attempt, command.createMayBeInFlight);
      case 'look':
        return this.attempt.look(command.attempt);
      case 'ask-move':
        return this.attempt.askMove(command.attempt);
      case 'wait':
        return this.inbox.next(this.refreshingCost(command.untilMs));
      case 'ask-admission':
        return this.team.ask();
      case 'ensure-observer':
        await this.acts.observer.ensureObserver({ backend: this.spec.backend }).catch(() => undefined);
        return { kind: 'observer-asked' };
      case 'continue-as-new':
        await Promise.all([this.notify.settled(), this.memories.settled()]);
        await condition(allHandlersFinished);
        // News that came while this execution settled is its own to absorb: the next would never hear of it.
        if (this.inbox.pending()) return this.inbox.next();
        record(this.state, Date.now(), { kind: TimelineKind.ContinuedAsNew, event: 'continuing as new to keep the history short' });
        return continueOnCurrentVersion<typeof trainingRun>({ continued: true, spec: this.spec, state: this.state });
      case 'fail':
        throw await this.failureOf(command);
    }
  }

  /**
   * The run's failure; where an attempt's agent or command failed, with the last lines of
   * its log in the details (a payload, so encrypted like the rest: the message is not).
   */
  private async failureOf(command: Extract<Command, { kind: 'fail' }>) {
    if (command.logTailOf === undefined) return failure(command.failure, command.message, command.details);
    const logTail = await this.acts.logs
      .attemptLogTail({ checkpointUri: this.spec.checkpoint.uri, workflowId: workflowInfo().workflowId, attempt: command.logTailOf, lines: LOG_TAIL_LINES })
      .catch(() => [] as string[]);
    const details = { ...(typeof command.details === 'object' && command.details !== null ? command.details : {}), attempt: command.logTailOf, logTail };
    const where = logTail.length > 0 ? `; its log's last ${logTail.length} lines are in this failure's details` : '';
    return failure(command.failure, `${command.message}${where} (all of it: sterna logs ${workflowInfo().workflowId} --attempt ${command.logTailOf})`, details);
  }

  /** While a resource is billed, wake at least every few minutes so the cost shown stays current. */
  private refreshingCost(untilMs: number | undefined): number | undefined {
    const billing = this.state.attempts.some((a) => a.startedAt && !a.stoppedAt);
    return billing ? costRefreshAt(untilMs, Date.now()) : untilMs;
  }

  /** Releases, in parallel, every attempt not yet released (the run is ending); one already being released is waited for. */
  async releaseAll(): Promise<void> {
    if (this.state.attempts.every((a) => a.released)) return;
    const phase = this.state.phase;
    this.state.phase = Phase.Releasing;
    await this.releases.all();
    this.state.phase = phase === Phase.Releasing ? Phase.Failed : phase;
    this.shown.attributesAndDetails();
    await this.memories.tell();
  }

  /** The run is over, however it ended: its team gets its GPUs back and its final spend; the cost report its memo. */
  async endRun(): Promise<void> {
    await this.team.ended();
    this.shown.costMemo();
  }
}
