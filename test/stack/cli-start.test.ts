import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { findTemporalCli } from '../../processes/temporal-cli';
import { runKey } from '../../workflows/naming';
import type { RunResult } from '../../workflows/run/views';
import { startStack, type Stack } from '../helpers/stack';
import { testServerAddress } from '../helpers/temporal';

const run = promisify(execFile);
const repoRoot = join(__dirname, '..', '..', '..');

describe('starting a run with the Temporal CLI', function () {
  this.timeout(180_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ taskQueue: 'sterna' });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  it('runs examples/run.json from the README line `temporal workflow start ... --input-file examples/run.json`', async () => {
    const temporal = await findTemporalCli();
    assert.ok(temporal, 'the Temporal CLI is installed by the setup step');
    const workflowId = `cli-${Date.now().toString(36)}`;
    // The README's line, verbatim, plus the workflow id so the test can find the run.
    const line = 'temporal workflow start --type trainingRun --task-queue sterna --input-file examples/run.json';
    const [, ...args] = line.split(' ');
    const env = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress() };
    await run(temporal!, [...args, '--workflow-id', workflowId], { cwd: repoRoot, env });
    const result = (await stack.env.client.workflow.getHandle(workflowId).result()) as RunResult;
    assert.equal(result.status, 'completed');
    assert.deepEqual(await stack.provider.listRunResources(runKey(workflowId)), []);
  });
});
