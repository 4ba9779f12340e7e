/**
 * GPU slices and GKE gangs without a server: what the spec accepts and refuses, the share
 * rule a slice is priced by, the names a gang leaves room in, and the Job and Service a
 * slice or a gang becomes.
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { GkeProvider } from '../../activities/providers/gke';
import { gangProgress, gangService, leadPod, masterAddress } from '../../activities/providers/gke-gang';
import { catalogPriceBook } from '../../config/price-book';
import { fieldValue, podAddress, resolveServiceName } from '../../kube/node-agent';
import { describeShape, devicesPerGpu, partitionsPerGpu } from '../../workflows/gpu-slices';
import { resourceName } from '../../workflows/naming';
import { gpuEquivalent, nodeShare } from '../../workflows/pricing-slices';
import { capacityRequest } from '../../workflows/run/requests';
import { checkSpec, parseSpec, type RunSpecInput } from '../../workflows/spec';
import type { Offer } from '../../workflows/types';

const repo = join(__dirname, '..', '..', '..');
const example = (): RunSpecInput => JSON.parse(readFileSync(join(repo, 'examples', 'run.json'), 'utf8'));

function withResources(resources: Record<string, unknown>, backend: 'gce' | 'gke' = 'gke'): RunSpecInput {
  return { ...example(), backend, resources: resources as RunSpecInput['resources'] };
}

/** Every problem as `path: message`. */
function problems(input: RunSpecInput): string[] {
  const check = checkSpec(input);
  return check.ok ? [] : check.problems.map((p) => `${p.path}: ${p.message}`);
}

describe('GPU slices and gangs in the spec', () => {
  it('accepts a MIG partition of an A100 and a time-shared L4 on GKE', () => {
    const spec = parseSpec(
      withResources({
        accelerators: [
          { type: 'nvidia-a100-80gb', count: 1, partition: '1g.10gb' },
          { type: 'nvidia-l4', count: 1, sharing: 'time-sharing', maxSharedClients: 4 },
        ],
      }),
    );
    assert.deepEqual(capacityRequest(spec).request.accelerators, [
      { type: 'nvidia-a100-80gb', count: 1, partition: '1g.10gb' },
      { type: 'nvidia-l4', count: 1, sharing: 'time-sharing', maxSharedClients: 4 },
    ]);
  });

  it('refuses a partition of a GPU that has no MIG, naming the types that do', () => {
    const [problem, ...rest] = problems(withResources({ accelerators: [{ type: 'nvidia-l4', count: 1, partition: '1g.10gb' }] }));
    assert.equal(rest.length, 0);
    assert.match(problem, /^resources\.accelerators\.0\.partition: nvidia-l4 cannot be partitioned \(MIG\); partitions exist on .*nvidia-a100-80gb/);
  });

  it('refuses a profile the GPU does not have, listing the ones it has', () => {
    const [problem] = problems(withResources({ accelerators: [{ type: 'nvidia-tesla-a100', count: 1, partition: '1g.10gb' }] }));
    assert.equal(problem, 'resources.accelerators.0.partition: 1g.10gb is not a MIG profile of nvidia-tesla-a100; use one of 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb');
  });

  it('refuses slices on GCE, saying they exist on GKE only', () => {
    const mig = problems(withResources({ accelerators: [{ type: 'nvidia-a100-80gb', count: 1, partition: '3g.40gb' }] }, 'gce'));
    assert.equal(mig.length, 1);
    assert.match(mig[0], /^resources\.accelerators\.0\.partition: GPU slices .* exist on backend gke only; backend gce attaches whole GPUs/);
    const shared = problems(withResources({ accelerators: [{ type: 'nvidia-l4', count: 1, sharing: 'time-sharing' }] }, 'gce'));
    assert.match(shared[0], /^resources\.accelerators\.0\.sharing: GPU slices/);
  });

  it('refuses a slice of more than one device, maxSharedClients without sharing, and an unknown strategy', () => {
    assert.match(problems(withResources({ accelerators: [{ type: 'nvidia-a100-80gb', count: 2, partition: '1g.10gb' }] }))[0], /^resources\.accelerators\.0\.count: a GPU slice is one device per pod/);
    assert.match(problems(withResources({ accelerators: [{ type: 'nvidia-l4', count: 1, maxSharedClients: 4 }] }))[0], /^resources\.accelerators\.0\.maxSharedClients: .*add "sharing": "time-sharing"/);
    assert.deepEqual(
      problems(withResources({ accelerators: [{ type: 'nvidia-l4', count: 1, sharing: 'mps' }] })).map((p) => p.split(':')[0]),
      ['resources.accelerators.0.sharing'],
    );
    assert.deepEqual(
      problems(withResources({ accelerators: [{ type: 'nvidia-l4', count: 1, sharing: 'time-sharing', maxSharedClients: 49 }] })).map((p) => p.split(':')[0]),
      ['resources.accelerators.0.maxSharedClients'],
    );
  });

  it('accepts a gang on GKE, asks for its nodes, and refuses a gang of slices', () => {
    const spec = parseSpec(withResources({ accelerators: [{ type: 'nvidia-l4', count: 1 }], nodes: 2 }));
    assert.equal(capacityRequest(spec).request.nodes, 2);
    assert.equal(capacityRequest(parseSpec(withResources({ accelerators: [{ type: 'nvidia-l4', count: 1 }] }))).request.nodes, undefined, 'one node asks as it always did');
    const [problem] = problems(withResources({ accelerators: [{ type: 'nvidia-l4', count: 1, sharing: 'time-sharing' }], nodes: 2 }));
    assert.equal(problem, 'resources.nodes: a gang runs on whole GPUs; drop partition/sharing, or use nodes: 1');
  });
});

