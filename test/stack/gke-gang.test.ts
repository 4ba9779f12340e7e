/**
 * A GKE gang against a real kube-apiserver: an Indexed Job of N pods and a headless
 * Service, admitted all or nothing. The run first tries the cheaper zone, where only one
 * of its two nodes fits: that partial gang is released whole and counted a stockout; the
 * next zone holds both, and the gang trains to completion, each pod told its rank and
 * rank 0's address, the ledger counting both nodes. A rank that loses its node preempts
 * the whole gang, which resumes from its checkpoint in another zone.
 */
import { strict as assert } from 'node:assert';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { GkeProvider } from '../../activities/providers/gke';
import { gangService } from '../../activities/providers/gke-gang';
import { pricePerHour } from '../../config/catalog';
import { catalogPriceBook } from '../../config/price-book';
import { podAddress, type FakeNode } from '../../kube/node-agent';
import { ProvisioningController } from '../../kube/provisioning-controller';
import { installProvisioningRequestCrd, PROVISIONING_REQUEST } from '../../kube/provisioning-request-crd';
import { localBucketMapper } from '../../workers/providers';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunSpecInput } from '../../workflows/spec';
import type { trainingRun } from '../../workflows/run/training-run';
import { resultWithin } from '../helpers/runs';
import { eventually } from '../helpers/processes';
import { startKubeStack, type KubeStack } from '../helpers/kube';
import { testEnv } from '../helpers/temporal';

const repoRoot = join(__dirname, '..', '..', '..');

/** Zone a holds a gang of two T4 nodes; zone b, on cheaper nodes, only one. */
const GANG_NODES: FakeNode[] = [
  { name: 'gang-t4-a1', zone: 'us-central1-a', accelerator: 'nvidia-tesla-t4', gpus: 1, spot: true, machineType: 'n1-standard-8' },
  { name: 'gang-t4-a2', zone: 'us-central1-a', accelerator: 'nvidia-tesla-t4', gpus: 1, spot: true, machineType: 'n1-standard-8' },
  { name: 'gang-t4-b1', zone: 'us-central1-b', accelerator: 'nvidia-tesla-t4', gpus: 1, spot: true, machineType: 'n1-standard-4' },
];

const round6 = (usd: number) => Math.round(usd * 1e6) / 1e6;

