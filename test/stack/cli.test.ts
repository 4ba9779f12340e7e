import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { RunStatus } from '../../workflows/run/views';
import type { RunSpecInput } from '../../workflows/spec';
import { statusQuery } from '../../workflows/messages';
import { eventually } from '../helpers/processes';
import { ScriptedProvider } from '../helpers/scripted-provider';
import { freePort, sternaTestWorker, testEnv, testServerAddress, uniqueTaskQueue } from '../helpers/temporal';

const cli = join(__dirname, '..', '..', 'cli', 'main.js');

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `sterna ...args` as a user would, against the test server unless `env` says otherwise. */
async function sterna(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Outcome> {
  const { namespace } = await testEnv();
  const base = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: namespace };
  return new Promise((resolve) =>
    execFile(process.execPath, [cli, ...args], { env: { ...base, ...env }, timeout: 90_000, maxBuffer: 1 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr }),
    ),
  );
}

function expectFailure(outcome: Outcome, code: number, ...inStderr: RegExp[]): void {
  assert.equal(outcome.code, code, `exit code; stderr:\n${outcome.stderr}`);
  for (const pattern of inStderr) assert.match(outcome.stderr, pattern);
}

/** A run that trains until cancelled, spending $36 an hour of spot time. */
const spec = (overrides: Partial<RunSpecInput> = {}): RunSpecInput => ({
  command: ['python', 'train.py'],
  checkpoint: { uri: 'gs://ckpt/run' },
  resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
  pricing: { mode: 'spot' },
  recovery: { pollSeconds: 0.2 },
  ...overrides,
});

