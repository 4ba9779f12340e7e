/**
 * trainingRun: one training run, from spec to released resources. This file is the
 * shell: the rules live in the reducer (run/machine.ts and its phases). Here actions
 * become activities and timers, messages become events, effects are carried out, and
 * every path ends in a release. Only `Driver.apply` and `Driver.drive` replace the state,
 * with what the reducer returned.
 *
 *   validate -> loop { { state, effects, action } = step(state, event); carry out effects; event = carry out(action) }
 *   finally, non-cancellable: release every resource this run created, then end.
 */
import { allHandlersFinished, CancellationScope, condition, ContinueAsNew, isCancellation, workflowInfo } from '@temporalio/workflow';
import { acceptContinuation, executionProblem, isContinuedRun, type ContinuedRun, type Execution } from './continuation';
import { failure, FailureType, namedFailureOf } from '../failures';
import { executionToken } from '../naming';
import { AttemptActs } from './attempt-acts';
import { finalReleases } from './ending';
import { finalKeep } from './keep';
import { installRunHandlers } from './handlers';
import { Inbox } from './inbox';
import { absorb, step } from './machine';
import { MemoryLink } from './memory-link';
import { NotifyLink } from './notify-link';
import { PlacementActs } from './placement-acts';
import { ownerOf, type Action, type Context, type Effect, type RunEvent } from './protocol';
import { Publisher } from './publish';
import { Releases } from './releases';
import { freshRun } from './requests';
import { Phase, type RunState } from './state';
import { TeamLink } from './team-link';
import { resultOf, type RunResult } from './views';
import { runActivities } from './activities';
import type { RunSpec, RunSpecInput } from '../spec';
import { continueOnCurrentVersion, newVersionCurrent } from '../versions';

export type { ContinuedRun };

/** How many of a failed attempt's last log lines its run's failure carries. */
const LOG_TAIL_LINES = 20;

/** How long an ending run waits for its last notifications to be answered. */
const FINAL_DELIVERY_WAIT_MS = 5 * 60 * 1000;

type Ended = Extract<RunEvent, { kind: 'ended' }>;

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
  let ended: Ended | undefined = { kind: 'ended', phase: Phase.Completed };
  try {
    return await run.drive();
  } catch (err) {
    if (err instanceof ContinueAsNew) ended = undefined;
    else {
      const named = namedFailureOf(err);
      const message = named?.message ?? String(err);
      const phase = isCancellation(err) ? Phase.Cancelled : Phase.Failed;
      await run.apply({ kind: 'stopped', phase, reason: message });
      ended = phase === Phase.Cancelled ? { kind: 'ended', phase } : { kind: 'ended', phase, failure: named?.type, message };
    }
    throw err;
  } finally {
    // Runs on success, failure and cancellation alike, and cannot itself be cancelled.
    // A continue-as-new hands the live resource over to the next run instead.
    if (ended) {
      const end = ended;
      await CancellationScope.nonCancellable(() => run.end(end));
    }
  }
}

class Driver {
  private readonly acts: ReturnType<typeof runActivities>;
  private readonly inbox = new Inbox();
  private readonly attemptsAtStart: number;
  private readonly team: TeamLink;
  private readonly memories = new MemoryLink();
  private readonly shown = new Publisher();
  private readonly attempt: AttemptActs;
  private readonly placement: PlacementActs;
  private readonly notify = new NotifyLink();
  private readonly releases: Releases;

  constructor(
    private readonly spec: RunSpec,
    private state: RunState,
    private readonly execution: string,
  ) {
    this.acts = runActivities(spec.recovery.pollSeconds);
    this.attemptsAtStart = state.attempts.length;
    const current = () => this.state;
    this.team = new TeamLink(spec, current, this.inbox);
    this.placement = new PlacementActs(spec, current, this.acts);
    this.attempt = new AttemptActs(spec, current, this.acts, (attempt) => ownerOf({ workflowId: workflowInfo().workflowId, execution }, attempt));
    this.releases = new Releases(this.attempt, this.inbox);
  }

  private context(): Context {
    const info = workflowInfo();
    return { nowMs: Date.now(), workflowId: info.workflowId, namespace: info.namespace, execution: this.execution, continueAsNewSuggested: info.continueAsNewSuggested, newVersionCurrent: newVersionCurrent(), historyLength: info.historyLength, attemptsAtStart: this.attemptsAtStart };
  }

  installHandlers(): void {
    installRunHandlers(this.spec, () => this.state, (event) => this.apply(event), this.inbox);
    this.team.installHandlers();
  }

