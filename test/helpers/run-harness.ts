/**
 * A run under test without a server: the same pure reducer the workflow drives
 * (workflows/run/machine.ts), its state (replaced at every step, as the workflow's is), a
 * hand-moved clock, and the last action and effects it asked for. Test files extend it
 * with the steps their behaviour needs.
 */
import { strict as assert } from 'node:assert';
import { executionToken, resourceName, runKey, type Owner } from '../../workflows/naming';
import { absorb, step } from '../../workflows/run/machine';
import type { Action, Context, Effect, RunEvent } from '../../workflows/run/protocol';
import { initialState, type RunState } from '../../workflows/run/state';
import { parseSpec, type RunSpec, type RunSpecInput } from '../../workflows/spec';
import type { AgentSnapshot, Offer } from '../../workflows/types';

export const T0 = Date.parse('2026-12-01T00:00:00Z');
export const EXEC = executionToken('first-run-id');

/** A one-GPU offer; fields may be overridden (model, accelerator, machine, prices). */
export function offerIn(zone: string, pricePerHour: number, fields: Partial<Offer> = {}): Offer {
  return {
    backend: 'gce',
    zone,
    region: zone.slice(0, -2),
    accelerator: 'nvidia-l4',
    acceleratorCount: 1,
    machineType: 'g2-standard-4',
    provisioningModel: 'SPOT',
    pricePerHour,
    onDemandPricePerHour: 0.7,
    quotaAvailable: true,
    ...fields,
  };
}

/** A spec for a one-L4 spot run; `overrides` replace whole top-level sections. */
export function specOf(overrides: Partial<RunSpecInput> = {}): RunSpec {
  return parseSpec({ command: ['python', 'train.py'], checkpoint: { uri: 'gs://ckpt/run' }, resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] }, pricing: { mode: 'spot' }, ...overrides });
}

/** The namespace a harness run executes in: the test server's, whose one team it is. */
export const NAMESPACE = 'default';

/**
 * The run passed its checks and its team admitted it at once (a team without limits does):
 * the tests of placing, training and ending start past both (run-machine.test.ts covers the
 * checks, team-run-admission.test.ts admission). Its team is its namespace, as its ledger
 * answered (the spec's label never is).
 */
export function admitted(state: RunState, atMs = T0, team = NAMESPACE): RunState {
  state.checked = true;
  state.namespace = team;
  state.admission = { team, status: 'admitted', askedAt: atMs, firstAskedAt: atMs };
  return state;
}

/**
 * One step of the reducer on `run`'s state: the state is replaced with the step's new one
 * (frozen: a test, like the workflow, cannot change it in place), and its action returned.
 */
export function stepOn(run: { state: RunState; effects?: Effect[] }, spec: RunSpec, event: RunEvent, context: Context): Action {
  const next = step(run.state, spec, event, context);
  run.state = next.state;
  run.effects = [...(run.effects ?? []), ...next.effects];
  return next.action;
}

export class RunHarness {
  state: RunState;
  now = T0;
  last!: Action;
  /** The effects of the last `send` (what the shell would carry out beside `last`). */
  effects: Effect[] = [];

  constructor(
    readonly workflowId: string,
    readonly spec: RunSpec,
    /** The namespace it runs in: its team. */
    team = NAMESPACE,
  ) {
    const deadline = spec.time.deadlineAfter !== undefined ? T0 + spec.time.deadlineAfter * 1000 : undefined;
    this.state = admitted(initialState(workflowId, T0, spec.pricing.budgetUsd, deadline), T0, team);
  }

  context(): Context {
    return { nowMs: this.now, workflowId: this.workflowId, execution: EXEC, continueAsNewSuggested: false, attemptsAtStart: 0 };
  }

  /**
   * Whether an ask for the fleet observer is answered at once (`observer-asked`), so tests of
   * other rules see what comes after it; the observer's own tests turn it off.
   */
  answersObserverAsks = true;

  send(event: RunEvent): Action {
    this.effects = [];
    this.last = stepOn(this, this.spec, event, this.context());
    while (this.answersObserverAsks && this.last.kind === 'ensure-observer') this.last = stepOn(this, this.spec, { kind: 'observer-asked' }, this.context());
    return this.last;
  }

  /** Folds in what arrives beside the loop (an update, a release or the end of a stopping run), as the shell does; its effects. */
  apply(event: RunEvent): Effect[] {
    const next = absorb(this.state, this.spec, event, this.context());
    this.state = next.state;
    return next.effects;
  }

  /** Moves the clock to `seconds` after the run's start. */
  at(seconds: number): this {
    this.now = T0 + seconds * 1000;
    return this;
  }

  owner(attempt: number): Owner {
    return { run: runKey(this.workflowId), execution: EXEC, attempt };
  }

  /** What a look (or the observer) saw of attempt `attempt`'s resource: running, unless `snapshot` says otherwise. */
  observe(attempt: number, snapshot: Partial<AgentSnapshot>, owner = this.owner(attempt), via: 'observer' | 'look' = 'look', quietSeconds?: number): Action {
    return this.send({
      kind: 'observed',
      via,
      observation: { name: resourceName(this.workflowId, owner.execution, attempt), owner, at: new Date(this.now).toISOString(), snapshot: { lifecycle: 'running', preempted: false, ...snapshot }, quietSeconds },
    });
  }

  /** The attempt the last command provisions. */
  provisionedAttempt(): number {
    assert.equal(this.last.kind, 'provision', JSON.stringify(this.last));
    return (this.last as { attempt: number }).attempt;
  }

  /** Provisions whatever the machine asks for next (answering a find-capacity with `offers`); returns the attempt, now running. */
  provisioned(offers: Offer[]): number {
    if (this.last.kind === 'find-capacity') this.send({ kind: 'offers', offers });
    const attempt = this.provisionedAttempt();
    this.send({ kind: 'provisioned', attempt, startedAt: new Date(this.now).toISOString(), adopted: false, observerAsked: true });
    return attempt;
  }

  released(attempt: number, outcome: 'deleted' | 'absent' | 'not-ours' = 'deleted'): Action {
    return this.send({ kind: 'released', attempt, outcome, stoppedAt: new Date(this.now).toISOString() });
  }
}
