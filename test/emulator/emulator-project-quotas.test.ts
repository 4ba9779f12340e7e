/**
 * GCE's GPU quotas in the emulator, read through Google's own `@google-cloud/compute`
 * clients: the project-wide GPUS_ALL_REGIONS (`projects.get`), 0 on a new project and
 * enforced on every GPU insert whatever its region or model, its usage following the
 * project's GPUs; and the regional rule for spot VMs (PREEMPTIBLE_* metrics, the standard
 * metric where the region has no preemptible quota).
 */
import { strict as assert } from 'node:assert';
import { InstancesClient, ProjectsClient, RegionsClient, ZoneOperationsClient, type protos } from '@google-cloud/compute';
import { computeClients, type ComputeClients } from '../../activities/providers/gce-clients';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

type IInstance = protos.google.cloud.compute.v1.IInstance;
type IOperation = protos.google.cloud.compute.v1.IOperation;

const PROJECT = 'quota-test';

function l4(name: string, zone: string, model: 'SPOT' | 'STANDARD' = 'SPOT'): IInstance {
  return {
    name,
    machineType: `zones/${zone}/machineTypes/g2-standard-4`,
    scheduling: { provisioningModel: model, onHostMaintenance: 'TERMINATE', automaticRestart: false },
    disks: [{ boot: true, initializeParams: { sourceImage: 'img' } }],
  };
}

