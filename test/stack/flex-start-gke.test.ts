/**
 * Flex-start on GKE through queued provisioning, against a real kube-apiserver: the
 * ProvisioningRequest CRD installed, the stand-in provisioning controller beside the
 * stand-in kubelet (kube/provisioning-controller.ts). Sterna's side is the production
 * path: a Job admitted once its ProvisioningRequest is Provisioned runs to completion; a
 * Failed or BookingExpired request leads to the next choice, named; release deletes the
 * Job, the PodTemplate and the request; a flex-start node cut at its request's
 * maxRunDurationSeconds leads to a resumed attempt, counting no preemption.
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { Worker } from '@temporalio/worker';
import { GkeProvider } from '../../activities/providers/gke';
import { catalogPriceBook } from '../../config/price-book';
import { ProvisioningController } from '../../kube/provisioning-controller';
import { installProvisioningRequestCrd, PROVISIONING_REQUEST } from '../../kube/provisioning-request-crd';
import { localBucketMapper } from '../../workers/providers';
import { setDeadlineUpdate, statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunSpecInput } from '../../workflows/spec';
import type { trainingRun } from '../../workflows/run/training-run';
import { eventually } from '../helpers/processes';
import { startKubeStack, type KubeStack } from '../helpers/kube';
import { sternaTestWorker, testEnv, uniqueTaskQueue } from '../helpers/temporal';

const repoRoot = join(__dirname, '..', '..', '..');
const FLEX_ZONES = ['us-central1-d', 'us-central1-e'];

describe('flex-start on GKE: queued provisioning on a real Kubernetes control plane', function () {
  this.timeout(600_000);
  let stack: KubeStack;
  let controller: ProvisioningController;
  let provider: GkeProvider;
  let worker: Worker;
  let running: Promise<void>;
  let taskQueue: string;
  let counter = 0;

  before(async function () {
    this.timeout(1_800_000); // the first run on a machine builds Kubernetes from source
    stack = await startKubeStack();
    await installProvisioningRequestCrd(stack.kc);
    controller = new ProvisioningController(stack.kc, stack.agent);
    await controller.start();
    // A flex-start (queued provisioning) L4 pool in two zones, scaled to zero until a request is granted.
    provider = new GkeProvider({
      kubeConfig: stack.kc,
      namespace: 'default',
      prices: catalogPriceBook(),
      pendingTimeoutSeconds: 20,
      terminationGracePeriodSeconds: 3,
      pollIntervalMs: 200,
      storageUriForVm: localBucketMapper(stack.bucketsDir),
      nodePools: [{ name: 'flex-l4', zones: FLEX_ZONES, accelerator: 'nvidia-l4', gpusPerNode: 1, spot: false, machineType: 'g2-standard-8', flexStart: true }],
    });
    taskQueue = uniqueTaskQueue('gke-flex');
    worker = await sternaTestWorker(taskQueue, { gke: provider });
    running = worker.run();
  });
  after(async () => {
    worker?.shutdown();
    await running;
    provider?.close();
    controller?.stop();
    await stack?.stop();
  });

  function spec(): RunSpecInput {
    const example = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
    return {
      ...example,
      backend: 'gke',
      resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
      // No spot here: the flex-start pool, then on-demand (the standard node in us-central1-f).
      placement: { zones: { allow: [...FLEX_ZONES, 'us-central1-f'] } },
      pricing: { mode: 'auto', flexStart: { maxWait: '5m' }, budgetUsd: 5 },
      recovery: { ...example.recovery, pollSeconds: 0.3 },
    };
  }

  async function start(overrides: Partial<RunSpecInput> = {}) {
    const env = await testEnv();
    counter++;
    return env.client.workflow.start<typeof trainingRun>('trainingRun', { taskQueue, workflowId: `${taskQueue}-${counter}`, args: [{ ...spec(), ...overrides }] });
  }

  async function requestsOf(workflowId: string): Promise<{ conditions: string[] }[]> {
    const custom = stack.kc.makeApiClient(CustomObjectsApi);
    const { group, version, plural } = PROVISIONING_REQUEST;
    const list = (await custom.listNamespacedCustomObject({ group, version, plural, namespace: 'default', labelSelector: `sterna-run=${runKey(workflowId)}` })) as {
      items: { status?: { conditions?: { type: string; status: string }[] } }[];
    };
    return list.items.map((pr) => ({ conditions: (pr.status?.conditions ?? []).filter((c) => c.status === 'True').map((c) => c.type) }));
  }

  async function noneLeft(workflowId: string): Promise<void> {
    const selector = `sterna-run=${runKey(workflowId)}`;
    await eventually('no Job, Pod, PodTemplate or ProvisioningRequest left', async () => {
      const jobs = (await stack.batch.listNamespacedJob({ namespace: 'default', labelSelector: selector })).items.length;
      const pods = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: selector })).items.length;
      const templates = (await stack.core.listNamespacedPodTemplate({ namespace: 'default', labelSelector: selector })).items.length;
      const requests = (await requestsOf(workflowId)).length;
      return jobs + pods + templates + requests === 0 ? true : undefined;
    }, 60_000, 500);
  }

  it('admits the Job once its ProvisioningRequest is Provisioned, runs it to completion, and releases all three', async () => {
    // Long enough that a loaded machine still sees the request waiting before it is granted.
    for (const zone of FLEX_ZONES) controller.setBehaviour(zone, { kind: 'grant', waitMs: 20_000 });
    const run = await start();
    const waiting = await eventually('the run waiting for DWS capacity', async () => (await run.query(statusQuery)).waiting, 60_000);
    assert.match(waiting, /^waiting for DWS capacity since /);
    const job = await eventually('the Job', async () => (await stack.batch.listNamespacedJob({ namespace: 'default', labelSelector: `sterna-run=${runKey(run.workflowId)}` })).items[0], 30_000);
    // The Job comes first (suspended), then the PodTemplate and the request it consumes.
    const request = await eventually('the ProvisioningRequest', async () => (await requestsOf(run.workflowId))[0], 30_000);
    assert.ok(!request.conditions.includes('Provisioned'), 'the request is still waiting');
    assert.equal(job.spec?.suspend, true, 'the Job waits, suspended, while the request is not Provisioned');
    await eventually('the request Provisioned', async () => ((await requestsOf(run.workflowId))[0]?.conditions.includes('Provisioned') ? true : undefined), 60_000);
    const result = await run.result();
    assert.deepEqual(result.attempts.map((a) => [a.provisioningModel, a.outcome]), [['FLEX_START', 'completed']]);
    assert.equal(result.finalStep, 400);
    await noneLeft(run.workflowId);
  });

  it('moves to the next choice, naming the failure, when a request Fails or its booking expires', async () => {
    controller.setBehaviour(FLEX_ZONES[0], { kind: 'fail', waitMs: 1000 });
    controller.setBehaviour(FLEX_ZONES[1], { kind: 'expire', waitMs: 1000, expireAfterMs: 500 });
    try {
      const run = await start();
      const result = await run.result();
      assert.deepEqual(result.attempts.map((a) => [a.zone, a.provisioningModel, a.outcome]), [
        [FLEX_ZONES[0], 'FLEX_START', 'wait-expired'],
        [FLEX_ZONES[1], 'FLEX_START', 'wait-expired'],
        ['us-central1-f', 'STANDARD', 'completed'],
      ]);
      const { timeline } = await run.query(statusQuery);
      const failed = timeline.filter((e) => e.kind === 'attempt-failed' && e.outcome === 'wait-expired').map((e) => e.event);
      assert.ok(/Failed/.test(failed[0]) && /BookingExpired/.test(failed[1]), failed.join('; '));
      await noneLeft(run.workflowId);
    } finally {
      for (const zone of FLEX_ZONES) controller.setBehaviour(zone, undefined);
    }
  });

  it('resumes from the last checkpoint in a new attempt, counting no preemption, when the flex-start node is cut at its run duration', async () => {
    // A few seconds' wait, so the cut Job's replacement pod is gone (its Job released) before the next node joins.
    for (const zone of FLEX_ZONES) controller.setBehaviour(zone, { kind: 'grant', waitMs: 3000 });
    try {
      // The request's run duration comes from the deadline, 45 s away; once the Job runs the
      // deadline moves an hour later, so the node is cut before the run ends.
      const run = await start({
        command: ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', '2000', '--step-ms', '25'],
        pricing: { mode: 'flex-start', flexStart: { maxWait: '5m' }, budgetUsd: 5 },
        time: { deadline: new Date(Date.now() + 45_000).toISOString() },
      });
      await eventually('the first attempt training', async () => ((await run.query(statusQuery)).phase === 'training' ? true : undefined), 60_000, 200);
      await run.executeUpdate(setDeadlineUpdate, { args: [new Date(Date.now() + 3_600_000).toISOString()] });
      const result = await run.result();
      const outcomes = result.attempts.map((a) => [a.provisioningModel, a.outcome]);
      assert.deepEqual(outcomes[0], ['FLEX_START', 'run-duration-reached'], JSON.stringify(outcomes));
      assert.deepEqual(outcomes[outcomes.length - 1], ['FLEX_START', 'completed']);
      assert.equal(result.preemptions, 0, 'a run-duration cut is not a preemption');
      assert.equal(result.restarts, 0, 'nor a failure of the trainer');
      assert.equal(result.finalStep, 2000);
      const { timeline } = await run.query(statusQuery);
      const cut = timeline.find((e) => e.kind === 'run-duration-reached')!;
      assert.ok((cut.step ?? 0) > 0, `resumed from step ${cut.step}, not from 0`);
      await noneLeft(run.workflowId);
    } finally {
      for (const zone of FLEX_ZONES) controller.setBehaviour(zone, undefined);
    }
  });
});
