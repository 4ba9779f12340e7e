/**
 * Setup on GKE (issue 38): the pod already runs in the spec's image, so the agent runs
 * setup in it, as on a VM without an image: its own phase, its lines in the run's log
 * (setup-out / setup-err), before the command, in the same working directory.
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runLogs } from '../client/logs';
import type { RunSpecInput } from '../workflows/spec';
import type { trainingRun } from '../workflows/training-run';
import { collect, lines } from './helpers/logs';
import { startKubeStack, type KubeStack } from './helpers/kube';
import { testEnv } from './helpers/temporal';

const repoRoot = join(__dirname, '..', '..');

describe('setup on GKE (a real Kubernetes control plane)', function () {
  this.timeout(600_000);
  let stack: KubeStack;

  before(async function () {
    this.timeout(1_800_000); // the first run on a machine builds Kubernetes from source
    stack = await startKubeStack();
  });
  after(async () => stack?.stop());

  it('runs setup in the pod before the command, with its lines in the run\'s log', async () => {
    const example = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
    const spec: RunSpecInput = {
      ...example,
      backend: 'gke',
      env: { GREETING: 'hello' },
      setup: ['echo "setup says $GREETING on attempt $STERNA_ATTEMPT"', 'echo prepared > prepared.txt; echo "to stderr" >&2'],
      command: ['bash', '-c', 'cat prepared.txt; echo trained'],
      datasets: [],
      resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
      recovery: { ...example.recovery, pollSeconds: 0.3 },
    };
    const env = await testEnv();
    const run = await env.client.workflow.start<typeof trainingRun>('trainingRun', { taskQueue: stack.taskQueue, workflowId: `${stack.taskQueue}-setup`, args: [spec] });
    const result = await run.result();
    assert.deepEqual(result.attempts.map((a) => a.outcome), ['completed']);
    const logged = lines(await collect(runLogs(env.client, run.workflowId, { storage: { localBucketsDir: stack.bucketsDir } })));
    const of = (stream: string) => logged.filter((l) => l.stream === stream).map((l) => l.text);
    assert.deepEqual(of('setup-out'), ['setup says hello on attempt 1']);
    assert.deepEqual(of('setup-err'), ['to stderr']);
    assert.deepEqual(of('out'), ['prepared', 'trained']);
    const firstOut = logged.findIndex((l) => l.stream === 'out');
    assert.ok(logged.slice(firstOut).every((l) => !l.stream.startsWith('setup-')), 'setup\'s lines come before the command\'s');
  });
});
