/**
 * The emulator tells the truth about GCE's limits, through the real
 * `@google-cloud/compute` client: per-minute API rate quotas per project (403
 * rateLimitExceeded), request counts per project and method, the metadata and label
 * limits of an insert, and VM time limits (maxRunDuration / terminationTime).
 */
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InstancesClient, ZoneOperationsClient, ZonesClient, type protos } from '@google-cloud/compute';
import { DEFAULT_OPERATIONS_KEPT, Operations } from '../../emulator/operations';
import { OperationStatus, type EmulatorState } from '../../emulator/types';
import { groupAlive } from '../../emulator/vm-process';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

type IInstance = protos.google.cloud.compute.v1.IInstance;

const PROJECT = 'limits-test';
const ZONE = 'us-central1-a';
const OTHER_REGION_ZONE = 'us-east1-b';

/** google-gax 6's error: `httpStatusCode` is what GCE answered (`code` is the gRPC code it maps to). */
interface ClientError {
  httpStatusCode?: number;
  message?: string;
}

/** The GCE error JSON as the REST client received it (google-gax 6 keeps the body under this global symbol). */
function gceError(err: unknown): { code: number; message: string; errors: { reason: string; domain: string }[]; details?: { '@type': string; reason?: string; metadata?: Record<string, string> }[] } {
  const raw = (err as Record<symbol, unknown>)[Symbol.for('google-gax.rawHttpResponsePayload')];
  return (JSON.parse(typeof raw === 'string' ? raw : '{}') as { error: ReturnType<typeof gceError> }).error;
}

async function rejection(call: Promise<unknown>): Promise<ClientError> {
  try {
    await call;
  } catch (err) {
    return err as ClientError;
  }
  throw new Error('expected the call to be refused');
}

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function vm(name: string, extra: Partial<IInstance> = {}): IInstance {
  return { name, machineType: `zones/${ZONE}/machineTypes/e2-standard-2`, disks: [{ boot: true, initializeParams: { sourceImage: 'img' } }], ...extra };
}

async function insertAndWait(emu: TestEmulator, resource: IInstance, zone = ZONE, project = PROJECT) {
  const [lro] = await new InstancesClient(emu.clientOptions).insert({ project, zone, instanceResource: resource });
  const ops = new ZoneOperationsClient(emu.clientOptions);
  for (;;) {
    const [op] = await ops.wait({ project, zone, operation: lro.latestResponse.name as string });
    if (op.status === 'DONE') return op;
  }
}

