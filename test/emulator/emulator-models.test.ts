/**
 * The emulator's models: trace replay and the seeded random spot model, injected API
 * faults, GCE list filters and the catalog's lookups.
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AcceleratorTypesClient, InstancesClient, ZoneOperationsClient, ZonesClient, type protos } from '@google-cloud/compute';
import { hasBuiltInAccelerators, machineTypeFor, pricePerHour, quotaMetric, zonesWith } from '../../config/catalog';
import { compileFilter } from '../../emulator/filter';
import { SPOT_PRICE_DIVISOR } from '../../emulator/spot-trace';
import { gceZoneName } from '../../emulator/trace';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';
import { computeClients } from '../../activities/providers/gce-clients';

type IInstance = protos.google.cloud.compute.v1.IInstance;

const PROJECT = 'models-test';
const TRACE = join(__dirname, '..', '..', '..', '..', 'shared', 'traces', 'aws-gpu-2zone-2022-10.json');

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function insertAndWait(emu: TestEmulator, zone: string, resource: IInstance) {
  const [lro] = await new InstancesClient(emu.clientOptions).insert({ project: PROJECT, zone, instanceResource: resource });
  const ops = new ZoneOperationsClient(emu.clientOptions);
  for (;;) {
    const [op] = await ops.wait({ project: PROJECT, zone, operation: lro.latestResponse.name as string });
    if (op.status === 'DONE') return op;
  }
}

function spot(name: string, machineType: string, zone: string, accelerators?: { type: string; count: number }): IInstance {
  return {
    name,
    machineType: `zones/${zone}/machineTypes/${machineType}`,
    guestAccelerators: accelerators ? [{ acceleratorType: `zones/${zone}/acceleratorTypes/${accelerators.type}`, acceleratorCount: accelerators.count }] : [],
    scheduling: { provisioningModel: 'SPOT', onHostMaintenance: 'TERMINATE', automaticRestart: false, instanceTerminationAction: 'STOP' },
    metadata: { items: [{ key: 'startup-script', value: 'sleep 600' }] },
  };
}

describe('GCE emulator: trace replay', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  after(async () => emu?.stop());

  it('offers the trace accelerator in the trace zones, refuses spot where the bit is 0, and preempts when it turns 0', async () => {
    const raw = JSON.parse(readFileSync(TRACE, 'utf8')) as { zones: { zone: string; accelerator: string; acceleratorCount: number; available: string; onDemandPrice: number }[] };
    const entry = raw.zones.find((z) => z.zone === 'us-west-2a' && z.accelerator === 'V100' && z.acceleratorCount === 1)!;
    // Six ticks with spot capacity, then three without; 1200x makes a 600 s tick last 0.5 s.
    const start = entry.available.indexOf('0111111000') + 1;
    emu = await startTestEmulator({ trace: TRACE, traceStartTick: start, timeFactor: 1200 });
    const zone = gceZoneName('us-west-2a');
    assert.equal(zone, 'us-west-2-a');

    const [zones] = await new ZonesClient(emu.clientOptions).list({ project: PROJECT });
    assert.ok(zones.some((z) => z.name === 'us-west-2-a' && z.region?.endsWith('/regions/us-west-2')));
    const v100Zones: string[] = [];
    for await (const [scope, list] of new AcceleratorTypesClient(emu.clientOptions).aggregatedListAsync({ project: PROJECT })) {
      if ((list.acceleratorTypes ?? []).some((a) => a.name === 'nvidia-tesla-v100')) v100Zones.push(scope.replace(/^zones\//, ''));
    }
    assert.deepEqual(v100Zones.sort(), ['us-west-2-a', 'us-west-2-b'], 'V100 lives only in the trace zones');

    const v100 = { type: 'nvidia-tesla-v100', count: 1 };
    const machineType = machineTypeFor('nvidia-tesla-v100', 1)!;
    const op = await insertAndWait(emu, zone, spot('vm-trace', machineType, zone, v100));
    assert.equal(op.error ?? undefined, undefined);

    const instances = new InstancesClient(emu.clientOptions);
    const stopped = await until('the trace preemption', async () => {
      const [i] = await instances.get({ project: PROJECT, zone, instance: 'vm-trace' });
      return i.status === 'TERMINATED' ? i : undefined;
    });
    assert.equal(stopped.statusMessage, 'Instance was preempted.');
    const [ops] = await new ZoneOperationsClient(emu.clientOptions).list({ project: PROJECT, zone, filter: 'operationType = "compute.instances.preempted"' });
    assert.equal(ops.length, 1);

    const refused = await insertAndWait(emu, zone, spot('vm-trace-2', machineType, zone, v100));
    assert.deepEqual(refused.error?.errors?.map((e) => e.code), ['ZONE_RESOURCE_POOL_EXHAUSTED']);

    const [bill] = await emu.billing(PROJECT);
    assert.ok(Math.abs(bill.pricePerHour - entry.onDemandPrice / SPOT_PRICE_DIVISOR) < 1e-9, 'the trace price (on-demand / 3.1446 without a spot series)');
    // About six 600 s ticks of emulated time: a realistic hour of V100 spot.
    assert.ok(bill.emulatedRunningSeconds > 1800 && bill.emulatedRunningSeconds < 4200, `${bill.emulatedRunningSeconds} emulated seconds`);
  });
});

describe('GCE emulator: random spot model', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  after(async () => emu?.stop());

  it('preempts spot VMs at the seeded rate and never standard ones', async () => {
    // 3600 preemptions per emulated hour at 60x: a spot VM lasts about one model step (1 s real).
    emu = await startTestEmulator({ timeFactor: 60, seed: 7, spot: { preemptionsPerHour: 3600 } });
    const zone = 'us-central1-b';
    await insertAndWait(emu, zone, spot('vm-spot', 'e2-standard-2', zone));
    await insertAndWait(emu, zone, { ...spot('vm-standard', 'e2-standard-2', zone), scheduling: { provisioningModel: 'STANDARD' } });
    await until('the random preemption', async () => ((await emu.instances()).find((i) => i.name === 'vm-spot')?.status === 'TERMINATED' ? true : undefined));
    const standard = (await emu.instances()).find((i) => i.name === 'vm-standard')!;
    assert.equal(standard.status, 'RUNNING');
    assert.equal(standard.preempted, false);
  });
});

describe('GCE emulator: injected faults', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  before(async () => (emu = await startTestEmulator({})));
  after(async () => emu?.stop());

  it('answers a share of calls with 503/429 in GCE error JSON, or hangs first', async () => {
    const url = `${emu.endpoint}/compute/v1/projects/${PROJECT}/zones`;
    await emu.admin.injectFault({ fraction: 1, status: 503, count: 2, path: '/zones$' });
    for (const _ of [1, 2]) {
      const res = await fetch(url);
      assert.equal(res.status, 503);
      const body = (await res.json()) as { error: { code: number; errors: { reason: string }[] } };
      assert.equal(body.error.code, 503);
      assert.equal(body.error.errors[0].reason, 'backendError');
    }
    assert.equal((await fetch(url)).status, 200, 'the rule retired after two hits');

    // The 7.x REST client (google-gax 6) maps the 503 to UNAVAILABLE and retries an
    // idempotent call itself: the list answers after the fault.
    await emu.admin.injectFault({ fraction: 1, status: 503, count: 1, path: '/zones$' });
    const [listed] = await new ZonesClient(emu.clientOptions).list({ project: PROJECT });
    assert.ok(listed.length > 0);
    // Sterna's clients leave retrying to the caller (transient.ts, then Temporal's retry
    // policy): they surface the 503.
    await emu.admin.injectFault({ fraction: 1, status: 503, count: 1, path: '/zones$' });
    const zonesClient = computeClients(emu.clientOptions).zones;
    await assert.rejects(zonesClient.list({ project: PROJECT }), (err: { httpStatusCode?: number; code?: number }) => err.httpStatusCode === 503 && err.code === 14);
    const [zones] = await zonesClient.list({ project: PROJECT });
    assert.ok(zones.length > 0);

    await emu.admin.injectFault({ fraction: 1, status: 429, hangMs: 300, count: 1 });
    const t0 = Date.now();
    const limited = await fetch(url);
    assert.equal(limited.status, 429);
    assert.ok(Date.now() - t0 >= 290);
    assert.equal(((await limited.json()) as { error: { errors: { reason: string }[] } }).error.errors[0].reason, 'rateLimitExceeded');

    await emu.admin.injectFault({ fraction: 0.5, status: 503 });
    const statuses = await Promise.all(Array.from({ length: 40 }, () => fetch(url).then((r) => r.status)));
    const failed = statuses.filter((s) => s === 503).length;
    assert.ok(failed > 5 && failed < 35, `${failed} of 40 failed at fraction 0.5`);
    await emu.admin.clearFaults();
    assert.equal((await fetch(url)).status, 200);
    assert.equal((await fetch(`${emu.endpoint}/emulator/v1/health`)).status, 200);
  });
});

describe('GCE list filters', () => {
  const vm = { name: 'vm-1', status: 'RUNNING', zone: 'https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a', labels: { 'sterna-run': 'r-1', team: 'ml' }, scheduling: { preemptible: true } };
  const cases: [string, boolean][] = [
    ['labels.sterna-run = "r-1"', true],
    ['labels.sterna-run = r-2', false],
    ['labels.sterna-run != "r-2"', true],
    ['(labels.team = "ml") AND (status = "RUNNING")', true],
    ['(labels.team = "ml") AND (status = "TERMINATED")', false],
    ['status = "TERMINATED" OR name = vm-1', true],
    ['NOT status = RUNNING', false],
    ['-status = RUNNING', false],
    ['(labels.team = ml) (name = "vm-*")', true],
    ['zone = "us-central1-a"', true],
    ['scheduling.preemptible = true', true],
    ['labels.missing:*', false],
    ['labels.team:*', true],
    ['name eq vm-.*', true],
    ['name ne vm-.*', false],
    ['', true],
  ];
  for (const [filter, expected] of cases) {
    it(`${filter || '(empty)'} -> ${expected}`, () => assert.equal(compileFilter(filter)(vm), expected));
  }
  it('refuses what it cannot parse with a GCE 400', () => {
    for (const bad of ['(((', 'name =', '= x', 'name = "open']) assert.throws(() => compileFilter(bad), (err: { status?: number }) => err.status === 400);
  });
});

describe('GPU catalog', () => {
  it('picks machine types as GCE shapes them', () => {
    assert.equal(machineTypeFor('nvidia-l4', 1), 'g2-standard-4');
    assert.equal(machineTypeFor('nvidia-l4', 4), 'g2-standard-48');
    assert.equal(machineTypeFor('nvidia-tesla-a100', 1), 'a2-highgpu-1g');
    assert.equal(machineTypeFor('nvidia-h100-80gb', 8), 'a3-highgpu-8g');
    assert.equal(machineTypeFor('nvidia-tesla-t4', 1), 'n1-standard-4');
    assert.equal(machineTypeFor('nvidia-tesla-t4', 3), undefined);
    assert.equal(hasBuiltInAccelerators('a2-highgpu-1g'), true);
    assert.equal(hasBuiltInAccelerators('n1-standard-4'), false);
    assert.equal(quotaMetric('nvidia-h100-80gb'), 'NVIDIA_H100_GPUS');
    assert.ok(zonesWith('nvidia-l4').includes('us-central1-a'));
  });

  it('prices whole instances per region, spot below on-demand', () => {
    const q = { machineType: 'g2-standard-4', accelerator: 'nvidia-l4', count: 1 };
    const onDemand = pricePerHour({ ...q, region: 'us-central1', spot: false })!;
    const spotPrice = pricePerHour({ ...q, region: 'us-central1', spot: true })!;
    assert.ok(spotPrice > 0 && spotPrice < onDemand);
    assert.ok(pricePerHour({ ...q, region: 'europe-west4', spot: false })! > onDemand);
    assert.equal(pricePerHour({ ...q, region: 'mars-north1', spot: false }), undefined);
    assert.equal(pricePerHour({ ...q, count: 2, region: 'us-central1', spot: false }), undefined, 'g2-standard-4 has one L4');
    const t4 = pricePerHour({ machineType: 'n1-standard-4', accelerator: 'nvidia-tesla-t4', count: 1, region: 'us-central1', spot: false })!;
    assert.ok(Math.abs(t4 - (0.189998 + 0.35)) < 0.001, `n1-standard-4 + T4 = ${t4}`);
  });
});
