import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { setBudgetUpdate, setDeadlineUpdate, statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunSpecInput } from '../../workflows/spec';
import { saveHistory } from '../helpers/histories';
import { eventually } from '../helpers/processes';
import { ScriptedProvider } from '../helpers/scripted-provider';
import { sternaTestWorker, testEnv, uniqueTaskQueue } from '../helpers/temporal';

const spec = (overrides: Partial<RunSpecInput> = {}): RunSpecInput => ({
  command: ['python', 'train.py'],
  checkpoint: { uri: 'gs://ckpt/run' },
  resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
  pricing: { mode: 'spot' },
  recovery: { pollSeconds: 0.2, zoneCooldown: '1h' },
  ...overrides,
});

const zones = [
  { zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 },
  { zone: 'us-east1-b', spot: 0.25, onDemand: 0.7 },
  { zone: 'europe-west4-a', spot: 0.3, onDemand: 0.75 },
];

describe('trainingRun decisions (scripted cloud)', function () {
  this.timeout(120_000);

  async function withWorker<T>(provider: ScriptedProvider, body: (start: (s: RunSpecInput) => ReturnType<typeof startRun>) => Promise<T>): Promise<T> {
    const taskQueue = uniqueTaskQueue('logic');
    const worker = await sternaTestWorker(taskQueue, { gce: provider });
    return worker.runUntil(body((s) => startRun(taskQueue, s)));
  }

  async function startRun(taskQueue: string, s: RunSpecInput) {
    const env = await testEnv();
    return env.client.workflow.start('trainingRun', { taskQueue, workflowId: `${taskQueue}-${Math.random().toString(36).slice(2, 8)}`, args: [s] });
  }

  async function failureOf(promise: Promise<unknown>): Promise<ApplicationFailure> {
    const err = await promise.then(
      () => assert.fail('expected the run to fail'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure, String(err));
    return err.cause;
  }

  it('moves on after a quota error and remembers it', async () => {
    const provider = new ScriptedProvider(zones).script('us-central1-a', { kind: 'quota' });
    await withWorker(provider, async (start) => {
      const run = await start(spec());
      const result = await run.result();
      assert.deepEqual(result.attempts.map((a: { zone: string; outcome: string }) => [a.zone, a.outcome]), [
        ['us-central1-a', 'quota-exceeded'],
        ['us-east1-b', 'completed'],
      ]);
    });
  });

  it('resumes every attempt from the newest checkpoint and gives up after maxPreemptions', async () => {
    const provider = new ScriptedProvider(zones)
      .script('us-central1-a', { kind: 'preempt', step: 10 })
      .script('us-east1-b', { kind: 'preempt', step: 20 })
      .script('europe-west4-a', { kind: 'preempt', step: 30 });
    await withWorker(provider, async (start) => {
      const run = await start(spec({ recovery: { pollSeconds: 0.2, maxPreemptions: 2, zoneCooldown: '1h' } }));
      const failure = await failureOf(run.result());
      assert.equal(failure.type, 'Preempted');
      assert.match(failure.message, /maxPreemptions = 2/);
      assert.deepEqual(provider.resumedFrom(), [undefined, 10, 20]);
      assert.deepEqual(await provider.listRunResources(runKey(run.workflowId)), [], 'every VM released');
    });
  });

  it('restarts after a failed training command, up to maxRestartsOnError', async () => {
    const provider = new ScriptedProvider(zones, { kind: 'exit', code: 1 });
    await withWorker(provider, async (start) => {
      const run = await start(spec({ recovery: { pollSeconds: 0.2, maxRestartsOnError: 2 } }));
      const failure = await failureOf(run.result());
      assert.equal(failure.type, 'UserCodeFailed');
      assert.equal(provider.created.length, 3, 'the first try and two restarts');
    });
  });

  it('does not retry an exit code listed in noRetryExitCodes', async () => {
    const provider = new ScriptedProvider(zones, { kind: 'exit', code: 3 });
    await withWorker(provider, async (start) => {
      const run = await start(spec({ recovery: { pollSeconds: 0.2, noRetryExitCodes: [3] } }));
      const failure = await failureOf(run.result());
      assert.equal(failure.type, 'UserCodeFailed');
      assert.match(failure.message, /noRetryExitCodes/);
      assert.equal(provider.created.length, 1);
    });
  });

  it('validates budget and deadline updates, and applies good ones', async () => {
    const provider = new ScriptedProvider(zones, { kind: 'exit', code: 0, afterPolls: 1_000_000 });
    await withWorker(provider, async (start) => {
      const run = await start(spec({ pricing: { mode: 'spot', budgetUsd: 10 } }));
      await eventually('training', async () => ((await run.query(statusQuery)).phase === 'training' ? true : undefined));
      await assert.rejects(run.executeUpdate(setBudgetUpdate, { args: [-1] }), WorkflowUpdateFailedError);
      await assert.rejects(run.executeUpdate(setDeadlineUpdate, { args: ['2001-01-01T00:00:00Z'] }), WorkflowUpdateFailedError);
      await assert.rejects(run.executeUpdate(setDeadlineUpdate, { args: ['next tuesday'] }), WorkflowUpdateFailedError);
      const raised = await run.executeUpdate(setBudgetUpdate, { args: [25] });
      assert.equal(raised.budgetUsd, 25);
      const deadline = new Date(Date.now() + 3600_000).toISOString();
      assert.equal((await run.executeUpdate(setDeadlineUpdate, { args: [deadline] })).deadline, deadline);
      // Lowering the budget below what is spent is refused; to exactly zero headroom stops the run.
      await run.cancel();
      await run.result().catch(() => undefined);
      assert.deepEqual(await provider.listRunResources(runKey(run.workflowId)), []);
    });
  });

  it('continues as new after many attempts, carrying its state, and still finishes', async function () {
    this.timeout(400_000);
    const provider = new ScriptedProvider([zones[0]]);
    for (let i = 1; i <= 55; i++) provider.script('us-central1-a', { kind: 'preempt', step: i, afterPolls: 1 });
    await withWorker(provider, async (start) => {
      const run = await start(spec({ recovery: { pollSeconds: 0.2, maxPreemptions: 100, zoneCooldown: 0.01 } }));
      const result = await run.result();
      assert.equal(result.status, 'completed');
      assert.equal(result.preemptions, 55);
      assert.equal(result.attempts.length, 56, 'attempts from before the continue-as-new are kept');
      assert.deepEqual(provider.resumedFrom().slice(49, 52), [49, 50, 51], 'the checkpoint crosses the continue-as-new');
      const env = await testEnv();
      const firstHandle = env.client.workflow.getHandle(run.workflowId, run.firstExecutionRunId);
      const first = await firstHandle.describe();
      assert.equal(first.status.name, 'CONTINUED_AS_NEW');
      if (process.env.STERNA_RECORD_HISTORIES) await saveHistory(join(process.env.STERNA_RECORD_HISTORIES, 'continue-as-new.binpb'), run.workflowId, run.firstExecutionRunId);
    });
  });

  it('fails with DeadlineMissed when the deadline passes, releasing the VM', async () => {
    const provider = new ScriptedProvider(zones, { kind: 'exit', code: 0, afterPolls: 1_000_000 });
    await withWorker(provider, async (start) => {
      const run = await start(spec({ time: { deadlineAfter: '3s' } }));
      const failure = await failureOf(run.result());
      assert.equal(failure.type, 'DeadlineMissed');
      assert.deepEqual(await provider.listRunResources(runKey(run.workflowId)), []);
    });
  });
});
