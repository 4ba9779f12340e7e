import { strict as assert } from 'node:assert';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { Worker } from '@temporalio/worker';
import {
  cancel,
  causeChain,
  causeMessages,
  ClientErrorKind,
  connectFromEnvironment,
  getStatus,
  listRuns,
  result,
  setBudget,
  setDeadline,
  sizeAwareRetry,
  startTrainingRun,
  SternaClientError,
  UpdateRejectedError,
  type InvalidSpecError,
} from '../../client';
import { explain } from '../../client/errors';
import type { RunSpecInput } from '../../workflows/spec';
import type { TrainingRunWorkflow } from '../../workflows/messages';
import type { TeamLedgerWorkflow } from '../../workflows/teams/contract';
import type { teamLedger } from '../../workflows/teams/workflow';
import type { trainingRun } from '../../workflows/run/training-run';
import { eventually } from '../helpers/processes';
import { ScriptedProvider } from '../helpers/scripted-provider';
import { freePort, sternaTestWorker, testEnv, testServerAddress, uniqueTaskQueue } from '../helpers/temporal';

/**
 * The workflows as the client sees them are plain types (so the client package carries no
 * workflow code); the build fails here if a workflow stops fitting its client's type.
 */
type Fits<Workflow extends Contract, Contract> = Workflow;
export type ClientWorkflowTypes = [Fits<typeof trainingRun, TrainingRunWorkflow>, Fits<typeof teamLedger, TeamLedgerWorkflow>];

/** A run that trains until cancelled, spending $36 an hour ($0.01 a second) of spot time. */
const spec = (overrides: Partial<RunSpecInput> = {}): RunSpecInput => ({
  command: ['python', 'train.py'],
  checkpoint: { uri: 'gs://ckpt/run' },
  resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
  pricing: { mode: 'spot' },
  recovery: { pollSeconds: 0.2 },
  ...overrides,
});
const zones = [{ zone: 'us-central1-a', spot: 36, onDemand: 72 }];

