/**
 * Fractions of a GPU on GKE against a real kube-apiserver: node pools that advertise MIG
 * partitions and time-shared GPUs as GKE's device plugin does (labels, and one
 * nvidia.com/gpu per partition or share), offers priced as the slice's share of the
 * node's GPU price, and runs that train on a slice and cost that share.
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pricePerHour } from '../../config/catalog';
import type { FakeNode } from '../../kube/node-agent';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunSpecInput } from '../../workflows/spec';
import type { trainingRun } from '../../workflows/run/training-run';
import { eventually } from '../helpers/processes';
import { startKubeStack, type KubeStack } from '../helpers/kube';
import { testEnv } from '../helpers/temporal';
import { timelineLines } from '../helpers/runs';

const repoRoot = join(__dirname, '..', '..', '..');

/** A spot A100 80GB node partitioned into seven 1g.10gb slices, and a spot L4 shared by four pods. */
const MIG_NODE: FakeNode = { name: 'mig-a100-b', zone: 'us-central1-b', accelerator: 'nvidia-a100-80gb', gpus: 1, spot: true, machineType: 'a2-ultragpu-1g', partition: '1g.10gb' };
const SHARED_NODE: FakeNode = { name: 'shared-l4-c', zone: 'us-central1-c', accelerator: 'nvidia-l4', gpus: 1, spot: true, machineType: 'g2-standard-8', maxSharedClients: 4 };

const round6 = (usd: number) => Math.round(usd * 1e6) / 1e6;
const nodePrice = (node: FakeNode) => pricePerHour({ region: 'us-central1', machineType: node.machineType!, accelerator: node.accelerator, count: node.gpus, spot: node.spot })!;

function sliceSpec(accelerator: Record<string, unknown>): RunSpecInput {
  const spec = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
  return { ...spec, backend: 'gke', resources: { accelerators: [accelerator as RunSpecInput['resources']['accelerators'][number]] }, recovery: { ...spec.recovery, pollSeconds: 0.3 } };
}