describe('what a slice costs', () => {
  it('a MIG partition is its compute slices out of 7; a time-shared GPU 1 / clients; a whole GPU is whole', () => {
    assert.equal(gpuEquivalent(1, { partition: '1g.10gb' }), 1 / 7);
    assert.equal(gpuEquivalent(1, { partition: '3g.40gb' }), 3 / 7, 'three slices, though only two fit on a GPU');
    assert.equal(gpuEquivalent(1, { maxSharedClients: 4 }), 1 / 4);
    assert.equal(gpuEquivalent(1, { partition: '1g.10gb', maxSharedClients: 2 }), 1 / 14);
    assert.equal(gpuEquivalent(2, {}), 2);
    assert.equal(nodeShare(1, { partition: '1g.10gb' }, 2), 1 / 14, 'a slice of one of the node\'s two GPUs');
  });

  it('a sliced GPU advertises its partitions (or shares) as devices', () => {
    assert.equal(partitionsPerGpu('nvidia-a100-80gb', '3g.40gb'), 2);
    assert.equal(devicesPerGpu('nvidia-a100-80gb', { partition: '1g.10gb' }), 7);
    assert.equal(devicesPerGpu('nvidia-l4', { maxSharedClients: 4 }), 4);
    assert.equal(devicesPerGpu('nvidia-l4', {}), 1);
  });

  it('the ledger names the slice', () => {
    assert.equal(describeShape({ accelerator: 'nvidia-a100-80gb', acceleratorCount: 1, partition: '1g.10gb' }), 'nvidia-a100-80gb x1 (MIG 1g.10gb)');
    assert.equal(describeShape({ accelerator: 'nvidia-l4', acceleratorCount: 1, maxSharedClients: 4 }), 'nvidia-l4 x1 (time-shared by 4)');
    assert.equal(describeShape({ accelerator: 'nvidia-l4', acceleratorCount: 1 }), 'nvidia-l4 x1');
  });
});