  /** Folds in what arrives beside the loop (an update, a release at the end) and carries out its effects. */
  async apply(event: RunEvent): Promise<void> {
    const { state, effects } = absorb(this.state, this.spec, event, this.context());
    this.state = state;
    await this.perform(effects);
  }

  async drive(): Promise<RunResult> {
    let event: RunEvent = { kind: 'start' };
    for (;;) {
      const { state, effects, action } = step(this.state, this.spec, event, this.context());
      this.state = state;
      await this.perform(effects);
      if (action.kind === 'complete') return resultOf(this.state, Date.now());
      event = await this.carryOut(action);
    }
  }

  private async carryOut(action: Exclude<Action, { kind: 'complete' }>): Promise<RunEvent> {
    switch (action.kind) {
      case 'check':
        return this.placement.check();
      case 'find-capacity':
        return this.placement.findCapacity();
      case 'read-zone-memory':
        return { kind: 'zone-memory', memory: await this.memories.readZones(this.spec) };
      case 'set-checkpoint-interval':
        return this.attempt.setInterval(action.attempt, action.interval);
      case 'provision':
        return this.attempt.provision(action.attempt);
      case 'release':
        return action.beside ? this.releases.beside(action.attempt, action.createMayBeInFlight) : this.attempt.release(action.attempt, action.createMayBeInFlight);
      case 'look':
        return this.attempt.look(action.attempt);
      case 'ask-move':
        return this.attempt.askMove(action.attempt);
      case 'wait':
        return this.inbox.next(action.untilMs);
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
        await this.apply({ kind: 'continuing' });
        return continueOnCurrentVersion<typeof trainingRun>({ continued: true, spec: this.spec, state: this.state });
      case 'keep':
        return this.attempt.keep(action.attempt, action.untilMs);
      case 'fail':
        throw await this.failureOf(action);
    }
  }

  /** Carries out a step's effects: none is answered, and only the team's end is waited for. */
  private async perform(effects: readonly Effect[]): Promise<void> {
    for (const effect of effects) {
      switch (effect.kind) {
        case 'publish':
          this.shown.show(effect);
          break;
        case 'notify':
          this.notify.deliver(effect.events, this.spec.notify?.webhooks ?? [], (failed) => void this.apply(failed));
          break;
        case 'report-spend':
          this.team.reportSpend(effect.team, effect.totalUsd);
          break;
        case 'tell-memories':
          this.memories.tell(this.spec.backend, effect.outcomes, effect.samples);
          break;
        case 'team-ended':
          await this.team.ended(effect.team, effect.totalUsd);
          break;
        case 'cost-memo':
          this.shown.costMemo(effect.memo);
          break;
      }
    }
  }

  /**
   * The run's failure; where an attempt's agent or command failed, with the last lines of
   * its log in the details (a payload, so encrypted like the rest: the message is not).
   */
  private async failureOf(action: Extract<Action, { kind: 'fail' }>) {
    if (action.logTailOf === undefined) return failure(action.failure, action.message, action.details);
    const logTail = await this.acts.logs
      .attemptLogTail({ checkpointUri: this.spec.checkpoint.uri, workflowId: workflowInfo().workflowId, attempt: action.logTailOf, lines: LOG_TAIL_LINES })
      .catch(() => [] as string[]);
    const details = { ...(typeof action.details === 'object' && action.details !== null ? action.details : {}), attempt: action.logTailOf, logTail };
    const where = logTail.length > 0 ? `; its log's last ${logTail.length} lines are in this failure's details` : '';
    return failure(action.failure, `${action.message}${where} (all of it: sterna logs ${workflowInfo().workflowId} --attempt ${action.logTailOf})`, details);
  }

  /**
   * The run is over, however it ended: every attempt not yet released is, in parallel
   * (one already being released is waited for), but for a failed attempt kept for
   * inspection (run/keep.ts), which is labelled instead, and released after all if that
   * could not be done; then its team gets its GPUs back and its final spend, the cost
   * report its memo, and the run waits for its last notifications.
   */
  async end(ended: Ended): Promise<void> {
    try {
      const pending = finalReleases(this.state);
      const keep = finalKeep(this.state);
      if (pending.length > 0 || keep) {
        await this.apply({ kind: 'releasing-all' });
        const [released, kept] = await Promise.all([this.releases.all(pending), keep ? this.carryOut(keep) : undefined]);
        for (const event of released) await this.apply(event);
        if (kept) await this.apply(kept);
        const unkept = finalReleases(this.state).filter((a) => !pending.some((p) => p.attempt === a.attempt));
        for (const event of await this.releases.all(unkept)) await this.apply(event);
      }
    } finally {
      await this.apply(ended);
    }
    await this.memories.settled();
    await this.notify.settled(FINAL_DELIVERY_WAIT_MS);
  }
}
