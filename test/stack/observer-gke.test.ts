/**
 * The fleet observer on GKE (a real Kubernetes control plane): everything it tells runs
 * comes from the provider's one pod watch, with no API request per pod.
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { observerOptions, startObserver } from '../../activities/fleet';
import type { ResourceObservation } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunSpecInput } from '../../workflows/spec';
import { eventually } from '../helpers/processes';
import { NODES, startKubeStack, type KubeStack } from '../helpers/kube';
import { testEnv } from '../helpers/temporal';
import { allEvents, payloadValue } from '../helpers/histories';

const repoRoot = join(__dirname, '..', '..', '..');

function gkeSpec(steps: number, pollSeconds: number): RunSpecInput {
  const spec = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
  return {
    ...spec,
    backend: 'gke',
    command: ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', String(steps), '--step-ms', '25'],
    resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
    recovery: { ...spec.recovery, pollSeconds },
  };
}

async function heard(client: Client, workflowId: string): Promise<ResourceObservation[]> {
  return Promise.all(
    (await allEvents(client, workflowId))
      .filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'observation')
      .map((e) => payloadValue<ResourceObservation>(e.workflowExecutionSignaledEventAttributes!.input!.payloads![0])),
  );
}

describe('fleet observer on GKE', function () {
  this.timeout(300_000);
  let stack: KubeStack;
  let client: Client;
  let observerId: string;
  let counter = 0;

  before(async function () {
    this.timeout(1_800_000); // the first run on a machine builds Kubernetes from source
    // A 1 s interval here: the worker's configuration bounds what its observer may do.
    const options = observerOptions({ settings: { intervalSeconds: 1 }, watchSeconds: 10 });
    stack = await startKubeStack({ observer: options });
    client = (await testEnv()).client;
    ({ workflowId: observerId } = await startObserver(client, { taskQueue: stack.taskQueue, backend: 'gke', scope: stack.provider.fleetScope(), options, requester: 'test' }));
  });
  after(async () => {
    await client?.workflow.getHandle(observerId).terminate('test over').catch(() => undefined);
    await stack?.stop();
  });

  async function start(spec: RunSpecInput) {
    counter++;
    return client.workflow.start('trainingRun', { taskQueue: stack.taskQueue, workflowId: `${stack.taskQueue}-observed-${counter}`, args: [spec] });
  }

  it('tells a run its checkpoints and its exit, from the pod watch', async () => {
    const run = await start(gkeSpec(800, 4));
    const result = await run.result();
    assert.equal(result.status, 'completed');
    const told = (await heard(client, run.workflowId)).map((o) => o.snapshot);
    const steps = told.map((s) => s.checkpoint?.step).filter((s): s is number => s !== undefined);
    assert.ok(new Set(steps).size >= 2, `checkpoints told: ${steps.join(', ')}`);
    const exit = told.find((s) => s.exitCode !== undefined);
    assert.ok(exit, `no exit among ${JSON.stringify(told)}`);
    assert.equal(exit.exitCode, 0);
    assert.equal(exit.checkpoint?.step, 800);
  });

  it('tells a run its pod was disrupted when the spot node shuts down', async () => {
    // The run's own poll is slower than the observer, as it will be once runs rely on it:
    // on this test bed a disrupted pod is gone within a second or two of its run's release.
    const run = await start(gkeSpec(4000, 4));
    const training = await eventually('training', async () => (await heard(client, run.workflowId)).find((o) => o.snapshot.phase === 'training'), 120_000, 250);
    const [pod] = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: `sterna-run=${runKey(run.workflowId)}` })).items;
    assert.equal(pod.metadata?.labels?.['job-name'], training.name);
    const node = pod.spec!.nodeName!;
    await stack.agent.shutdownNode(node);
    try {
      const notice = await eventually('the disruption', async () => (await heard(client, run.workflowId)).find((o) => o.name === training.name && o.snapshot.preempted), 60_000, 250);
      assert.deepEqual(notice.owner, training.owner);
      await run.cancel();
      await run.result().catch(() => undefined);
    } finally {
      await stack.agent.addNode(NODES.find((n) => n.name === node)!);
    }
  });
});