describe('GPU slices on GKE: MIG partitions and time-shared GPUs (a real Kubernetes control plane)', function () {
  this.timeout(600_000);
  let stack: KubeStack;
  let counter = 0;

  before(async function () {
    this.timeout(1_800_000); // the first run on a machine builds Kubernetes from source
    stack = await startKubeStack();
    await stack.agent.addNode(MIG_NODE);
    await stack.agent.addNode(SHARED_NODE);
  });
  after(async () => stack?.stop());

  async function start(spec: RunSpecInput) {
    const env = await testEnv();
    counter++;
    return env.client.workflow.start<typeof trainingRun>('trainingRun', { taskQueue: stack.taskQueue, workflowId: `${stack.taskQueue}-${counter}`, args: [spec] });
  }

  async function noneLeft(workflowId: string): Promise<void> {
    const selector = `sterna-run=${runKey(workflowId)}`;
    await eventually('no Jobs or Pods left', async () => {
      const jobs = (await stack.batch.listNamespacedJob({ namespace: 'default', labelSelector: selector })).items.length;
      const pods = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: selector })).items.length;
      return jobs + pods === 0 ? true : undefined;
    }, 60_000, 500);
  }

  it('the nodes advertise each partition and each share as one nvidia.com/gpu, with GKE\'s labels', async () => {
    const mig = await stack.core.readNode({ name: MIG_NODE.name });
    assert.equal(mig.status?.allocatable?.['nvidia.com/gpu'], '7');
    assert.equal(mig.metadata?.labels?.['cloud.google.com/gke-gpu-partition-size'], '1g.10gb');
    const shared = await stack.core.readNode({ name: SHARED_NODE.name });
    assert.equal(shared.status?.allocatable?.['nvidia.com/gpu'], '4');
    assert.equal(shared.metadata?.labels?.['cloud.google.com/gke-gpu-sharing-strategy'], 'time-sharing');
    assert.equal(shared.metadata?.labels?.['cloud.google.com/gke-max-shared-clients-per-gpu'], '4');
  });

  it('offers a slice only from the pools that have it, priced as its share of the node\'s GPU', async () => {
    const [mig, ...moreMig] = await stack.provider.findOffers({ accelerators: [{ type: 'nvidia-a100-80gb', count: 1, partition: '1g.10gb' }], provisioningModels: ['SPOT', 'STANDARD'] });
    assert.equal(moreMig.length, 0);
    assert.deepEqual([mig.zone, mig.partition, mig.machineType], ['us-central1-b', '1g.10gb', 'a2-ultragpu-1g']);
    assert.equal(mig.pricePerHour, round6(nodePrice(MIG_NODE) / 7), 'one compute slice of seven');
    assert.deepEqual(await stack.provider.findOffers({ accelerators: [{ type: 'nvidia-a100-80gb', count: 1 }], provisioningModels: ['SPOT', 'STANDARD'] }), [], 'a partitioned GPU is not a whole one');

    const shared = await stack.provider.findOffers({ accelerators: [{ type: 'nvidia-l4', count: 1, sharing: 'time-sharing' }], provisioningModels: ['SPOT'] });
    assert.deepEqual(shared.map((o) => [o.zone, o.maxSharedClients, o.pricePerHour]), [['us-central1-c', 4, round6(nodePrice(SHARED_NODE) / 4)]]);
    const other = await stack.provider.findOffers({ accelerators: [{ type: 'nvidia-l4', count: 1, sharing: 'time-sharing', maxSharedClients: 2 }], provisioningModels: ['SPOT'] });
    assert.deepEqual(other, [], 'only pools shared by exactly the clients asked for');

    // Whole L4s in zone c still come from the whole node, at the whole price.
    const whole = (await stack.provider.findOffers({ accelerators: [{ type: 'nvidia-l4', count: 1 }], provisioningModels: ['SPOT'], zones: { allow: ['us-central1-c'] } }))[0];
    assert.equal(whole.maxSharedClients, undefined);
    assert.equal(whole.pricePerHour, nodePrice(SHARED_NODE));
  });

  it('runs a job on a MIG slice, on the partitioned node, and it costs the slice\'s share', async () => {
    const run = await start(sliceSpec({ type: 'nvidia-a100-80gb', count: 1, partition: '1g.10gb' }));
    const node = await eventually('the pod bound', async () => {
      const [pod] = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: `sterna-run=${runKey(run.workflowId)}` })).items;
      return pod?.spec?.nodeName;
    }, 120_000);
    assert.equal(node, MIG_NODE.name);
    const result = await run.result();
    assert.equal(result.status, 'completed');
    assert.equal(result.attempts.length, 1);
    const [attempt] = result.attempts;
    // Seen once in CI at 0 s, not reproduced: the attempt and its timeline say which end was missing.
    assert.ok(attempt.runningSeconds > 0, `${JSON.stringify(attempt)}\n${timelineLines((await run.query(statusQuery)).timeline)}`);
    const slicePrice = round6(nodePrice(MIG_NODE) / 7);
    assert.ok(Math.abs(attempt.costUsd - (slicePrice * attempt.runningSeconds) / 3600) < 1e-9, `cost ${attempt.costUsd} is 1/7 of the node's price for ${attempt.runningSeconds} s`);
    const { ledger } = await run.query(statusQuery);
    assert.equal(ledger[0].accelerator, 'nvidia-a100-80gb x1 (MIG 1g.10gb)');
    assert.equal(ledger[0].pricePerHour, slicePrice);
    await noneLeft(run.workflowId);
  });

  it('runs two jobs at once on one time-shared GPU, each paying a quarter of it', async () => {
    const spec = sliceSpec({ type: 'nvidia-l4', count: 1, sharing: 'time-sharing', maxSharedClients: 4 });
    const runs = [await start(spec), await start(spec)];
    // Both pods bound to the one shared GPU at the same time.
    await eventually('both pods running on the shared node', async () => {
      const pods = (await stack.core.listNamespacedPod({ namespace: 'default', fieldSelector: `spec.nodeName=${SHARED_NODE.name}` })).items;
      return pods.filter((p) => p.status?.phase === 'Running').length === 2 ? true : undefined;
    }, 120_000, 200);
    const sharePrice = round6(nodePrice(SHARED_NODE) / 4);
    for (const run of runs) {
      const result = await run.result();
      assert.equal(result.status, 'completed');
      assert.deepEqual(result.attempts.map((a) => a.zone), ['us-central1-c']);
      const [attempt] = result.attempts;
      assert.ok(Math.abs(attempt.costUsd - (sharePrice * attempt.runningSeconds) / 3600) < 1e-9, `cost ${attempt.costUsd} is 1/4 of the node's price`);
      await noneLeft(run.workflowId);
    }
  });
});