/** The error a call rejects with, which must be a SternaClientError. */
async function failureOf(call: Promise<unknown>): Promise<SternaClientError> {
  const err = await call.then(
    () => assert.fail('expected the call to fail'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof SternaClientError, `not a SternaClientError: ${String(err)}`);
  return err;
}

describe('the cause chain', () => {
  it('lists each cause once, gRPC errors by their details, and stops at a cycle', () => {
    const grpc = Object.assign(new Error('8 RESOURCE_EXHAUSTED: grpc: received message larger than max (5 vs. 4)'), { code: 8, details: 'grpc: received message larger than max (5 vs. 4)' });
    const outer = new Error('Failed to start Workflow', { cause: grpc });
    assert.deepEqual(causeChain(outer), [outer, grpc]);
    assert.deepEqual(causeMessages(outer), ['Failed to start Workflow', 'grpc: received message larger than max (5 vs. 4)']);

    const rejection = ApplicationFailure.create({ type: 'InvalidSpec', message: 'budget must be a positive number of USD, got -1' });
    const loop = new Error('Workflow Update failed', { cause: rejection });
    Object.assign(rejection, { cause: loop });
    assert.deepEqual(causeMessages(loop), ['Workflow Update failed', 'budget must be a positive number of USD, got -1']);
    assert.deepEqual(causeMessages(new Error('connect ECONNREFUSED 127.0.0.1:1', { cause: new Error('ECONNREFUSED') })), ['connect ECONNREFUSED 127.0.0.1:1']);
  });
});

describe('the client says why a call failed', function () {
  this.timeout(120_000);
  const provider = new ScriptedProvider(zones, { kind: 'exit', code: 0, afterPolls: 1_000_000 });
  let taskQueue: string;
  let worker: Worker;
  let running: Promise<void>;
  const started: string[] = [];

  before(async () => {
    taskQueue = uniqueTaskQueue('client');
    worker = await sternaTestWorker(taskQueue, { gce: provider });
    running = worker.run();
  });
  after(async () => {
    const { client } = await testEnv();
    await Promise.all(started.map((id) => client.workflow.getHandle(id).terminate('test over').catch(() => undefined)));
    worker?.shutdown();
    await running;
  });

  async function startRun(s: RunSpecInput = spec(), queue = taskQueue): Promise<string> {
    const workflowId = `${queue}-${started.length + 1}`;
    started.push(workflowId);
    await startTrainingRun((await testEnv()).client, s, { workflowId, taskQueue: queue });
    return workflowId;
  }

  it('starts a run as its namespace\'s: its SternaTeam and fairness key are the namespace, not its labels.team', async () => {
    const { client, namespace } = await testEnv();
    const workflowId = await startRun(spec({ labels: { team: 'vision' } }));
    const handle = client.workflow.getHandle(workflowId);
    assert.deepEqual((await handle.describe()).searchAttributes.SternaTeam, [namespace]);
    const started = (await handle.fetchHistory()).events?.[0]?.workflowExecutionStartedEventAttributes;
    assert.equal(started?.priority?.fairnessKey, namespace);
  });

  it('a multi-megabyte spec: InvalidSpec naming the field, at once, and no run started', async () => {
    const { client } = await testEnv();
    const workflowId = `${taskQueue}-big`;
    const err = await failureOf(startTrainingRun(client, spec({ env: { BIG: 'x'.repeat(3 * 1024 * 1024) } }), { workflowId, taskQueue }));
    assert.equal(err.kind, ClientErrorKind.InvalidSpec);
    assert.deepEqual((err as InvalidSpecError).problems.map((p) => p.path), ['env']);
    await assert.rejects(client.workflow.getHandle(workflowId).describe(), WorkflowNotFoundError);
  });

  it('a Temporal Client built without Sterna\'s codec: PayloadEncryption for every call, and no run started', async () => {
    const { client: encrypting, namespace } = await testEnv();
    const plain = new Client({ connection: encrypting.connection, namespace });
    const workflowId = `${taskQueue}-unencrypted`;
    for (const call of [startTrainingRun(plain, spec(), { workflowId, taskQueue }), getStatus(plain, workflowId), listRuns(plain)]) {
      const err = await failureOf(call);
      assert.equal(err.kind, ClientErrorKind.PayloadEncryption);
      assert.match(err.hint, /sternaDataConverter\(\)/);
    }
    await assert.rejects(encrypting.workflow.getHandle(workflowId).describe(), WorkflowNotFoundError);
  });

  it('a request over the server size limit (any call, not only specs): RequestTooLarge with the server words, at once', async () => {
    const client = new Client({ connection: await Connection.connect({ address: await testServerAddress(), interceptors: [sizeAwareRetry()] }) });
    try {
      for (const [megabytes, serverWords] of [
        [3, /Blob data size exceeds limit/],
        [5, /received message larger than max/],
      ] as const) {
        const workflowId = `${taskQueue}-raw-${megabytes}`;
        const payload = 'x'.repeat(megabytes * 1024 * 1024);
        const t0 = Date.now();
        const raw = await client.workflow.start('trainingRun', { workflowId, taskQueue, args: [payload as never] }).catch((e: unknown) => e);
        const err = await explain(client, raw, { operation: 'start', workflowId, requestBytes: payload.length });
        assert.ok(Date.now() - t0 < 10_000, `refused after ${Date.now() - t0} ms: a size the server refuses is not retried`);
        assert.ok(err instanceof SternaClientError, String(err));
        assert.equal(err.kind, ClientErrorKind.RequestTooLarge);
        assert.match(err.message, serverWords);
        assert.match(err.message, new RegExp(`${megabytes}\\.\\d MB`));
        await assert.rejects(client.workflow.getHandle(workflowId).describe(), WorkflowNotFoundError);
      }
    } finally {
      await client.connection.close();
    }
  });

  it('a budget the run has already spent past: UpdateRejected with the validator reason', async () => {
    const { client } = await testEnv();
    const id = await startRun();
    await eventually('the run to train', async () => ((await getStatus(client, id)).phase === 'training' ? true : undefined));
    // The status query's cost stands still between workflow tasks; the validator's is up to the update.
    await new Promise((r) => setTimeout(r, 1500));
    const err = await failureOf(setBudget(client, id, 0.001));
    assert.ok(err instanceof UpdateRejectedError);
    assert.equal(err.kind, ClientErrorKind.UpdateRejected);
    assert.equal(err.failureType, 'InvalidSpec');
    assert.match(err.reason, /budget \$0\.001 is below the \$\d+\.\d+ already spent/);
    assert.equal((await setBudget(client, id, 500)).budgetUsd, 500, 'a good budget still goes through');
  });

  it('a deadline in the past: UpdateRejected with the validator reason', async () => {
    const { client } = await testEnv();
    const id = await startRun();
    const err = await failureOf(setDeadline(client, id, '2001-01-01T00:00:00Z'));
    assert.ok(err instanceof UpdateRejectedError);
    assert.match(err.reason, /deadline 2001-01-01T00:00:00Z is not in the future/);
  });

  it('a malformed budget or deadline is refused before anything is sent', async () => {
    const { client } = await testEnv();
    // No such run: had the call reached Temporal it would have said RunNotFound.
    for (const call of [() => setBudget(client, 'no-such-run', -1), () => setBudget(client, 'no-such-run', NaN), () => setDeadline(client, 'no-such-run', 'tomorrow')]) {
      const err = await failureOf(call());
      assert.equal(err.kind, ClientErrorKind.InvalidArgument);
    }
  });

  it('an unknown run id: RunNotFound naming the id and the namespace, for every call', async () => {
    const { client } = await testEnv();
    for (const call of [() => getStatus(client, 'no-such-run'), () => setBudget(client, 'no-such-run', 5), () => cancel(client, 'no-such-run'), () => result(client, 'no-such-run')]) {
      const err = await failureOf(call());
      assert.equal(err.kind, ClientErrorKind.RunNotFound);
      assert.equal(err.workflowId, 'no-such-run');
      assert.match(err.message, /no run named no-such-run in namespace default/);
    }
  });

  it('a run id in use: RunAlreadyExists', async () => {
    const { client } = await testEnv();
    const id = await startRun();
    const err = await failureOf(startTrainingRun(client, spec(), { workflowId: id, taskQueue }));
    assert.equal(err.kind, ClientErrorKind.RunAlreadyExists);
  });

  it('a cancelled run: result is RunFailed, and a second cancel or an update is RunFinished', async () => {
    const { client } = await testEnv();
    const id = await startRun();
    await cancel(client, id);
    const failed = await failureOf(result(client, id));
    assert.equal(failed.kind, ClientErrorKind.RunFailed);
    assert.match(failed.message, /cancel/i);
    assert.equal((await failureOf(cancel(client, id))).kind, ClientErrorKind.RunFinished);
    assert.equal((await failureOf(setBudget(client, id, 5))).kind, ClientErrorKind.RunFinished);
  });

  it('no worker on the run task queue: NoWorker naming the task queue', async () => {
    const { client } = await testEnv();
    const idle = uniqueTaskQueue('client-idle');
    const id = await startRun(spec(), idle);
    for (const call of [() => getStatus(client, id, { timeoutMs: 1000 }), () => setBudget(client, id, 5, { timeoutMs: 1000 })]) {
      const err = await failureOf(call());
      assert.equal(err.kind, ClientErrorKind.NoWorker, err.message);
      assert.match(err.message, /in time/);
      assert.ok(err.hint.includes(`STERNA_TASK_QUEUE=${idle}`), err.hint);
    }
  });

  it('a visibility query the server cannot parse: InvalidArgument with the server words', async () => {
    const err = await failureOf(listRuns((await testEnv()).client, 'NoSuchAttribute = "x"'));
    assert.equal(err.kind, ClientErrorKind.InvalidArgument);
    assert.match(err.message, /NoSuchAttribute/);
  });

  it('no server at TEMPORAL_ADDRESS: ServerUnreachable with the socket error, at once', async () => {
    const address = `127.0.0.1:${await freePort()}`;
    const saved = process.env.TEMPORAL_ADDRESS;
    process.env.TEMPORAL_ADDRESS = address;
    const t0 = Date.now();
    try {
      const err = await failureOf(connectFromEnvironment());
      assert.equal(err.kind, ClientErrorKind.ServerUnreachable);
      assert.equal((err.cause as NodeJS.ErrnoException).code, 'ECONNREFUSED');
      assert.match(err.message, new RegExp(`at ${address}`));
      assert.match(err.hint, /npm run server/);
      assert.ok(Date.now() - t0 < 5000, 'without waiting for the gRPC connect deadline');
    } finally {
      if (saved === undefined) delete process.env.TEMPORAL_ADDRESS;
      else process.env.TEMPORAL_ADDRESS = saved;
    }
  });

  it('connects to the address and namespace it is given, over the environment\'s', async () => {
    const saved = { address: process.env.TEMPORAL_ADDRESS, namespace: process.env.TEMPORAL_NAMESPACE };
    // Where the environment points, nothing answers: a refused port, a namespace that does not exist.
    process.env.TEMPORAL_ADDRESS = `127.0.0.1:${await freePort()}`;
    process.env.TEMPORAL_NAMESPACE = 'no-such-namespace';
    try {
      const client = await connectFromEnvironment({ address: await testServerAddress(), namespace: (await testEnv()).namespace });
      assert.ok(Array.isArray(await listRuns(client)));
      await client.connection.close();
    } finally {
      for (const [name, value] of [['TEMPORAL_ADDRESS', saved.address], ['TEMPORAL_NAMESPACE', saved.namespace]] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('connects from TEMPORAL_ADDRESS when a server is there', async () => {
    const saved = process.env.TEMPORAL_ADDRESS;
    process.env.TEMPORAL_ADDRESS = await testServerAddress();
    try {
      const client = await connectFromEnvironment();
      assert.ok(Array.isArray(await listRuns(client)));
      await client.connection.close();
    } finally {
      if (saved === undefined) delete process.env.TEMPORAL_ADDRESS;
      else process.env.TEMPORAL_ADDRESS = saved;
    }
  });
});