describe('GCE emulator: API rate quotas', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  let instances: InstancesClient;
  const get = (instance: string, zone = ZONE, project = PROJECT) => instances.get({ project, zone, instance });
  before(async () => {
    // An hour-long interval: nothing refills during a test unless it asks for it.
    emu = await startTestEmulator({ timeFactor: 20, rateQuotas: { windowSeconds: 3600, limits: { read_requests_per_region: 3 } } });
    instances = new InstancesClient(emu.clientOptions);
  });
  after(async () => emu?.stop());

  it("starts at GCE's published default of 1,500 requests per minute in every group", async () => {
    const fresh = await startTestEmulator();
    try {
      const view = await fresh.admin.rateQuotas();
      assert.equal(view.enabled, true);
      assert.equal(view.windowSeconds, 60);
      assert.deepEqual([...new Set(view.groups.map((g) => g.limit))], [1500]);
      const byMethod = Object.fromEntries(view.groups.flatMap((g) => g.methods.map((m) => [m, g.metric])));
      assert.equal(byMethod['compute.instances.get'], 'compute.googleapis.com/read_requests_per_region');
      assert.equal(byMethod['compute.instances.getGuestAttributes'], 'compute.googleapis.com/default_per_region');
      assert.equal(byMethod['compute.zoneOperations.wait'], 'compute.googleapis.com/heavy_weight_read_requests_per_region');
      assert.equal(byMethod['compute.instances.aggregatedList'], 'compute.googleapis.com/heavy_weight_read_requests');
    } finally {
      await fresh.stop();
    }
  });

  it('answers 403 rateLimitExceeded in GCE error JSON once a group is used up, per project and region', async () => {
    await insertAndWait(emu, vm('vm-quota'));
    for (let n = 0; n < 3; n++) assert.equal((await get('vm-quota'))[0].name, 'vm-quota');
    const refused = await rejection(get('vm-quota'));
    assert.equal(refused.httpStatusCode, 403);
    const error = gceError(refused);
    assert.equal(error.code, 403);
    assert.deepEqual(error.errors.map((e) => [e.reason, e.domain]), [['rateLimitExceeded', 'usageLimits']]);
    assert.match(error.message, /^Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute per region' of service 'compute.googleapis.com'/);
    const info = error.details?.find((d) => d['@type'] === 'type.googleapis.com/google.rpc.ErrorInfo');
    assert.deepEqual(info?.reason, 'RATE_LIMIT_EXCEEDED');
    assert.deepEqual([info?.metadata?.quota_metric, info?.metadata?.quota_limit_value, info?.metadata?.quota_location], ['compute.googleapis.com/read_requests_per_region', '3', 'us-central1']);

    // Other groups, other regions and other projects have their own quota.
    const [attrs] = await instances.getGuestAttributes({ project: PROJECT, zone: ZONE, instance: 'vm-quota', queryPath: 'sterna/' }).catch((err: ClientError) => [err]);
    assert.notEqual((attrs as ClientError).httpStatusCode, 403, 'getGuestAttributes counts as a Query, not a read');
    assert.equal((await rejection(get('nope', OTHER_REGION_ZONE))).httpStatusCode, 404, 'us-east1 has its own read quota');
    assert.equal((await rejection(get('nope', ZONE, 'another-project'))).httpStatusCode, 404, 'another project has its own quota');
    const [zones] = await new ZonesClient(emu.clientOptions).list({ project: PROJECT });
    assert.ok(zones.length > 0, 'global list requests are a separate group');

    const usage = (await emu.admin.rateQuotas(PROJECT)).usage.find((u) => u.group === 'read_requests_per_region' && u.location === 'us-central1');
    assert.deepEqual([usage?.used, usage?.limit], [3, 3], 'the refused call used no quota');
  });

  it('changes limits at runtime, for all projects or one, and refills at the next interval', async () => {
    await emu.admin.setRateQuotas({ limits: { read_requests_per_region: 5 } });
    assert.equal((await get('vm-quota'))[0].name, 'vm-quota', 'a higher limit takes effect at once');
    await emu.admin.setRateQuotas({ project: 'strict-project', limits: { 'compute.googleapis.com/read_requests_per_region': 0 } });
    assert.equal((await rejection(get('nope', ZONE, 'strict-project'))).httpStatusCode, 403);
    assert.equal((await rejection(get('nope', ZONE, 'lenient-project'))).httpStatusCode, 404);

    // A short interval: the quota refills at the start of the next one, as GCE's does.
    await emu.admin.setRateQuotas({ windowSeconds: 5, limits: { read_requests_per_region: 2 } });
    await get('vm-quota');
    await get('vm-quota');
    // Read before the refused call: google-gax 6 spends about a second decoding a refusal's
    // error details (a protobuf Root per error), by which time this window may have ended.
    const refillAt = Date.parse((await emu.admin.rateQuotas(PROJECT)).usage.find((u) => u.group === 'read_requests_per_region')!.refillAt);
    assert.equal((await rejection(get('vm-quota'))).httpStatusCode, 403);
    await new Promise((r) => setTimeout(r, Math.max(0, refillAt - Date.now()) + 20));
    assert.equal((await get('vm-quota'))[0].name, 'vm-quota');

    await emu.admin.setRateQuotas({ enabled: false });
    for (let n = 0; n < 5; n++) await get('vm-quota');
    await emu.admin.setRateQuotas({ enabled: true, windowSeconds: 3600, limits: { read_requests_per_region: null } });
    const view = await emu.admin.rateQuotas();
    assert.equal(view.groups.find((g) => g.id === 'read_requests_per_region')?.limit, 1500, 'null restores the default');
    await assert.rejects(emu.admin.setRateQuotas({ limits: { no_such_group: 1 } }), /Unknown rate quota group 'no_such_group'/);
  });

  it('counts every call by project and GCE method, refused ones included, and resets', async () => {
    await emu.admin.setRateQuotas({ windowSeconds: 3600, limits: { read_requests_per_region: 2 } });
    await emu.admin.resetApiUsage();
    const project = 'counted-project';
    await insertAndWait(emu, vm('vm-counted'), ZONE, project);
    await get('vm-counted', ZONE, project);
    await get('vm-counted', ZONE, project);
    await rejection(get('vm-counted', ZONE, project));
    await rejection(instances.getGuestAttributes({ project, zone: ZONE, instance: 'vm-counted', queryPath: 'sterna/' }));
    for await (const _ of instances.aggregatedListAsync({ project })) void _;
    await rejection(instances.get({ project, zone: ZONE, instance: 'Not_A_Name' }));

    const usage = await emu.admin.apiUsage(project);
    assert.equal(usage.projects.length, 1);
    const { methods, totals } = usage.projects[0];
    const waits = methods['compute.zoneOperations.wait'].calls;
    assert.ok(waits >= 1);
    assert.deepEqual(methods, {
      'compute.instances.insert': { calls: 1, rateLimited: 0, errors: 0 },
      'compute.zoneOperations.wait': { calls: waits, rateLimited: 0, errors: 0 },
      // Two served, one refused by the quota, one 400 for the bad name (refused too: the quota was used up).
      'compute.instances.get': { calls: 4, rateLimited: 2, errors: 0 },
      'compute.instances.getGuestAttributes': { calls: 1, rateLimited: 0, errors: 1 },
      'compute.instances.aggregatedList': { calls: 1, rateLimited: 0, errors: 0 },
    });
    assert.deepEqual(totals, { calls: 7 + waits, rateLimited: 2, errors: 1 });
    assert.ok(usage.elapsedSeconds > 0 && Date.parse(usage.now) >= Date.parse(usage.since));

    const cleared = await emu.admin.resetApiUsage();
    assert.deepEqual(cleared.projects, []);
    await rejection(instances.get({ project, zone: ZONE, instance: 'vm-counted' }));
    assert.deepEqual((await emu.admin.apiUsage()).projects.map((p) => [p.project, p.totals]), [[project, { calls: 1, rateLimited: 1, errors: 0 }]]);
  });
});