describe('GCE emulator: project-wide and regional GPU quotas (stock ProjectsClient and RegionsClient)', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  let projects: ProjectsClient;
  let regions: RegionsClient;
  let instances: InstancesClient;
  let operations: ZoneOperationsClient;
  let cut: ComputeClients;

  before(async () => {
    // A new GCP project: GPUS_ALL_REGIONS is 0, the emulator's own default.
    emu = await startTestEmulator({ timeFactor: 20, gpusAllRegions: 0 });
    projects = new ProjectsClient(emu.clientOptions);
    regions = new RegionsClient(emu.clientOptions);
    instances = new InstancesClient(emu.clientOptions);
    operations = new ZoneOperationsClient(emu.clientOptions);
    cut = computeClients(emu.clientOptions);
  });
  after(async () => {
    await Promise.all([projects, regions, instances, operations, ...Object.values(cut ?? {})].map((c) => c?.close()));
    await emu?.stop();
  });

  async function insert(resource: IInstance, zone: string, project = PROJECT): Promise<IOperation> {
    const [lro] = await instances.insert({ project, zone, instanceResource: resource });
    for (;;) {
      const [op] = await operations.wait({ project, zone, operation: lro.latestResponse.name as string });
      if (op.status === 'DONE') return op;
    }
  }

  async function remove(name: string, zone: string): Promise<void> {
    const [lro] = await instances.delete({ project: PROJECT, zone, instance: name });
    for (;;) {
      const [op] = await operations.wait({ project: PROJECT, zone, operation: lro.latestResponse.name as string });
      if (op.status === 'DONE') return;
    }
  }

  async function gpusAllRegions(project = PROJECT): Promise<{ limit: number; usage: number }> {
    const [p] = await projects.get({ project });
    const q = p.quotas?.find((x) => x.metric === 'GPUS_ALL_REGIONS');
    assert.ok(q, `projects.get lists GPUS_ALL_REGIONS: ${JSON.stringify(p.quotas)}`);
    return { limit: q.limit ?? NaN, usage: q.usage ?? NaN };
  }

  async function regional(region: string, metric: string): Promise<{ limit: number; usage: number }> {
    const [r] = await regions.get({ project: PROJECT, region });
    const q = r.quotas?.find((x) => x.metric === metric);
    assert.ok(q, `regions.get lists ${metric}`);
    return { limit: q.limit ?? NaN, usage: q.usage ?? NaN };
  }

  it('serves projects.get as GCE shapes it, to the stock client and to Sterna\'s cut clients alike', async () => {
    const [stock] = await projects.get({ project: PROJECT });
    const [viaCut] = await cut.projects.get({ project: PROJECT });
    assert.deepEqual(viaCut, stock);
    assert.equal(stock.name, PROJECT);
    assert.match(stock.defaultServiceAccount ?? '', /-compute@developer\.gserviceaccount\.com$/);
    assert.deepEqual(await gpusAllRegions(), { limit: 0, usage: 0 });
  });

  it('refuses every GPU VM of a new project with GPUS_ALL_REGIONS exceeded, and creates none', async () => {
    for (const [name, zone, model] of [['spot-new', 'us-central1-a', 'SPOT'], ['std-new', 'europe-west4-a', 'STANDARD']] as const) {
      const op = await insert(l4(name, zone, model), zone);
      assert.deepEqual(op.error?.errors?.map((e) => e.code), ['QUOTA_EXCEEDED'], name);
      assert.match(op.error?.errors?.[0].message ?? '', /Quota 'GPUS_ALL_REGIONS' exceeded\.\s+Limit: 0\.0 globally\./);
      assert.equal(op.httpErrorStatusCode, 403);
      const info = op.error?.errors?.[0].errorDetails?.[0].quotaInfo;
      assert.deepEqual([info?.metricName, info?.limitName, info?.limit], ['compute.googleapis.com/gpus_all_regions', 'GPUS-ALL-REGIONS-per-project', 0]);
      await assert.rejects(instances.get({ project: PROJECT, zone, instance: name }), (err: { httpStatusCode?: number }) => err.httpStatusCode === 404);
    }
    // A VM without GPUs needs no GPU quota.
    const cpu = await insert({ name: 'cpu-only', machineType: 'zones/us-central1-a/machineTypes/e2-standard-2', disks: [{ boot: true }] }, 'us-central1-a');
    assert.equal(cpu.error ?? undefined, undefined);
    assert.deepEqual(await gpusAllRegions(), { limit: 0, usage: 0 });
  });

  it('counts every GPU of the project against GPUS_ALL_REGIONS, across regions and models, until each VM is gone', async () => {
    await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', 2);
    try {
      assert.deepEqual(await gpusAllRegions(), { limit: 2, usage: 0 });
      assert.equal((await insert(l4('g-1', 'us-central1-a', 'SPOT'), 'us-central1-a')).error ?? undefined, undefined);
      assert.equal((await insert(l4('g-2', 'europe-west4-a', 'STANDARD'), 'europe-west4-a')).error ?? undefined, undefined);
      assert.deepEqual(await gpusAllRegions(), { limit: 2, usage: 2 });
      const third = await insert(l4('g-3', 'us-central1-b', 'SPOT'), 'us-central1-b');
      assert.match(third.error?.errors?.[0].message ?? '', /Quota 'GPUS_ALL_REGIONS' exceeded\.\s+Limit: 2\.0 globally\./);
      // Another project has its own quota (the default, 0 here).
      assert.deepEqual(await gpusAllRegions('other-project'), { limit: 0, usage: 0 });
      await remove('g-1', 'us-central1-a');
      assert.deepEqual(await gpusAllRegions(), { limit: 2, usage: 1 });
      assert.equal((await insert(l4('g-3', 'us-central1-b', 'SPOT'), 'us-central1-b')).error ?? undefined, undefined);
      await remove('g-2', 'europe-west4-a');
      await remove('g-3', 'us-central1-b');
      assert.deepEqual(await gpusAllRegions(), { limit: 2, usage: 0 });
    } finally {
      await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', undefined);
    }
    assert.deepEqual(await gpusAllRegions(), { limit: 0, usage: 0 }, 'null restores the default');
  });

  it('charges spot GPUs to PREEMPTIBLE_*, or to the standard metric where the region has no preemptible quota', async () => {
    await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', 8);
    const region = 'us-central1';
    try {
      assert.equal((await insert(l4('p-1', 'us-central1-a'), 'us-central1-a')).error ?? undefined, undefined);
      assert.deepEqual((await regional(region, 'PREEMPTIBLE_NVIDIA_L4_GPUS')).usage, 1);
      assert.deepEqual((await regional(region, 'NVIDIA_L4_GPUS')).usage, 0);

      await emu.setQuota(PROJECT, region, 'PREEMPTIBLE_NVIDIA_L4_GPUS', 0);
      await emu.setQuota(PROJECT, region, 'NVIDIA_L4_GPUS', 1);
      assert.equal((await insert(l4('p-2', 'us-central1-b'), 'us-central1-b')).error ?? undefined, undefined, 'a spot VM uses the standard quota when there is no preemptible one');
      assert.deepEqual(await regional(region, 'NVIDIA_L4_GPUS'), { limit: 1, usage: 1 });
      // The VM charged to the preemptible metric earlier stays charged there.
      assert.deepEqual(await regional(region, 'PREEMPTIBLE_NVIDIA_L4_GPUS'), { limit: 0, usage: 1 });
      const refused = await insert(l4('p-3', 'us-central1-c'), 'us-central1-c');
      assert.match(refused.error?.errors?.[0].message ?? '', /Quota 'NVIDIA_L4_GPUS' exceeded\.\s+Limit: 1\.0 in region us-central1\./);
      const info = refused.error?.errors?.[0].errorDetails?.[0].quotaInfo;
      assert.deepEqual([info?.metricName, info?.limitName, info?.dimensions?.region], ['compute.googleapis.com/nvidia_l4_gpus', 'NVIDIA-L4-GPUS-per-project-region', region]);
      await remove('p-1', 'us-central1-a');
      await remove('p-2', 'us-central1-b');
      assert.deepEqual((await regional(region, 'NVIDIA_L4_GPUS')).usage, 0);
      assert.deepEqual((await gpusAllRegions()).usage, 0);
    } finally {
      await emu.setQuota(PROJECT, region, 'PREEMPTIBLE_NVIDIA_L4_GPUS', undefined);
      await emu.setQuota(PROJECT, region, 'NVIDIA_L4_GPUS', undefined);
      await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', undefined);
    }
  });

  it('refuses an unknown project-wide metric through the admin API, naming the ones it models', async () => {
    await assert.rejects(emu.admin.setProjectQuota(PROJECT, 'CPUS_ALL_REGIONS', 8), /GPUS_ALL_REGIONS/);
  });
});
