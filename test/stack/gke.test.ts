import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { GkeProvider } from '../../activities/providers/gke';
import { pricePerHour } from '../../config/catalog';
import { catalogPriceBook } from '../../config/price-book';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunSpecInput } from '../../workflows/spec';
import { eventually } from '../helpers/processes';
import { startKubeStack, type KubeStack } from '../helpers/kube';
import { testEnv } from '../helpers/temporal';

const repoRoot = join(__dirname, '..', '..', '..');

function gkeSpec(overrides: Partial<RunSpecInput> = {}): RunSpecInput {
  const spec = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
  return {
    ...spec,
    backend: 'gke',
    resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
    recovery: { ...spec.recovery, pollSeconds: 0.3 },
    ...overrides,
  };
}

describe('trainingRun on GKE (a real Kubernetes control plane)', function () {
  this.timeout(600_000);
  let stack: KubeStack;
  let counter = 0;

  before(async function () {
    this.timeout(1_800_000); // the first run on a machine builds Kubernetes from source
    stack = await startKubeStack();
  });
  after(async () => stack?.stop());

  async function start(spec: RunSpecInput) {
    const env = await testEnv();
    counter++;
    return env.client.workflow.start('trainingRun', { taskQueue: stack.taskQueue, workflowId: `${stack.taskQueue}-${counter}`, args: [spec] });
  }

  async function leftovers(workflowId: string): Promise<{ jobs: number; pods: number }> {
    const selector = `sterna-run=${runKey(workflowId)}`;
    const jobs = (await stack.batch.listNamespacedJob({ namespace: 'default', labelSelector: selector })).items.length;
    const pods = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: selector })).items.length;
    return { jobs, pods };
  }

  async function noneLeft(workflowId: string): Promise<void> {
    await eventually('no Jobs or Pods left', async () => {
      const left = await leftovers(workflowId);
      return left.jobs === 0 && left.pods === 0 ? true : undefined;
    }, 60_000, 500);
  }

  it('generates a Job that the real API server accepts (server-side validation, dry run)', async () => {
    const [offer] = await stack.provider.findOffers({ accelerators: [{ type: 'nvidia-l4', count: 1 }], provisioningModels: ['SPOT'] });
    const job = stack.provider.jobManifest({
      name: 'st-validate-0000000-a1',
      offer,
      owner: { run: 'validate', execution: 'e1', attempt: 1 },
      labels: { 'sterna-run': 'validate', 'sterna-exec': 'e1', 'sterna-attempt': '1', team: 'ml' },
      diskSizeGb: 100,
      agent: { runId: 'validate', attempt: 1, argv: ['node', 'trainer.js'], env: {}, datasets: [], checkpointUri: 'gs://b/c', pollSeconds: 1 },
    });
    const created = await stack.batch.createNamespacedJob({ namespace: 'default', body: job, dryRun: 'All', fieldValidation: 'Strict' });
    assert.equal(created.spec?.backoffLimit, 0);
    assert.equal(created.spec?.template.spec?.restartPolicy, 'Never');
    assert.equal(created.spec?.template.spec?.nodeSelector?.['cloud.google.com/gke-spot'], 'true');
    assert.equal(created.spec?.template.spec?.containers[0].resources?.limits?.['nvidia.com/gpu'], '1');
    assert.deepEqual(created.spec?.podFailurePolicy?.rules[0].onPodConditions?.[0].type, 'DisruptionTarget');
  });

  it('offers the zones of the GPU node pools, spot and on-demand, priced from the catalog', async () => {
    const offers = await stack.provider.findOffers({ accelerators: [{ type: 'nvidia-l4', count: 1 }], provisioningModels: ['SPOT', 'STANDARD'] });
    const keys = offers.map((o) => `${o.zone}/${o.provisioningModel}`).sort();
    assert.deepEqual(keys, ['us-central1-a/SPOT', 'us-central1-b/SPOT', 'us-central1-c/SPOT', 'us-central1-f/STANDARD']);
    assert.ok(offers.every((o) => o.pricePerHour > 0 && o.pricePerHour <= o.onDemandPricePerHour));
    // Priced as the node's machine type when it is labelled, the catalog's shape when not.
    const spotA = offers.find((o) => o.zone === 'us-central1-a')!;
    assert.equal(spotA.machineType, 'g2-standard-8');
    assert.equal(spotA.pricePerHour, pricePerHour({ region: 'us-central1', machineType: 'g2-standard-8', accelerator: 'nvidia-l4', count: 1, spot: true }));
    assert.equal(offers.find((o) => o.zone === 'us-central1-f')!.machineType, 'g2-standard-4');
  });

  it('offers a declared node pool that has no node, and calls its unschedulable pod a stockout', async () => {
    const provider = new GkeProvider({
      kubeConfig: stack.kc,
      namespace: 'default',
      prices: catalogPriceBook(),
      pendingTimeoutSeconds: 2,
      pollIntervalMs: 200,
      nodePools: [{ name: 'spot-l4x4', zones: ['us-central1-d'], accelerator: 'nvidia-l4', gpusPerNode: 4, spot: true, machineType: 'g2-standard-48' }],
    });
    try {
      const offers = await provider.findOffers({ accelerators: [{ type: 'nvidia-l4', count: 1 }], provisioningModels: ['SPOT'], zones: { allow: ['us-central1-d'] } });
      assert.equal(offers.length, 1);
      const whole = pricePerHour({ region: 'us-central1', machineType: 'g2-standard-48', accelerator: 'nvidia-l4', count: 4, spot: true })!;
      assert.ok(Math.abs(offers[0].pricePerHour - whole / 4) < 1e-6, 'a pod pays for its quarter of a 4-GPU node');
      const name = 'st-zero-pool-0000000-a1';
      const err = await provider
        .provision(
          {
            name,
            offer: offers[0],
            owner: { run: 'zero-pool', execution: 'e1', attempt: 1 },
            labels: { 'sterna-run': 'zero-pool', 'sterna-exec': 'e1', 'sterna-attempt': '1' },
            diskSizeGb: 100,
            agent: { runId: 'zero-pool', attempt: 1, argv: ['true'], env: {}, datasets: [], checkpointUri: 'gs://b/c', pollSeconds: 1 },
          },
          () => undefined,
        )
        .catch((e: unknown) => e);
      assert.ok(err instanceof ApplicationFailure && err.type === 'Stockout', String(err));
      await eventually('the Job and its pod deleted', async () => {
        const jobs = (await stack.batch.listNamespacedJob({ namespace: 'default', labelSelector: 'sterna-run=zero-pool' })).items.length;
        const pods = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: 'sterna-run=zero-pool' })).items.length;
        return jobs + pods === 0 ? true : undefined;
      }, 30_000);
    } finally {
      provider.close();
    }
  });

  it('completes a run as a Job, and leaves no Job or Pod behind', async () => {
    const run = await start(gkeSpec());
    const result = await run.result();
    assert.equal(result.status, 'completed');
    assert.equal(result.finalStep, 400);
    await noneLeft(run.workflowId);
  });

  it('resumes in another zone from the checkpoint when the spot node is shut down', async () => {
    const run = await start(gkeSpec());
    await eventually('a checkpoint', async () => {
      const s = await run.query(statusQuery);
      return s.phase === 'training' && (s.lastCheckpoint?.step ?? 0) > 60 ? s : undefined;
    }, 120_000);
    const [pod] = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: `sterna-run=${runKey(run.workflowId)}` })).items;
    const node = pod.spec!.nodeName!;
    await stack.agent.shutdownNode(node);
    const result = await run.result();
    assert.equal(result.preemptions, 1);
    assert.equal(result.attempts[0].outcome, 'preempted');
    assert.notEqual(result.attempts[1].zone, result.attempts[0].zone);
    const { timeline } = await run.query(statusQuery);
    const resumed = timeline.find((e) => e.kind === 'preempted');
    assert.ok(resumed && resumed.step! > 0, 'resumed from a checkpoint, not from step 0');
    await noneLeft(run.workflowId);
    // Give the zone its node back for the next tests.
    const lost = (await import('../helpers/kube')).NODES.find((n) => n.name === node)!;
    await stack.agent.addNode(lost);
  });

  it('moves to the next zone when its pod cannot be scheduled in the first', async () => {
    const node = await stack.core.readNode({ name: 'spot-l4-a' });
    node.spec = { ...node.spec, taints: [...(node.spec?.taints ?? []), { key: 'example.com/maintenance', value: 'true', effect: 'NoSchedule' }] };
    await stack.core.replaceNode({ name: 'spot-l4-a', body: node });
    try {
      const run = await start(gkeSpec());
      const result = await run.result();
      assert.equal(result.attempts[0].zone, 'us-central1-a');
      assert.equal(result.attempts[0].outcome, 'stockout');
      assert.equal(result.attempts[result.attempts.length - 1].outcome, 'completed');
      await noneLeft(run.workflowId);
    } finally {
      const fresh = await stack.core.readNode({ name: 'spot-l4-a' });
      fresh.spec = { ...fresh.spec, taints: (fresh.spec?.taints ?? []).filter((t) => t.key !== 'example.com/maintenance') };
      await stack.core.replaceNode({ name: 'spot-l4-a', body: fresh });
    }
  });

  it('fails the run with the exit code of a command that fails at once, not as a stockout', async () => {
    const run = await start(gkeSpec({ command: ['sh', '-c', 'exit 3'], recovery: { maxPreemptions: 5, maxRestartsOnError: 0, pollSeconds: 0.3 } }));
    const err = await run.result().catch((e: unknown) => e);
    assert.ok(err instanceof WorkflowFailedError, String(err));
    const cause = err.cause as { type?: string; message?: string };
    assert.equal(cause.type, 'UserCodeFailed', String(cause.message));
    const status = await run.query(statusQuery);
    assert.equal(status.attempt, 1, 'one attempt: a fast failure is not taken for an unschedulable pod');
    await noneLeft(run.workflowId);
  });

  it('deletes the Job when the run is cancelled', async () => {
    const run = await start(gkeSpec());
    await eventually('training', async () => ((await run.query(statusQuery)).phase === 'training' ? true : undefined), 120_000);
    assert.equal((await leftovers(run.workflowId)).jobs, 1);
    await run.cancel();
    const err = await run.result().catch((e: unknown) => e);
    assert.ok(err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure, String(err));
    await noneLeft(run.workflowId);
  });
});