describe('gang names and manifests', () => {
  const longId = 'a-workflow-id-long-enough-to-fill-every-character-of-a-resource-name-and-more';

  it('a gang name leaves room for its ranks; a single node is named as before', () => {
    assert.equal(resourceName(longId, 'e1e2e3e4e5e6e7', 3, 1), resourceName(longId, 'e1e2e3e4e5e6e7', 3));
    assert.equal(resourceName(longId, 'e1e2e3e4e5e6e7', 3).length, 63);
    const gang = resourceName(longId, 'e1e2e3e4e5e6e7', 3, 64);
    assert.ok(`${gang}-63`.length <= 63 && `${gang}-n63`.length <= 63, gang);
  });

  // Manifests only: the provider never calls this (unreachable) server here.
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({ clusters: [{ name: 'c', server: 'https://127.0.0.1:9' }], users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
  const provider = new GkeProvider({ kubeConfig, namespace: 'team-a', prices: catalogPriceBook() });
  const offer: Offer = {
    backend: 'gke',
    zone: 'us-central1-a',
    region: 'us-central1',
    accelerator: 'nvidia-l4',
    acceleratorCount: 1,
    machineType: 'g2-standard-8',
    provisioningModel: 'SPOT',
    pricePerHour: 1,
    onDemandPricePerHour: 2,
    quotaAvailable: true,
  };
  const request = (o: Offer) => ({
    name: 'st-gang-0000000-a1',
    offer: o,
    owner: { run: 'gang', execution: 'e1', attempt: 1 },
    labels: { 'sterna-run': 'gang', 'sterna-exec': 'e1', 'sterna-attempt': '1' },
    diskSizeGb: 100,
    agent: { runId: 'gang', attempt: 1, argv: ['true'], env: {}, datasets: [], checkpointUri: 'gs://b/c', pollSeconds: 1 },
  });

  it('a gang is one Indexed Job of N pods named through its Service, each told its rank and rank 0\'s address', () => {
    const job = provider.jobManifest(request({ ...offer, nodes: 3 }));
    assert.equal(job.spec?.completionMode, 'Indexed');
    assert.equal(job.spec?.completions, 3);
    assert.equal(job.spec?.parallelism, 3);
    assert.equal(job.spec?.template.spec?.subdomain, 'st-gang-0000000-a1');
    const env = Object.fromEntries((job.spec?.template.spec?.containers[0].env ?? []).map((e) => [e.name, e.value ?? e.valueFrom?.fieldRef?.fieldPath]));
    assert.equal(env.STERNA_NODE_RANK, "metadata.annotations['batch.kubernetes.io/job-completion-index']");
    assert.equal(env.STERNA_NUM_NODES, '3');
    assert.equal(env.STERNA_MASTER_ADDR, 'st-gang-0000000-a1-0.st-gang-0000000-a1.team-a.svc');
    assert.equal(env.STERNA_MASTER_PORT, '29500');
    // The agent reads the same as its inputs (STERNA_ATTR_<attribute>), the rank from the pod itself.
    assert.equal(env.STERNA_ATTR_sterna_node_rank, env.STERNA_NODE_RANK);
    assert.equal(env.STERNA_ATTR_sterna_num_nodes, '3');
    assert.equal(env.STERNA_ATTR_sterna_master_addr, env.STERNA_MASTER_ADDR);
    assert.equal(env.STERNA_ATTR_sterna_master_port, '29500');
    const single = provider.jobManifest(request(offer));
    assert.equal(single.spec?.completionMode, undefined);
    assert.ok(!(single.spec?.template.spec?.containers[0].env ?? []).some((e) => e.name === 'STERNA_NODE_RANK'));
  });

  it('a slice selects its pool by GKE\'s labels and asks for one device; a whole GPU keeps off sliced nodes', () => {
    const mig = provider.jobManifest(request({ ...offer, accelerator: 'nvidia-a100-80gb', partition: '1g.10gb', provisioningModel: 'STANDARD' }));
    const spec = mig.spec!.template.spec!;
    assert.equal(spec.nodeSelector?.['cloud.google.com/gke-gpu-partition-size'], '1g.10gb');
    assert.equal(spec.containers[0].resources?.limits?.['nvidia.com/gpu'], '1');
    const away = (s: typeof spec) => s.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms[0].matchExpressions?.map((e) => `${e.key} ${e.operator}`);
    assert.deepEqual(away(spec), ['cloud.google.com/gke-spot DoesNotExist', 'cloud.google.com/gke-gpu-sharing-strategy DoesNotExist']);
    const shared = provider.jobManifest(request({ ...offer, maxSharedClients: 4 })).spec!.template.spec!;
    assert.equal(shared.nodeSelector?.['cloud.google.com/gke-gpu-sharing-strategy'], 'time-sharing');
    assert.equal(shared.nodeSelector?.['cloud.google.com/gke-max-shared-clients-per-gpu'], '4');
    const whole = provider.jobManifest(request(offer)).spec!.template.spec!;
    assert.deepEqual(away(whole), ['cloud.google.com/gke-gpu-partition-size DoesNotExist', 'cloud.google.com/gke-gpu-sharing-strategy DoesNotExist']);
  });

  it('the Service is headless, selects the Job\'s pods and is owned by the Job', () => {
    const service = gangService('st-gang-0000000-a1', 'team-a', { 'sterna-run': 'gang' }, { uid: 'u-1' });
    assert.equal(service.spec?.clusterIP, 'None');
    assert.deepEqual(service.spec?.selector, { 'job-name': 'st-gang-0000000-a1' });
    assert.equal(service.metadata?.ownerReferences?.[0].uid, 'u-1');
    assert.equal(masterAddress('j', 'ns'), 'j-0.j.ns.svc');
  });

  const pod = (rank: number, phase: string, node?: string, startTime?: string): V1Pod => ({
    metadata: { annotations: { 'batch.kubernetes.io/job-completion-index': String(rank) } },
    spec: { containers: [], ...(node ? { nodeName: node } : {}) },
    status: { phase, ...(startTime ? { startTime: new Date(startTime) } : {}) },
  });

  it('a gang counts each rank once; it has started when every rank has', () => {
    const isScheduled = (p: V1Pod) => Boolean(p.spec?.nodeName);
    assert.deepEqual(gangProgress([pod(0, 'Running', 'n1', '2030-01-01T00:00:05Z'), pod(1, 'Pending')], 2, isScheduled), { scheduled: 1, started: 1, firstStartedAt: '2030-01-01T00:00:05.000Z' });
    const both = gangProgress([pod(1, 'Succeeded', 'n2', '2030-01-01T00:00:03Z'), pod(0, 'Running', 'n1', '2030-01-01T00:00:05Z'), pod(0, 'Failed', 'n1')], 2, isScheduled);
    assert.deepEqual(both, { scheduled: 2, started: 2, firstStartedAt: '2030-01-01T00:00:03.000Z' });
    assert.equal(leadPod([pod(1, 'Running'), pod(0, 'Running', 'n1')])?.spec?.nodeName, 'n1', 'rank 0 speaks for the gang');
  });

  it('the stand-in kubelet resolves a pod\'s annotations and labels for the downward API', () => {
    const p = { metadata: { name: 'p', namespace: 'ns', annotations: { 'batch.kubernetes.io/job-completion-index': '1' }, labels: { a: 'b' } }, spec: { containers: [], nodeName: 'n' } };
    assert.equal(fieldValue(p, "metadata.annotations['batch.kubernetes.io/job-completion-index']"), '1');
    assert.equal(fieldValue(p, "metadata.labels['a']"), 'b');
    assert.equal(fieldValue(p, 'spec.nodeName'), 'n');
    assert.equal(fieldValue(p, 'status.podIP'), undefined);
  });

  it('the stand-in\'s cluster DNS gives a Service\'s pod name the address that pod gets', () => {
    const address = podAddress('job-0', 'job', 'team-a');
    assert.match(address, /^127\.(1[6-9]|2\d|3[01])\.\d+\.\d+$/);
    assert.equal(resolveServiceName('job-0.job.team-a.svc'), address);
    assert.equal(resolveServiceName('job-0.job.team-a.svc.cluster.local'), address);
    assert.notEqual(podAddress('job-1', 'job', 'team-a'), address);
    assert.equal(resolveServiceName('example.com'), 'example.com');
    assert.equal(podAddress(undefined, undefined, 'team-a'), '127.0.0.1');
  });
});
