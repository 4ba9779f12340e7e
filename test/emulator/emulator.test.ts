/**
 * The GCE emulator through the real `@google-cloud/compute` client (REST, no
 * credentials): VMs with startup scripts and guest attributes, GCE's error codes,
 * preemption as GCE does it, restart with VMs running, and GCE's list filters.
 */
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AcceleratorTypesClient, InstancesClient, MachineTypesClient, RegionsClient, ZoneOperationsClient, ZonesClient, type protos } from '@google-cloud/compute';
import { groupAlive } from '../../emulator/vm-process';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

type IInstance = protos.google.cloud.compute.v1.IInstance;
type IOperation = protos.google.cloud.compute.v1.IOperation;

const PROJECT = 'emulator-test';
const ZONE = 'us-central1-a';

/** A guest-side helper: the metadata server, as a VM script reaches it. */
const MD = 'MD="http://$GCE_METADATA_HOST/computeMetadata/v1"; H="Metadata-Flavor: Google"';

function spotL4(name: string, script: string, extra: Partial<IInstance> = {}): IInstance {
  return {
    name,
    machineType: `zones/${ZONE}/machineTypes/g2-standard-4`,
    labels: { 'sterna-run': 'r-1', purpose: 'emulator-test' },
    scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'STOP', onHostMaintenance: 'TERMINATE', automaticRestart: false },
    metadata: {
      items: [
        { key: 'startup-script', value: script },
        { key: 'enable-guest-attributes', value: 'TRUE' },
      ],
    },
    disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: 'projects/debian-cloud/global/images/family/debian-12', diskSizeGb: '50' } }],
    networkInterfaces: [{ network: 'global/networks/default', accessConfigs: [{ name: 'External NAT', type: 'ONE_TO_ONE_NAT' }] }],
    serviceAccounts: [{ email: 'default', scopes: ['https://www.googleapis.com/auth/cloud-platform'] }],
    ...extra,
  };
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

class Gce {
  readonly instances: InstancesClient;
  readonly operations: ZoneOperationsClient;

  constructor(readonly emu: TestEmulator) {
    this.instances = new InstancesClient(emu.clientOptions);
    this.operations = new ZoneOperationsClient(emu.clientOptions);
  }

  /** insert, then wait on the operation until DONE (as the provider does). */
  async insert(resource: IInstance, zone = ZONE): Promise<IOperation> {
    const [lro] = await this.instances.insert({ project: PROJECT, zone, instanceResource: resource });
    const name = lro.latestResponse.name as string;
    for (;;) {
      const [op] = await this.operations.wait({ project: PROJECT, zone, operation: name });
      if (op.status === 'DONE') return op;
    }
  }

  async get(name: string, zone = ZONE): Promise<IInstance> {
    const [instance] = await this.instances.get({ project: PROJECT, zone, instance: name });
    return instance;
  }

  async delete(name: string, zone = ZONE): Promise<IOperation> {
    const [lro] = await this.instances.delete({ project: PROJECT, zone, instance: name });
    for (;;) {
      const [op] = await this.operations.wait({ project: PROJECT, zone, operation: lro.latestResponse.name as string });
      if (op.status === 'DONE') return op;
    }
  }

  async guestAttributes(name: string, zone = ZONE): Promise<Record<string, string>> {
    try {
      const [attrs] = await this.instances.getGuestAttributes({ project: PROJECT, zone, instance: name, queryPath: 'sterna/' });
      return Object.fromEntries((attrs.queryValue?.items ?? []).map((i) => [i.key ?? '', i.value ?? '']));
    } catch (err) {
      if ((err as { httpStatusCode?: number }).httpStatusCode === 404) return {};
      throw err;
    }
  }
}