describe('GCE emulator: metadata and label limits', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  let instances: InstancesClient;
  before(async () => {
    emu = await startTestEmulator({ timeFactor: 20 });
    instances = new InstancesClient(emu.clientOptions);
  });
  after(async () => emu?.stop());

  const insert = (resource: IInstance) => instances.insert({ project: PROJECT, zone: ZONE, instanceResource: resource });
  const metadata = (...items: [string, string][]) => ({ metadata: { items: items.map(([key, value]) => ({ key, value })) } });

  async function refusedWith400(resource: IInstance, field: RegExp): Promise<void> {
    const err = await rejection(insert(resource));
    assert.equal(err.httpStatusCode, 400, err.message);
    const error = gceError(err);
    assert.equal(error.errors[0].reason, 'invalid');
    assert.match(error.message, field);
  }

  it("refuses metadata over GCE's limits with a 400 that names the field, and accepts it at the limits", async () => {
    const kib = (n: number) => 'x'.repeat(n * 1024);
    await refusedWith400(vm('vm-md-key', metadata(['k'.repeat(128), 'v'])), /resource\.metadata\.items\[0\]\.key.*less than 128 bytes/);
    await refusedWith400(vm('vm-md-charset', metadata(['ok', 'v'], ['bad.key', 'v'])), /resource\.metadata\.items\[1\]\.key/);
    await refusedWith400(vm('vm-md-value', metadata(['startup-script', 'true'], ['big', `${kib(256)}x`])), /resource\.metadata\.items\[1\]\.value.*262144 bytes/);
    await refusedWith400(vm('vm-md-total', metadata(['a', kib(256)], ['b', kib(256)])), /resource\.metadata'.*less than 524288 bytes/);
    // At the limits: a 127-byte key, a 256 KiB value, and less than 512 KiB in all.
    const [op] = await insert(vm('vm-md-ok', metadata(['k'.repeat(127), 'v'], ['a', kib(256)], ['b', kib(200)])));
    assert.ok(op.latestResponse.name);
    const instance = await until('vm-md-ok', async () => {
      try {
        return (await instances.get({ project: PROJECT, zone: ZONE, instance: 'vm-md-ok' }))[0];
      } catch {
        return undefined;
      }
    });
    assert.equal(instance.metadata?.items?.find((i) => i.key === 'a')?.value?.length, 256 * 1024);
  });

  it('refuses more than 64 labels and malformed label keys, and accepts 64', async () => {
    const labels = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, `v${i}`]));
    await refusedWith400(vm('vm-labels-65', { labels: labels(65) }), /resource\.labels.*At most 64 labels/);
    await refusedWith400(vm('vm-labels-key', { labels: { '1starts-with-digit': 'x' } }), /resource\.labels/);
    await refusedWith400(vm('vm-labels-long', { labels: { ['k'.repeat(64)]: 'x' } }), /resource\.labels/);
    await refusedWith400(vm('vm-labels-value', { labels: { k: 'UPPER' } }), /resource\.labels/);
    const [op] = await insert(vm('vm-labels-64', { labels: labels(64) }));
    assert.ok(op.latestResponse.name);
  });
});