describe('a gang on GKE: an Indexed Job and a headless Service, all or nothing (a real Kubernetes control plane)', function () {
  this.timeout(600_000);
  let stack: KubeStack;
  let ranksDir: string;

  before(async function () {
    this.timeout(1_800_000); // the first run on a machine builds Kubernetes from source
    stack = await startKubeStack();
    for (const node of GANG_NODES) await stack.agent.addNode(node);
    ranksDir = mkdtempSync(join(tmpdir(), 'sterna-gang-ranks-'));
  });
  after(async () => {
    await stack?.stop();
    if (ranksDir) rmSync(ranksDir, { recursive: true, force: true });
  });

  /** Each rank writes what it was told to a file; rank 0 trains (as a gang of one), the others end (or, with `peersStay`, wait to be stopped). */
  function gangSpec(peersStay = false): RunSpecInput {
    const spec = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
    const script = [
      `printf '%s %s %s %s' "$STERNA_NODE_RANK" "$STERNA_NUM_NODES" "$STERNA_MASTER_ADDR" "$STERNA_MASTER_PORT" > "${ranksDir}/attempt-$STERNA_ATTEMPT-rank-$STERNA_NODE_RANK"`,
      // Rank 0 trains alone: the ranks' gradient exchange is the GCE gang test's; here the Job, Service and admission are under test.
      'if [ "$STERNA_NODE_RANK" = 0 ]; then STERNA_NUM_NODES=1 exec node trainer.js --data data/train.csv --steps 400 --step-ms 25; fi',
      ...(peersStay ? ['exec sleep 600'] : []),
    ].join('; ');
    return {
      ...spec,
      backend: 'gke',
      command: ['sh', '-c', script, 'gang'],
      resources: { accelerators: [{ type: 'nvidia-tesla-t4', count: 1 }], nodes: 2 },
      recovery: { ...spec.recovery, pollSeconds: 0.3 },
    };
  }

  async function left(workflowId: string): Promise<number> {
    const selector = `sterna-run=${runKey(workflowId)}`;
    const jobs = (await stack.batch.listNamespacedJob({ namespace: 'default', labelSelector: selector })).items.length;
    const pods = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: selector })).items.length;
    const services = (await stack.core.listNamespacedService({ namespace: 'default', labelSelector: selector })).items.length;
    return jobs + pods + services;
  }

  it('generates a gang\'s Job and Service, and a slice\'s Job, that the real API server accepts (strict, dry run)', async () => {
    const [offer] = await stack.provider.findOffers({ accelerators: [{ type: 'nvidia-tesla-t4', count: 1 }], provisioningModels: ['SPOT'], zones: { allow: ['us-central1-a'] }, nodes: 64 });
    assert.equal(offer.nodes, 64);
    const name = 'st-a-workflow-id-long-enough-to-fill-it-0123abcd-e1e2e3e-a7';
    assert.equal(name.length, 59, 'the longest gang name (naming.ts resourceName with nodes > 1)');
    const request = {
      name,
      offer,
      owner: { run: 'validate', execution: 'e1', attempt: 7 },
      labels: { 'sterna-run': 'validate', 'sterna-exec': 'e1', 'sterna-attempt': '7' },
      diskSizeGb: 100,
      agent: { runId: 'validate', attempt: 7, argv: ['true'], env: {}, datasets: [], checkpointUri: 'gs://b/c', pollSeconds: 1 },
    };
    const job = await stack.batch.createNamespacedJob({ namespace: 'default', body: stack.provider.jobManifest(request), dryRun: 'All', fieldValidation: 'Strict' });
    assert.equal(job.spec?.completions, 64);
    await stack.core.createNamespacedService({ namespace: 'default', body: gangService(name, 'default', request.labels, { uid: '00000000-0000-0000-0000-000000000001' }), dryRun: 'All', fieldValidation: 'Strict' });
    const slice = { ...offer, nodes: undefined, accelerator: 'nvidia-a100-80gb', partition: '1g.10gb' };
    await stack.batch.createNamespacedJob({ namespace: 'default', body: stack.provider.jobManifest({ ...request, offer: slice }), dryRun: 'All', fieldValidation: 'Strict' });
  });

  it('releases a partial gang as a stockout, then runs the whole gang to completion in a zone that holds it', async () => {
    const env = await testEnv();
    const run = await env.client.workflow.start<typeof trainingRun>('trainingRun', { taskQueue: stack.taskQueue, workflowId: `${stack.taskQueue}-gang`, args: [gangSpec()] });
    const selector = `sterna-run=${runKey(run.workflowId)},sterna-attempt=2`;

    // While the gang runs: one Indexed Job of two, its headless Service, a pod per rank on two nodes.
    const service = await eventually('the gang\'s Service', async () => (await stack.core.listNamespacedService({ namespace: 'default', labelSelector: selector })).items[0], 120_000);
    assert.equal(service.spec?.clusterIP, 'None');
    const [job] = (await stack.batch.listNamespacedJob({ namespace: 'default', labelSelector: selector })).items;
    assert.deepEqual([job.spec?.completionMode, job.spec?.completions, job.spec?.parallelism], ['Indexed', 2, 2]);
    assert.equal(service.metadata?.name, job.metadata?.name);

    const result = await run.result();
    assert.equal(result.status, 'completed');
    assert.equal(result.finalStep, 400);
    assert.deepEqual(
      result.attempts.map((a) => [a.zone, a.outcome]),
      [
        ['us-central1-b', 'stockout'],
        ['us-central1-a', 'completed'],
      ],
    );

    // Each rank of the gang that ran was told its rank, the gang's size and rank 0's name
    // (which the stand-in's cluster DNS resolves to rank 0's own address).
    const name = job.metadata!.name!;
    const jobEnv = Object.fromEntries((job.spec?.template.spec?.containers[0].env ?? []).map((e) => [e.name, e.value]));
    assert.equal(jobEnv.STERNA_MASTER_ADDR, `${name}-0.${name}.default.svc`);
    const master = podAddress(`${name}-0`, name, 'default');
    const told = (rank: number) => readFileSync(join(ranksDir, `attempt-2-rank-${rank}`), 'utf8');
    assert.equal(told(0), `0 2 ${master} 29500`);
    assert.equal(told(1), `1 2 ${master} 29500`);
    // The partial gang got as far as one rank on zone b's one node, never two.
    assert.deepEqual(readdirSync(ranksDir).filter((f) => f.startsWith('attempt-1-')), ['attempt-1-rank-0']);

    // The ledger counts both nodes: the attempt's price is two nodes' price.
    const nodePrice = pricePerHour({ region: 'us-central1', machineType: 'n1-standard-8', accelerator: 'nvidia-tesla-t4', count: 1, spot: true })!;
    const { ledger } = await run.query(statusQuery);
    assert.equal(ledger[1].pricePerHour, round6(2 * nodePrice));
    assert.ok(Math.abs(result.attempts[1].costUsd - (2 * nodePrice * result.attempts[1].runningSeconds) / 3600) < 1e-6);
    const { timeline } = await run.query(statusQuery);
    const partial = timeline.find((e) => e.kind === 'attempt-failed' && e.attempt === 1);
    assert.match(partial?.event ?? '', /only 1 of the 2 pods of the gang .* could be scheduled in us-central1-b .*; the partial gang is released/);

    await eventually('no Job, Pod or Service left', async () => ((await left(run.workflowId)) === 0 ? true : undefined), 60_000, 500);
  });

  it('moves the whole gang to another zone, from its checkpoint, when one rank\'s spot node is shut down', async () => {
    // A second zone that holds a gang, dearer than zone a.
    for (const n of [1, 2]) await stack.agent.addNode({ name: `gang-t4-c${n}`, zone: 'us-central1-c', accelerator: 'nvidia-tesla-t4', gpus: 1, spot: true, machineType: 'n1-standard-16' });
    const env = await testEnv();
    const spec = { ...gangSpec(true), placement: { zones: { allow: ['us-central1-a', 'us-central1-c'] } } };
    const run = await env.client.workflow.start<typeof trainingRun>('trainingRun', { taskQueue: stack.taskQueue, workflowId: `${stack.taskQueue}-gang-preempted`, args: [spec] });
    await eventually('a checkpoint', async () => {
      const s = await run.query(statusQuery);
      return s.phase === 'training' && (s.lastCheckpoint?.step ?? 0) > 60 ? s : undefined;
    }, 120_000);
    const pods = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: `sterna-run=${runKey(run.workflowId)},sterna-attempt=1` })).items;
    const rank1 = pods.find((p) => p.metadata?.annotations?.['batch.kubernetes.io/job-completion-index'] === '1')!;
    assert.equal(rank1.spec?.nodeSelector?.['topology.kubernetes.io/zone'], 'us-central1-a');
    // Rank 1 only waits; losing its node still preempts the gang (it is only as alive as its weakest rank).
    await stack.agent.shutdownNode(rank1.spec!.nodeName!);

    const result = await resultWithin(run, 300_000);
    assert.equal(result.preemptions, 1);
    assert.equal((await run.query(statusQuery)).attempt, 2);
    assert.deepEqual(
      result.attempts.map((a) => [a.zone, a.outcome]),
      [
        ['us-central1-a', 'preempted'],
        ['us-central1-c', 'completed'],
      ],
    );
    assert.equal(result.finalStep, 400);
    const { timeline } = await run.query(statusQuery);
    const resumed = timeline.find((e) => e.kind === 'preempted');
    assert.ok(resumed && resumed.step! > 0, 'resumed from a checkpoint, not from step 0');
    await eventually('no Job, Pod or Service left', async () => ((await left(run.workflowId)) === 0 ? true : undefined), 60_000, 500);
    const lost = GANG_NODES.find((n) => n.name === rank1.spec!.nodeName);
    if (lost) await stack.agent.addNode(lost);
  });

  it('with flex-start, asks one ProvisioningRequest for the whole gang and releases it with the Job and the Service', async () => {
    await installProvisioningRequestCrd(stack.kc);
    const controller = new ProvisioningController(stack.kc, stack.agent);
    await controller.start();
    controller.setBehaviour('us-central1-d', { kind: 'grant', waitMs: 500 });
    const provider = new GkeProvider({
      kubeConfig: stack.kc,
      namespace: 'default',
      prices: catalogPriceBook(),
      pendingTimeoutSeconds: 20,
      terminationGracePeriodSeconds: 3,
      pollIntervalMs: 200,
      storageUriForVm: localBucketMapper(stack.bucketsDir),
      nodePools: [{ name: 'flex-l4', zones: ['us-central1-d'], accelerator: 'nvidia-l4', gpusPerNode: 1, spot: false, machineType: 'g2-standard-8', flexStart: true }],
    });
    const custom = stack.kc.makeApiClient(CustomObjectsApi);
    const { group, version, plural } = PROVISIONING_REQUEST;
    try {
      const [offer] = await provider.findOffers({ accelerators: [{ type: 'nvidia-l4', count: 1 }], provisioningModels: ['FLEX_START'], nodes: 2 });
      assert.equal(offer.nodes, 2);
      const name = 'st-flex-gang-0000000-a1';
      const owner = { run: 'flex-gang', execution: 'e1', attempt: 1 };
      const provisioned = await provider.provision(
        {
          name,
          offer,
          owner,
          labels: { 'sterna-run': 'flex-gang', 'sterna-exec': 'e1', 'sterna-attempt': '1' },
          diskSizeGb: 100,
          flexStart: { maxWaitSeconds: 120, maxRunDurationSeconds: 3600 },
          agent: { runId: 'flex-gang', attempt: 1, argv: ['sleep', '5'], env: {}, datasets: [], checkpointUri: 'gs://b/c', pollSeconds: 1 },
        },
        () => undefined,
      );
      assert.ok(provisioned.window.startedAt, 'both ranks started');
      const request = (await custom.getNamespacedCustomObject({ group, version, plural, namespace: 'default', name })) as { spec: { podSets: { count: number }[] } };
      assert.equal(request.spec.podSets[0].count, 2, 'one request for both pods');
      const pods = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: `job-name=${name}` })).items;
      assert.equal(new Set(pods.map((p) => p.spec?.nodeName)).size, 2, 'each rank on its own flex-start node');

      assert.equal((await provider.release({ ref: provisioned.ref, owner, createMayBeInFlight: false })).outcome, 'deleted');
      await eventually('the Job, its pods, the Service, the PodTemplate and the request gone', async () => {
        const selector = 'sterna-run=flex-gang';
        const counts = await Promise.all([
          stack.batch.listNamespacedJob({ namespace: 'default', labelSelector: selector }).then((l) => l.items.length),
          stack.core.listNamespacedPod({ namespace: 'default', labelSelector: selector }).then((l) => l.items.length),
          stack.core.listNamespacedService({ namespace: 'default', labelSelector: selector }).then((l) => l.items.length),
          stack.core.listNamespacedPodTemplate({ namespace: 'default', labelSelector: selector }).then((l) => l.items.length),
          custom.listNamespacedCustomObject({ group, version, plural, namespace: 'default', labelSelector: selector }).then((l) => (l as { items: unknown[] }).items.length),
        ]);
        return counts.every((n) => n === 0) ? true : undefined;
      }, 60_000, 500);
    } finally {
      provider.close();
      controller.stop();
    }
  });
});