describe('the sterna CLI says why a command failed and how to fix it', function () {
  this.timeout(180_000);
  const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 36, onDemand: 72 }], { kind: 'exit', code: 0, afterPolls: 1_000_000 });
  let dir: string;
  let taskQueue: string;
  let worker: Worker;
  let running: Promise<void>;
  const started: string[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sterna-cli-'));
    taskQueue = uniqueTaskQueue('cli');
    worker = await sternaTestWorker(taskQueue, { gce: provider });
    running = worker.run();
  });
  after(async () => {
    const { client } = await testEnv();
    await Promise.all(started.map((id) => client.workflow.getHandle(id).terminate('test over').catch(() => undefined)));
    worker?.shutdown();
    await running;
    rmSync(dir, { recursive: true, force: true });
  });

  function specFile(name: string, s: RunSpecInput): string {
    const path = join(dir, `${name}.json`);
    writeFileSync(path, JSON.stringify(s));
    return path;
  }

  /** `sterna start` on the test worker's task queue; returns the run id. */
  async function startRun(queue = taskQueue, s = spec()): Promise<string> {
    const id = `${queue}-${started.length + 1}`;
    started.push(id);
    const outcome = await sterna(['start', specFile(id, s), '--id', id, '--task-queue', queue]);
    assert.equal(outcome.code, 0, outcome.stderr);
    assert.equal(outcome.stdout.trim(), `started ${id}`);
    return id;
  }

  async function statusOf(id: string): Promise<RunStatus> {
    return (await testEnv()).client.workflow.getHandle(id).query(statusQuery);
  }

  it('start: a multi-megabyte spec exits 2 naming the field and its limit, before anything reaches the server', async () => {
    const id = `${taskQueue}-big`;
    const outcome = await sterna(['start', specFile('big', spec({ env: { BIG: 'x'.repeat(5 * 1024 * 1024) } })), '--id', id, '--task-queue', taskQueue]);
    expectFailure(outcome, 2, /invalid run spec: env: env takes \d+ bytes as sent to the VM, more than the 98304 allowed/, /stage it with datasets/);
    assert.doesNotMatch(outcome.stderr, /^sterna start: Failed to start Workflow$/m);
    await assert.rejects((await testEnv()).client.workflow.getHandle(id).describe(), WorkflowNotFoundError);
  });

  it('start: an unreadable or invalid spec exits 2 naming the file or the field', async () => {
    expectFailure(await sterna(['start', join(dir, 'missing.json')]), 2, /cannot read run spec .*missing\.json: ENOENT/);
    const bad = specFile('bad', spec({ resources: { accelerators: [] } }));
    expectFailure(await sterna(['start', bad]), 2, /resources\.accelerators/, /to fix: .*sterna validate/);
    expectFailure(await sterna(['validate', bad]), 2, /resources\.accelerators/);
  });

  it('validate and start: a deadline already past is an error, and nothing is started', async () => {
    const id = `${taskQueue}-late`;
    const late = specFile('late', spec({ time: { deadline: new Date(Date.now() - 3_600_000).toISOString() } }));
    expectFailure(await sterna(['validate', late]), 2, /time\.deadline/);
    expectFailure(await sterna(['start', late, '--id', id, '--task-queue', taskQueue]), 2, /time\.deadline/);
    await assert.rejects((await testEnv()).client.workflow.getHandle(id).describe(), WorkflowNotFoundError);
  });

  it('start: an id in use exits 2 and says to choose another', async () => {
    const id = await startRun();
    expectFailure(await sterna(['start', specFile('again', spec()), '--id', id, '--task-queue', taskQueue]), 2, new RegExp(`a run named ${id} already exists`), /choose another --id/);
  });

  it('budget: a malformed amount exits 2 before Temporal is asked', async () => {
    const id = await startRun();
    await eventually('the run to train', async () => ((await statusOf(id)).phase === 'training' ? true : undefined));
    for (const amount of ['-1', 'abc', '0', '']) {
      expectFailure(await sterna(['budget', id, amount]), 2, /invalid for argument 'usd'\. a budget is a positive number of USD/);
    }
    assert.ok(!(await statusOf(id)).timeline.some((e) => e.kind === 'limit-changed'), 'no update reached the run');
  });

  it('budget: the run validator reason, exit 2, when the budget is below what is spent; a good budget prints the status', async () => {
    const id = await startRun();
    await eventually('the run to train', async () => ((await statusOf(id)).phase === 'training' ? true : undefined));
    await new Promise((r) => setTimeout(r, 1500));
    expectFailure(await sterna(['budget', id, '0.001']), 2, new RegExp(`run ${id} refused setBudget: budget \\$0\\.001 is below the \\$\\d+\\.\\d+ already spent`), /to fix: .*sterna status/);
    const ok = await sterna(['budget', id, '500']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /^training/);
    assert.equal((await statusOf(id)).budgetUsd, 500);
  });

  it('deadline: a malformed time exits 2 locally; a past one exits 2 with the validator reason', async () => {
    const id = await startRun();
    expectFailure(await sterna(['deadline', id, 'tomorrow']), 2, /a deadline is an ISO 8601 time/);
    expectFailure(await sterna(['deadline', id, '2001-01-01T00:00:00Z']), 2, /deadline 2001-01-01T00:00:00Z is not in the future/);
  });

  it('status, budget, cancel, follow: an unknown run exits 2 with "no run named"', async () => {
    for (const args of [['status', 'no-such-run'], ['budget', 'no-such-run', '5'], ['cancel', 'no-such-run'], ['follow', 'no-such-run']]) {
      expectFailure(await sterna(args), 2, /no run named no-such-run in namespace/, /to fix: `sterna list`/);
    }
  });

  it('cancel: cancels a run once; again exits 1 saying it has ended', async () => {
    const id = await startRun();
    const first = await sterna(['cancel', id]);
    assert.equal(first.code, 0, first.stderr);
    const { client } = await testEnv();
    await eventually('the run to end', async () => ((await client.workflow.getHandle(id).describe()).status.name === 'CANCELLED' ? true : undefined));
    expectFailure(await sterna(['cancel', id]), 1, new RegExp(`run ${id} has already ended \\(CANCELLED\\)`));
    expectFailure(await sterna(['budget', id, '5']), 1, new RegExp(`run ${id} has already ended`));
  });

  it('follow: a run that fails exits 1 with the run failure reason', async () => {
    provider.script('us-central1-a', { kind: 'exit', code: 3, afterPolls: 1 });
    const id = await startRun(taskQueue, spec({ recovery: { pollSeconds: 0.2, maxRestartsOnError: 0 } }));
    expectFailure(await sterna(['follow', id]), 1, new RegExp(`run ${id} did not complete: .*training failed with .*3`), new RegExp(`to fix: \`sterna status ${id}\``));
  });

  it('status: no worker on the run task queue exits 1 naming the queue to serve', async () => {
    const idle = uniqueTaskQueue('cli-idle');
    const id = await startRun(idle);
    expectFailure(await sterna(['--timeout', '1', 'status', id]), 1, /no worker answered status for run \S+ in time \((Deadline exceeded after|Call cancelled|query timed out before a worker could process it)/, new RegExp(`STERNA_TASK_QUEUE=${idle}`));
    expectFailure(await sterna(['budget', id, '5', '--timeout', '1']), 1, /no worker answered setBudget/);
  });

  it('list: a bad visibility query exits 2 with the server words', async () => {
    expectFailure(await sterna(['list', '--query', 'NoSuchAttribute = "x"']), 2, /NoSuchAttribute/);
  });

  it('no server at TEMPORAL_ADDRESS: exits 1 with the refused connection, how to start a server and TEMPORAL_ADDRESS', async () => {
    const address = `127.0.0.1:${await freePort()}`;
    const outcome = await sterna(['status', 'any-run'], { TEMPORAL_ADDRESS: address });
    expectFailure(outcome, 1, new RegExp(`cannot reach a Temporal server at ${address}: connect ECONNREFUSED`), /npm run server/, /TEMPORAL_ADDRESS/);
  });

  it('usage errors exit 2; --help exits 0', async () => {
    expectFailure(await sterna(['budget', 'some-run']), 2, /missing required argument 'usd'/);
    expectFailure(await sterna(['no-such-command']), 2, /unknown command/);
    expectFailure(await sterna(['--timeout', 'soon', 'list']), 2, /a positive number of seconds/);
    assert.equal((await sterna(['--help'])).code, 0);
  });
});