describe('GCE emulator: VM time limits', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  let instances: InstancesClient;
  let operations: ZoneOperationsClient;
  before(async () => {
    // 20x: a 60 s maxRunDuration lasts 3 s, the 30 s stop grace 1.5 s.
    emu = await startTestEmulator({ timeFactor: 20 });
    instances = new InstancesClient(emu.clientOptions);
    operations = new ZoneOperationsClient(emu.clientOptions);
  });
  after(async () => emu?.stop());

  /** A guest that notes SIGTERM and keeps running, so the VM's stop follows GCE's sequence. */
  const guest = 'trap "date +%s%N > term" TERM; while true; do sleep 0.05; done';
  const spotWithLimit = (name: string, scheduling: protos.google.cloud.compute.v1.IScheduling): IInstance =>
    vm(name, {
      scheduling: { provisioningModel: 'SPOT', onHostMaintenance: 'TERMINATE', automaticRestart: false, ...scheduling },
      metadata: { items: [{ key: 'startup-script', value: guest }] },
    });
  const timeLimitOps = async (name: string) => {
    const [ops] = await operations.list({ project: PROJECT, zone: ZONE, filter: `targetLink = "https://www.googleapis.com/compute/v1/projects/${PROJECT}/zones/${ZONE}/instances/${name}"` });
    return ops.filter((o) => o.user === 'system').map((o) => [o.operationType, o.status, o.statusMessage?.includes('time limit')]);
  };

  it('deletes a VM when its maxRunDuration ends, with instanceTerminationAction DELETE, as a system operation', async () => {
    const op = await insertAndWait(emu, spotWithLimit('vm-mrd', { maxRunDuration: { seconds: 60 }, instanceTerminationAction: 'DELETE' }));
    assert.equal(op.error ?? undefined, undefined);
    const [running] = await instances.get({ project: PROJECT, zone: ZONE, instance: 'vm-mrd' });
    assert.deepEqual([running.status, running.scheduling?.maxRunDuration?.seconds, running.scheduling?.instanceTerminationAction], ['RUNNING', '60', 'DELETE']);
    const view = (await emu.instances()).find((i) => i.name === 'vm-mrd')!;
    const limitMs = Date.parse(view.terminationTimestamp!) - Date.parse(running.lastStartTimestamp!);
    assert.ok(Math.abs(limitMs - 3000) < 50, `the limit counts 60 emulated seconds from RUNNING (${limitMs} ms)`);

    await until('the VM deleted', async () => ((await emu.instances()).some((i) => i.name === 'vm-mrd') ? undefined : true), 15_000);
    assert.ok(existsSync(join(view.dir, 'term')), 'the guest got SIGTERM before it was deleted');
    assert.equal(groupAlive(view.pgid), false);
    assert.deepEqual(await timeLimitOps('vm-mrd'), [['delete', 'DONE', true]]);
    const [bill] = (await emu.billing(PROJECT)).filter((b) => b.name === 'vm-mrd');
    assert.equal(bill.open, false);
    assert.ok(bill.emulatedRunningSeconds >= 60 && bill.emulatedRunningSeconds < 60 + 30 + 5, `${bill.emulatedRunningSeconds} s billed: the limit plus at most the stop grace`);
  });

  it('stops a VM at its terminationTime (STOP is the default action): TERMINATED, with a stop operation', async () => {
    const at = new Date(Date.now() + 2500).toISOString(); // 50 emulated seconds ahead
    await insertAndWait(emu, spotWithLimit('vm-tt', { terminationTime: at }));
    const [running] = await instances.get({ project: PROJECT, zone: ZONE, instance: 'vm-tt' });
    assert.equal(running.scheduling?.instanceTerminationAction, 'STOP');
    const stopped = await until('TERMINATED', async () => {
      const [i] = await instances.get({ project: PROJECT, zone: ZONE, instance: 'vm-tt' });
      return i.status === 'TERMINATED' ? i : undefined;
    });
    const dir = (await emu.instances()).find((i) => i.name === 'vm-tt')!.dir;
    const termMs = Number(readFileSync(join(dir, 'term'), 'utf8').trim()) / 1e6;
    assert.ok(termMs >= Date.parse(at) - 5 && termMs - Date.parse(at) < 500, `SIGTERM at the termination time (${termMs - Date.parse(at)} ms after it)`);
    assert.ok(Date.parse(stopped.lastStopTimestamp!) >= Date.parse(at));
    assert.equal(stopped.statusMessage ?? undefined, undefined, 'not a preemption');
    assert.deepEqual(await timeLimitOps('vm-tt'), [['stop', 'DONE', true]]);
    assert.equal((await emu.instances()).find((i) => i.name === 'vm-tt')?.terminationTimestamp, undefined, 'a stopped VM has no termination timestamp');
  });

  it('takes no time-limit action on a VM that stopped before its limit', async () => {
    await insertAndWait(emu, spotWithLimit('vm-early', { maxRunDuration: { seconds: 60 }, instanceTerminationAction: 'STOP' }));
    await emu.preempt(ZONE, 'vm-early');
    await until('TERMINATED', async () => ((await instances.get({ project: PROJECT, zone: ZONE, instance: 'vm-early' }))[0].status === 'TERMINATED' ? true : undefined));
    await new Promise((r) => setTimeout(r, 3500));
    const [still] = await instances.get({ project: PROJECT, zone: ZONE, instance: 'vm-early' });
    assert.equal(still.status, 'TERMINATED', 'preempted, and left alone by its time limit since');
    assert.deepEqual((await timeLimitOps('vm-early')).map(([type]) => type), ['compute.instances.preempted']);
  });

  it('refuses time limits GCE refuses, with a 400 naming the field', async () => {
    const refused = async (scheduling: protos.google.cloud.compute.v1.IScheduling, message: RegExp) => {
      const err = await rejection(instances.insert({ project: PROJECT, zone: ZONE, instanceResource: spotWithLimit('vm-bad-limit', scheduling) }));
      assert.equal(err.httpStatusCode, 400, err.message);
      assert.match(gceError(err).message, message);
    };
    await refused({ maxRunDuration: { seconds: 60 }, terminationTime: new Date(Date.now() + 60_000).toISOString() }, /Only one of scheduling\.maxRunDuration and scheduling\.terminationTime/);
    await refused({ maxRunDuration: { seconds: 29 } }, /resource\.scheduling\.maxRunDuration.*between 30 seconds and 120 days/);
    await refused({ maxRunDuration: { seconds: 120 * 86400 + 1 } }, /resource\.scheduling\.maxRunDuration/);
    await refused({ terminationTime: new Date(Date.now() - 1000).toISOString() }, /resource\.scheduling\.terminationTime.*between 30 seconds and 120 days from now/);
    await refused({ terminationTime: 'tomorrow' }, /resource\.scheduling\.terminationTime.*RFC 3339/);
    await refused({ maxRunDuration: { seconds: 60 }, instanceTerminationAction: 'SUSPEND' }, /instanceTerminationAction/);
    const legacy = vm('vm-legacy', { scheduling: { preemptible: true, maxRunDuration: { seconds: 60 } } });
    const err = await rejection(instances.insert({ project: PROJECT, zone: ZONE, instanceResource: legacy }));
    assert.match(gceError(err).message, /not supported for legacy preemptible VMs/);
  });
});