describe('GCE emulator', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  let gce: Gce;

  before(async () => {
    // 20x: PROVISIONING + STAGING take 0.25 s, the 30 s preemption notice 1.5 s.
    emu = await startTestEmulator({ timeFactor: 20 });
    gce = new Gce(emu);
  });
  after(async () => emu?.stop());

  it('serves zones, regions with GPU quotas, accelerator types and machine types', async () => {
    const [zones] = await new ZonesClient(emu.clientOptions).list({ project: PROJECT });
    assert.ok(zones.some((z) => z.name === ZONE && z.status === 'UP'));
    const [region] = await new RegionsClient(emu.clientOptions).get({ project: PROJECT, region: 'us-central1' });
    const metrics = (region.quotas ?? []).map((q) => q.metric);
    for (const m of ['NVIDIA_L4_GPUS', 'PREEMPTIBLE_NVIDIA_L4_GPUS', 'NVIDIA_A100_GPUS', 'NVIDIA_H100_GPUS']) assert.ok(metrics.includes(m), m);
    const l4Zones: string[] = [];
    for await (const [scope, list] of new AcceleratorTypesClient(emu.clientOptions).aggregatedListAsync({ project: PROJECT })) {
      if ((list.acceleratorTypes ?? []).some((a) => a.name === 'nvidia-l4')) l4Zones.push(scope.replace(/^zones\//, ''));
    }
    assert.ok(l4Zones.includes(ZONE) && l4Zones.includes('us-central1-b'), l4Zones.join());
    const [types] = await new MachineTypesClient(emu.clientOptions).list({ project: PROJECT, zone: ZONE });
    const a3 = types.find((t) => t.name === 'a3-highgpu-8g');
    assert.deepEqual(a3?.accelerators?.map((a) => [a.guestAcceleratorType, a.guestAcceleratorCount]), [['nvidia-h100-80gb', 8]]);
  });

  it('runs a spot GPU VM whose startup script writes a guest attribute, read back with getGuestAttributes', async () => {
    const script = `#!/bin/bash
${MD}
curl -sf -X PUT -H "$H" --data-binary "hello from $(curl -sf -H "$H" "$MD/instance/name")" "$MD/instance/guest-attributes/sterna/phase"
curl -sf -X PUT -H "$H" --data-binary "$(curl -sf -H "$H" "$MD/instance/attributes/greeting")" "$MD/instance/guest-attributes/sterna/greeting"
`;
    const op = await gce.insert(spotL4('vm-hello', script, { metadata: { items: [...spotL4('x', script).metadata!.items!, { key: 'greeting', value: 'hi there' }] } }));
    assert.equal(op.error ?? undefined, undefined);
    assert.equal(op.operationType, 'insert');
    assert.match(op.targetLink ?? '', /\/projects\/emulator-test\/zones\/us-central1-a\/instances\/vm-hello$/);
    const instance = await gce.get('vm-hello');
    assert.equal(instance.status, 'RUNNING');
    assert.equal(instance.scheduling?.provisioningModel, 'SPOT');
    assert.ok(instance.lastStartTimestamp);
    // Fields the emulator does not model come back as sent (disks as GCE shows them: attached, sized, without initializeParams).
    assert.equal(instance.disks?.[0].diskSizeGb, '50');
    assert.match(instance.disks?.[0].source ?? '', /\/zones\/us-central1-a\/disks\/vm-hello$/);
    assert.equal(instance.serviceAccounts?.[0].scopes?.[0], 'https://www.googleapis.com/auth/cloud-platform');
    const attrs = await until('guest attributes', async () => {
      const a = await gce.guestAttributes('vm-hello');
      return a.greeting ? a : undefined;
    });
    assert.deepEqual(attrs, { phase: 'hello from vm-hello', greeting: 'hi there' });
    const [one] = await gce.instances.getGuestAttributes({ project: PROJECT, zone: ZONE, instance: 'vm-hello', variableKey: 'sterna/phase' });
    assert.equal(one.variableValue, 'hello from vm-hello');
    // The script finished; the VM stays RUNNING (its guest OS is still up), exit code recorded.
    const view = await until('the script exit', async () => (await emu.instances()).find((i) => i.name === 'vm-hello' && i.exitCode !== undefined));
    assert.equal(view.exitCode, 0);
    assert.equal((await gce.get('vm-hello')).status, 'RUNNING');
    assert.equal((await gce.delete('vm-hello')).error ?? undefined, undefined);
  });

  it('reports a stockout and a quota error in the operation, as GCE does', async () => {
    await emu.setSpotCapacity(ZONE, 'nvidia-l4', 0);
    try {
      const op = await gce.insert(spotL4('vm-stockout', 'true'));
      assert.equal(op.status, 'DONE');
      assert.deepEqual(op.error?.errors?.map((e) => e.code), ['ZONE_RESOURCE_POOL_EXHAUSTED']);
      await assert.rejects(gce.get('vm-stockout'), (err: { httpStatusCode?: number }) => err.httpStatusCode === 404);
    } finally {
      await emu.setSpotCapacity(ZONE, 'nvidia-l4', undefined);
    }

    await emu.setQuota(PROJECT, 'us-central1', 'NVIDIA_A100_GPUS', 1);
    try {
      const a100 = (name: string): IInstance => ({
        name,
        machineType: `zones/${ZONE}/machineTypes/a2-highgpu-2g`,
        scheduling: { provisioningModel: 'STANDARD', onHostMaintenance: 'TERMINATE', automaticRestart: false },
        disks: [{ boot: true, initializeParams: { sourceImage: 'img' } }],
      });
      const op = await gce.insert(a100('vm-quota'));
      assert.deepEqual(op.error?.errors?.map((e) => e.code), ['QUOTA_EXCEEDED']);
      assert.match(op.error?.errors?.[0].message ?? '', /Quota 'NVIDIA_A100_GPUS' exceeded\.\s+Limit: 1\.0 in region us-central1/);
      assert.equal(op.httpErrorStatusCode, 403);
      const [region] = await new RegionsClient(emu.clientOptions).get({ project: PROJECT, region: 'us-central1' });
      const quota = region.quotas?.find((q) => q.metric === 'NVIDIA_A100_GPUS');
      assert.deepEqual([quota?.limit, quota?.usage], [1, 0]);
    } finally {
      await emu.setQuota(PROJECT, 'us-central1', 'NVIDIA_A100_GPUS', undefined);
    }
  });

  it('rejects a GPU VM without onHostMaintenance TERMINATE synchronously, as GCE does (400)', async () => {
    // GCE answers the insert itself with 400 "Instances with guest accelerators do not support live migration."
    const standardNoTerminate: IInstance = { name: 'vm-migrate', machineType: `zones/${ZONE}/machineTypes/g2-standard-4`, disks: [{ boot: true }] };
    await assert.rejects(gce.instances.insert({ project: PROJECT, zone: ZONE, instanceResource: standardNoTerminate }), (err: { httpStatusCode?: number; message?: string }) => {
      assert.equal(err.httpStatusCode, 400);
      assert.match(err.message ?? '', /do not support live migration/);
      return true;
    });
    // The same for N1 with attached T4s; with TERMINATE it is accepted.
    const n1t4: IInstance = { name: 'vm-t4', machineType: `zones/${ZONE}/machineTypes/n1-standard-4`, guestAccelerators: [{ acceleratorType: `zones/${ZONE}/acceleratorTypes/nvidia-tesla-t4`, acceleratorCount: 1 }] };
    await assert.rejects(gce.instances.insert({ project: PROJECT, zone: ZONE, instanceResource: n1t4 }), (err: { httpStatusCode?: number }) => err.httpStatusCode === 400);
    const op = await gce.insert({ ...n1t4, scheduling: { onHostMaintenance: 'TERMINATE', automaticRestart: false } });
    assert.equal(op.error ?? undefined, undefined);
    const t4 = await gce.get('vm-t4');
    assert.deepEqual(t4.guestAccelerators?.map((g) => [g.acceleratorType?.split('/').pop(), g.acceleratorCount]), [['nvidia-tesla-t4', 1]]);
    // Duplicate names conflict; unknown instances are not found.
    await assert.rejects(gce.instances.insert({ project: PROJECT, zone: ZONE, instanceResource: { ...n1t4, scheduling: { onHostMaintenance: 'TERMINATE' } } }), (err: { httpStatusCode?: number }) => err.httpStatusCode === 409);
    await gce.delete('vm-t4');
    await assert.rejects(gce.instances.delete({ project: PROJECT, zone: ZONE, instance: 'vm-t4' }), (err: { httpStatusCode?: number }) => err.httpStatusCode === 404);
  });

  it('preempts as GCE does: preempted TRUE, SIGTERM, the notice period, SIGKILL, TERMINATED, a preempted operation', async () => {
    // The guest ignores SIGTERM (a trainer busy writing its checkpoint) and keeps beating.
    const script = `#!/bin/bash
${MD}
on_term() { echo "$(date +%s%N) $(curl -sf -H "$H" "$MD/instance/preempted")" > term; }
trap on_term TERM
# Renamed into place: a SIGKILL between truncating and writing would leave an empty beat.
while true; do date +%s%N > beat.new; mv -f beat.new beat; sleep 0.05; done
`;
    assert.equal((await gce.insert(spotL4('vm-preempt', script))).error ?? undefined, undefined);
    const view = await until('the guest beating', async () => {
      const v = (await emu.instances()).find((i) => i.name === 'vm-preempt');
      return v && existsSync(join(v.dir, 'beat')) ? v : undefined;
    });
    assert.equal(view.processAlive, true);
    const before = await gce.get('vm-preempt');
    const preemptedAt = Date.now();
    await emu.preempt(ZONE, 'vm-preempt');
    assert.equal((await gce.get('vm-preempt')).status, 'STOPPING');

    const terminated = await until('TERMINATED', async () => {
      const i = await gce.get('vm-preempt');
      return i.status === 'TERMINATED' ? i : undefined;
    });
    const [termNs, preemptedFlag] = readFileSync(join(view.dir, 'term'), 'utf8').trim().split(' ');
    assert.equal(preemptedFlag, 'TRUE', 'the guest saw instance/preempted TRUE when SIGTERM arrived');
    const lastBeatNs = Number(readFileSync(join(view.dir, 'beat'), 'utf8').trim());
    const noticeMs = (lastBeatNs - Number(termNs)) / 1e6;
    const expectedMs = (30 / 20) * 1000;
    assert.ok(noticeMs > expectedMs * 0.8 && noticeMs < expectedMs * 1.5, `the guest ran ${noticeMs} ms after SIGTERM (notice ${expectedMs} ms)`);
    assert.ok(Number(termNs) / 1e6 - preemptedAt < 500, 'SIGTERM came right away');
    assert.equal(groupAlive(view.pgid), false, 'SIGKILL took the process group');
    const after = (await emu.instances()).find((i) => i.name === 'vm-preempt')!;
    assert.equal(after.killed, true);
    assert.equal(after.preempted, true);
    assert.equal(terminated.statusMessage, 'Instance was preempted.');

    const [ops] = await gce.operations.list({ project: PROJECT, zone: ZONE, filter: `(operationType = "compute.instances.preempted") AND (targetLink = "${before.selfLink}")` });
    assert.equal(ops.length, 1);
    assert.equal(ops[0].status, 'DONE');
    assert.equal(ops[0].targetId, before.id);

    // Billing: RUNNING until TERMINATED, at the spot price, consistent with the timestamps.
    const [bill] = (await emu.billing(PROJECT)).filter((b) => b.name === 'vm-preempt');
    const seconds = (Date.parse(terminated.lastStopTimestamp!) - Date.parse(terminated.lastStartTimestamp!)) / 1000;
    assert.ok(Math.abs(bill.runningSeconds - seconds) < 0.001, `${bill.runningSeconds} vs ${seconds}`);
    assert.ok(Math.abs(bill.costUsd - (seconds * bill.pricePerHour) / 3600) < 1e-9);
    assert.ok(Math.abs(bill.emulatedRunningSeconds - seconds * 20) < 0.02);
    assert.equal(bill.pricePerHour, 0.28273);
    assert.equal(bill.open, false);
    await gce.delete('vm-preempt');
  });

  it('deletes a spot VM preempted with instanceTerminationAction DELETE', async () => {
    await gce.insert(spotL4('vm-ephemeral', 'sleep 600', { scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE', onHostMaintenance: 'TERMINATE', automaticRestart: false } }));
    await emu.preempt(ZONE, 'vm-ephemeral');
    await until('the instance gone', async () => ((await emu.instances()).some((i) => i.name === 'vm-ephemeral') ? undefined : true));
    await assert.rejects(gce.get('vm-ephemeral'), (err: { httpStatusCode?: number }) => err.httpStatusCode === 404);
    const [ops] = await gce.operations.list({ project: PROJECT, zone: ZONE, filter: 'operationType = "compute.instances.preempted"' });
    assert.ok(ops.some((o) => o.targetLink?.endsWith('/vm-ephemeral')));
  });

  it('kills the process group on delete', async () => {
    await gce.insert(spotL4('vm-delete', 'sleep 600 & sleep 600'));
    const view = await until('the guest', async () => (await emu.instances()).find((i) => i.name === 'vm-delete' && i.processAlive));
    const op = await gce.delete('vm-delete');
    assert.equal(op.error ?? undefined, undefined);
    assert.equal(groupAlive(view.pgid), false);
    const [bill] = (await emu.billing(PROJECT)).filter((b) => b.name === 'vm-delete');
    assert.equal(bill.stoppedAt, op.endTime, 'billing ends when the delete operation does');
  });

  it('filters instance lists by labels and status, in GCE filter syntax', async () => {
    await gce.insert(spotL4('vm-f1', 'true', { labels: { 'sterna-run': 'run-a', team: 'ml' } }));
    await gce.insert(spotL4('vm-f2', 'true', { labels: { 'sterna-run': 'run-b', team: 'ml' } }));
    const names = async (filter: string) => {
      const out: string[] = [];
      for await (const i of gce.instances.listAsync({ project: PROJECT, zone: ZONE, filter })) out.push(i.name ?? '');
      return out.sort();
    };
    assert.deepEqual(await names('labels.sterna-run = "run-a"'), ['vm-f1']);
    assert.deepEqual(await names('labels.sterna-run != run-a AND labels.team = ml'), ['vm-f2']);
    assert.deepEqual(await names('(labels.team = "ml") AND (status = "RUNNING")'), ['vm-f1', 'vm-f2']);
    assert.deepEqual(await names('(labels.team = "ml") (name = "vm-f2")'), ['vm-f2']);
    assert.deepEqual(await names('name eq vm-f.*'), ['vm-f1', 'vm-f2']);
    assert.deepEqual(await names('labels.team = "nobody"'), []);
    await Promise.all(['vm-f1', 'vm-f2'].map((n) => gce.delete(n)));
  });

  it('answers operations.wait after a bounded time when the operation is not DONE yet', async () => {
    const slow = await startTestEmulator({ timeFactor: 1, operationWaitSeconds: 0.3, timings: { provisioningSeconds: 1, stagingSeconds: 0.2 } });
    try {
      const ops = new ZoneOperationsClient(slow.clientOptions);
      const [lro] = await new InstancesClient(slow.clientOptions).insert({ project: PROJECT, zone: ZONE, instanceResource: spotL4('vm-slow', 'true') });
      const started = Date.now();
      const [first] = await ops.wait({ project: PROJECT, zone: ZONE, operation: lro.latestResponse.name as string });
      assert.equal(first.status, 'RUNNING');
      assert.ok(Date.now() - started < 1500);
      let op = first;
      while (op.status !== 'DONE') [op] = await ops.wait({ project: PROJECT, zone: ZONE, operation: lro.latestResponse.name as string });
      assert.equal(op.error ?? undefined, undefined);
    } finally {
      await slow.stop();
    }
  });
});

describe('GCE emulator restart', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  after(async () => emu?.stop());

  it('keeps a running VM running, and its instance, operations and billing, across an emulator restart', async () => {
    emu = await startTestEmulator({ timeFactor: 20 });
    let gce = new Gce(emu);
    const script = `#!/bin/bash
${MD}
n=0
while true; do n=$((n+1)); curl -sf -X PUT -H "$H" --data-binary "$n" "$MD/instance/guest-attributes/sterna/step" >/dev/null || true; sleep 0.1; done
`;
    const insert = await gce.insert(spotL4('vm-survivor', script));
    const stepOf = async () => Number((await gce.guestAttributes('vm-survivor')).step ?? 0);
    await until('steps', async () => ((await stepOf()) > 2 ? true : undefined));
    const [view] = (await emu.instances()).filter((i) => i.name === 'vm-survivor');
    const billedBefore = (await emu.billing()).find((b) => b.name === 'vm-survivor')!;

    await emu.restart();
    gce = new Gce(emu);
    const instance = await gce.get('vm-survivor');
    assert.equal(instance.status, 'RUNNING');
    assert.equal(groupAlive(view.pgid), true, 'the VM process survived the restart');
    const [adopted] = (await emu.instances()).filter((i) => i.name === 'vm-survivor');
    assert.equal(adopted.pgid, view.pgid);
    assert.equal(adopted.metadataPort, view.metadataPort, 'its metadata server came back on the same port');
    // The guest reaches its metadata server again: its step counter keeps moving.
    const stepAfter = await stepOf();
    await until('steps after the restart', async () => ((await stepOf()) > stepAfter + 2 ? true : undefined));
    const [op] = await gce.operations.get({ project: PROJECT, zone: ZONE, operation: insert.name! });
    assert.equal(op.status, 'DONE');
    const billedAfter = (await emu.billing()).find((b) => b.name === 'vm-survivor')!;
    assert.equal(billedAfter.startedAt, billedBefore.startedAt);
    assert.ok(billedAfter.open && billedAfter.runningSeconds > billedBefore.runningSeconds);

    await gce.delete('vm-survivor');
    assert.equal(groupAlive(view.pgid), false);
  });
});
