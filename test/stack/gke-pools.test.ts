/**
 * GKE node pools from the worker's configuration: pools declared in the environment
 * (scale-from-zero and node auto-provisioning included) reach the provider, and a run
 * against a pool with no node is offered, waits while its pod is pending, and runs once
 * a node joins (the stand-in kubelet plays the cluster autoscaler).
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Worker } from '@temporalio/worker';
import { GkeProvider, gkeProviderSettings } from '../../activities/providers/gke';
import { catalogPriceBook } from '../../config/price-book';
import { loadWorkerConfig } from '../../config/worker-config';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunSpecInput } from '../../workflows/spec';
import type { trainingRun } from '../../workflows/run/training-run';
import { localBucketMapper } from '../../workers/providers';
import { startKubeStack, type KubeStack } from '../helpers/kube';
import { eventually } from '../helpers/processes';
import { sternaTestWorker, testEnv, uniqueTaskQueue } from '../helpers/temporal';

const repoRoot = join(__dirname, '..', '..', '..');
const ZERO_POOL = { name: 'spot-l4-zero', zones: ['us-central1-d'], accelerator: 'nvidia-l4', gpusPerNode: 1, spot: true, machineType: 'g2-standard-8' };

describe('GKE node pools from the worker configuration', () => {
  it('reads declared pools, node auto-provisioning, service account and timeouts, naming a bad variable', () => {
    const config = loadWorkerConfig({
      STERNA_GKE_KUBECONFIG: '/etc/sterna/kubeconfig',
      STERNA_GKE_NODE_POOLS: JSON.stringify([ZERO_POOL]),
      STERNA_GKE_AUTOPROVISIONING: JSON.stringify({ zones: ['us-east1-b'], accelerators: [{ type: 'nvidia-tesla-t4', gpusPerNode: 1 }], spot: true }),
      STERNA_GKE_SERVICE_ACCOUNT: 'sterna-agent',
      STERNA_GKE_PENDING_TIMEOUT_SECONDS: '600',
      STERNA_GKE_STARTUP_TIMEOUT_SECONDS: '1200',
      STERNA_GKE_TERMINATION_GRACE_SECONDS: '20',
    });
    assert.deepEqual(gkeProviderSettings(config.gke!), {
      namespace: 'default',
      nodePools: [ZERO_POOL, { name: 'auto-nvidia-tesla-t4-spot', zones: ['us-east1-b'], accelerator: 'nvidia-tesla-t4', gpusPerNode: 1, spot: true, machineType: undefined }],
      serviceAccountName: 'sterna-agent',
      defaultImage: undefined,
      pendingTimeoutSeconds: 600,
      startupTimeoutSeconds: 1200,
      terminationGracePeriodSeconds: 20,
    });
    assert.throws(() => loadWorkerConfig({ STERNA_GKE_KUBECONFIG: '/k', STERNA_GKE_NODE_POOLS: '[{"name": "p", "zones": []}]' }), /STERNA_GKE_NODE_POOLS\.0\.zones: /);
    assert.throws(() => loadWorkerConfig({ STERNA_GKE_KUBECONFIG: '/k', STERNA_GKE_AUTOPROVISIONING: 'yes' }), /STERNA_GKE_AUTOPROVISIONING: JSON such as/);
  });

  describe('on a real Kubernetes control plane', function () {
    this.timeout(600_000);
    let stack: KubeStack;
    let provider: GkeProvider;
    let worker: Worker;
    let running: Promise<void>;
    const taskQueue = uniqueTaskQueue('gke-pools');

    before(async function () {
      this.timeout(1_800_000);
      stack = await startKubeStack();
      // The worker's provider exactly as the configuration builds it, on the test cluster.
      const config = loadWorkerConfig({ STERNA_GKE_KUBECONFIG: '/unused', STERNA_GKE_NODE_POOLS: JSON.stringify([ZERO_POOL]), STERNA_GKE_PENDING_TIMEOUT_SECONDS: '300', STERNA_GKE_TERMINATION_GRACE_SECONDS: '3' });
      provider = new GkeProvider({ kubeConfig: stack.kc, prices: catalogPriceBook(), pollIntervalMs: 200, storageUriForVm: localBucketMapper(stack.bucketsDir), ...gkeProviderSettings(config.gke!) });
      worker = await sternaTestWorker(taskQueue, { gke: provider });
      running = worker.run();
    });
    after(async () => {
      worker?.shutdown();
      await running;
      provider?.close();
      await stack?.stop();
    });

    it('offers a pool declared at zero nodes, and runs there once a node joins', async () => {
      const base = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
      const spec: RunSpecInput = { ...base, backend: 'gke', resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] }, placement: { zones: { allow: ['us-central1-d'] } }, recovery: { ...base.recovery, pollSeconds: 0.3 } };
      const run = await (await testEnv()).client.workflow.start<typeof trainingRun>('trainingRun', { taskQueue, workflowId: `${taskQueue}-1`, args: [spec] });
      const pending = await eventually('its pod, pending: the pool has no node', async () => {
        const [pod] = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: `sterna-run=${runKey(run.workflowId)}` })).items;
        return pod && !pod.spec?.nodeName ? pod : undefined;
      }, 120_000);
      assert.equal((await run.query(statusQuery)).phase, 'provisioning');
      assert.equal(pending.metadata?.labels?.['sterna-attempt'], '1');
      // The autoscaler's part: a node of the declared pool joins.
      await stack.agent.addNode({ name: 'spot-l4-d', zone: 'us-central1-d', accelerator: 'nvidia-l4', gpus: 1, spot: true, machineType: 'g2-standard-8' });
      const result = await run.result();
      assert.equal(result.status, 'completed');
      assert.deepEqual(result.attempts.map((a) => [a.zone, a.outcome]), [['us-central1-d', 'completed']], 'one attempt, in the pool that had no node');
    });
  });
});