describe('GCE emulator: operations kept', () => {
  const state = () => ({ operations: [] }) as unknown as EmulatorState;
  const create = (ops: Operations, i: number) => ops.create({ project: PROJECT, zone: ZONE, type: 'insert', targetLink: `${ZONE}/instances/vm-${i}`, targetId: String(i), nowMs: i });

  it('keeps the newest completed operations up to its limit, dropping the oldest first, and never one still running', () => {
    const s = state();
    const ops = new Operations(s, () => undefined, 3);
    const running = create(ops, 0);
    for (let i = 1; i <= 5; i++) ops.finish(create(ops, i), i);
    assert.deepEqual(
      s.operations.map((o) => o.targetId),
      ['0', '4', '5'],
      'the running one stays; of the completed, the newest',
    );
    assert.equal(running.status, OperationStatus.Running);
  });

  it(`keeps ${DEFAULT_OPERATIONS_KEPT} by default`, () => {
    const s = state();
    const ops = new Operations(s, () => undefined);
    for (let i = 0; i < DEFAULT_OPERATIONS_KEPT + 10; i++) ops.finish(create(ops, i), i);
    assert.equal(s.operations.length, DEFAULT_OPERATIONS_KEPT);
    assert.equal(s.operations[0].targetId, '10');
  });
});
