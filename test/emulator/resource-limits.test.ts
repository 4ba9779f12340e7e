/**
 * VM-side limits: whatever happens to the run's workflow, its resources stop paying on
 * their own. The bound is a pure function of the run (run/resource-limit.ts); the GCE
 * provider turns it into `scheduling.terminationTime` and the emulator acts on it as GCE
 * does; the agent powers its VM off when its trainer exited and no release came.
 */
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InstancesClient, ZoneOperationsClient } from '@google-cloud/compute';
import { GceProvider, terminationTime } from '../../activities/providers/gce';
import { activeDeadlineSeconds } from '../../activities/providers/gke';
import { catalogPriceBook } from '../../config/price-book';
import type { ProvisionRequest } from '../../workflows/activity-contract';
import { ownerLabels, type Owner } from '../../workflows/naming';
import { MAX_RESOURCE_LIMIT_SECONDS, RESOURCE_LIMIT_MARGIN_SECONDS, resourceReleaseByMs } from '../../workflows/run/resource-limit';
import { initialState } from '../../workflows/run/state';
import { parseSpec, type RunSpecInput } from '../../workflows/spec';
import type { Offer } from '../../workflows/types';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';
import { eventually } from '../helpers/processes';

const T0 = Date.parse('2030-01-01T00:00:00Z');
const MARGIN_MS = RESOURCE_LIMIT_MARGIN_SECONDS * 1000;
const BASE: RunSpecInput = { command: ['python', 'train.py'], resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] }, checkpoint: { uri: 'gs://bucket/ckpt' } } as RunSpecInput;

function runAt(input: Partial<RunSpecInput>, nowMs = T0) {
  const spec = parseSpec({ ...BASE, ...input }, { nowMs });
  const deadline = spec.time.deadline ? Date.parse(spec.time.deadline) : undefined;
  return { spec, state: initialState('run-1', nowMs, undefined, deadline) };
}

describe('the VM-side limit of an attempt (pure)', () => {
  it('is the deadline plus the margin', () => {
    const { spec, state } = runAt({ time: { deadline: new Date(T0 + 3_600_000).toISOString(), expectedDuration: 60 } } as Partial<RunSpecInput>);
    assert.equal(resourceReleaseByMs(state, spec, T0 + 60_000), T0 + 3_600_000 + MARGIN_MS);
  });

  it('is the run start plus time.maxRunDuration plus the margin, whichever of the two ends first', () => {
    const { spec, state } = runAt({ time: { maxRunDuration: 7200, deadline: new Date(T0 + 86_400_000).toISOString(), expectedDuration: 60 } } as Partial<RunSpecInput>);
    // Later attempts keep the run's own end, not their start plus the maximum.
    assert.equal(resourceReleaseByMs(state, spec, T0 + 3_000_000), T0 + 7_200_000 + MARGIN_MS);
  });

  it("is GCE's longest limit (120 days from now) for a run with neither", () => {
    const { spec, state } = runAt({});
    assert.equal(resourceReleaseByMs(state, spec, T0 + 5000), T0 + 5000 + MAX_RESOURCE_LIMIT_SECONDS * 1000);
  });

  it('never lies in the past, even for an attempt started after the run ended', () => {
    const { spec, state } = runAt({ time: { deadline: new Date(T0 + 60_000).toISOString(), expectedDuration: 30 } } as Partial<RunSpecInput>);
    assert.equal(resourceReleaseByMs(state, spec, T0 + 3_600_000), T0 + 3_600_000 + MARGIN_MS);
  });

  it('becomes a terminationTime and an activeDeadlineSeconds GCE and Kubernetes accept, whatever the request', () => {
    assert.equal(terminationTime(new Date(T0 + 3_600_000).toISOString(), T0), new Date(T0 + 3_600_000).toISOString());
    assert.equal(terminationTime(new Date(T0 - 5000).toISOString(), T0), new Date(T0 + 40_000).toISOString(), 'a retried create after the limit: still at least 30 s ahead');
    assert.equal(terminationTime(undefined, T0), new Date(T0 + 120 * 86_400_000).toISOString());
    assert.equal(activeDeadlineSeconds(new Date(T0 + 3_600_500).toISOString(), T0), 3601);
    assert.equal(activeDeadlineSeconds(new Date(T0 - 1).toISOString(), T0), 30);
    assert.equal(activeDeadlineSeconds(undefined, T0), 120 * 86_400);
  });
});

describe('VM-side limits on the emulator', function () {
  this.timeout(120_000);
  const PROJECT = 'limits-test';
  const ZONE = 'us-central1-a';
  let emu: TestEmulator;
  let scratch: string;
  let instances: InstancesClient;
  let operations: ZoneOperationsClient;
  let counter = 0;

  before(async () => {
    emu = await startTestEmulator({ timeFactor: 10 });
    scratch = mkdtempSync(join(tmpdir(), 'sterna-limits-'));
    instances = new InstancesClient(emu.clientOptions);
    operations = new ZoneOperationsClient(emu.clientOptions);
  });
  after(async () => {
    await emu?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  function provider(powerOffAfterSeconds?: number): GceProvider {
    return new GceProvider({ project: PROJECT, prices: catalogPriceBook(), clientOptions: emu.clientOptions, pollIntervalMs: 100, powerOffAfterSeconds });
  }

  function request(model: 'SPOT' | 'STANDARD', argv: string[], releaseBy?: string): ProvisionRequest {
    counter++;
    const owner: Owner = { run: `limits-${counter}`, execution: 'e'.repeat(14), attempt: 1 };
    const offer: Offer = { backend: 'gce', zone: ZONE, region: 'us-central1', accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: model, pricePerHour: 1, onDemandPricePerHour: 1, quotaAvailable: true };
    return {
      name: `limits-vm-${counter}`,
      offer,
      owner,
      labels: ownerLabels(owner),
      diskSizeGb: 50,
      releaseBy,
      agent: { runId: `limits-${counter}`, attempt: 1, argv, env: {}, datasets: [], checkpointUri: `file://${scratch}/ckpt-${counter}`, pollSeconds: 0.2 },
    };
  }

  async function operationsOn(name: string) {
    const [ops] = await operations.list({ project: PROJECT, zone: ZONE });
    return ops.filter((op) => op.targetLink?.endsWith(`/instances/${name}`)).map((op) => ({ type: op.operationType, user: op.user, status: op.status }));
  }

  it('creates attempts with the run\'s terminationTime; at it, GCE deletes an on-demand VM and stops a spot VM, each with its system operation', async () => {
    const gce = provider();
    const releaseBy = new Date(Date.now() + 41_000).toISOString();
    const [standard, spot] = [request('STANDARD', ['sleep', '600'], releaseBy), request('SPOT', ['sleep', '600'], releaseBy)];
    await Promise.all([gce.provision(standard, () => undefined), gce.provision(spot, () => undefined)]);
    const [created] = await instances.get({ project: PROJECT, zone: ZONE, instance: standard.name });
    assert.equal(created.scheduling?.terminationTime, releaseBy);
    assert.equal(created.scheduling?.instanceTerminationAction, 'DELETE');
    assert.ok((await emu.instances()).find((v) => v.name === standard.name)?.terminationTimestamp, 'GCE shows when it will act');
    const [createdSpot] = await instances.get({ project: PROJECT, zone: ZONE, instance: spot.name });
    assert.equal(createdSpot.scheduling?.instanceTerminationAction, 'STOP', 'spot VMs stop, so the ledger can read a preempted VM\'s stop time');

    await eventually('the on-demand VM deleted and the spot VM stopped at the limit', async () => {
      const views = await emu.instances();
      const s = views.find((v) => v.name === spot.name);
      return !views.some((v) => v.name === standard.name) && s?.status === 'TERMINATED' ? true : undefined;
    }, 90_000, 500);
    assert.ok(Date.now() >= Date.parse(releaseBy), 'not before its time');
    assert.deepEqual((await operationsOn(standard.name)).filter((op) => op.user === 'system'), [{ type: 'delete', user: 'system', status: 'DONE' }]);
    assert.deepEqual((await operationsOn(spot.name)).filter((op) => op.user === 'system'), [{ type: 'stop', user: 'system', status: 'DONE' }]);
    const billing = await emu.billing(PROJECT);
    assert.equal(billing.find((b) => b.name === spot.name)?.open, false, 'the stopped spot VM bills nothing more');
    assert.equal(billing.find((b) => b.name === standard.name)?.open, false);
  });

  it('powers the VM off when its trainer has exited and no release came within the grace period', async () => {
    const gce = provider(2);
    const req = request('STANDARD', ['true']);
    await gce.provision(req, () => undefined);
    const stopped = await eventually('the VM powered off', async () => {
      const view = (await emu.instances()).find((v) => v.name === req.name);
      return view?.status === 'TERMINATED' ? view : undefined;
    }, 60_000, 200);
    assert.equal(stopped.guestAttributes.sterna?.exit, '0', 'the trainer exited and said so first');
    assert.equal(stopped.guestAttributes.sterna?.phase, 'exited');
    // The guest stopped itself: no API call (and no time limit) did it.
    assert.deepEqual((await operationsOn(req.name)).map((op) => op.type), ['insert']);
    await gce.release({ ref: { backend: 'gce', name: req.name, zone: ZONE }, owner: req.owner, createMayBeInFlight: false });
  });

  it('keeps a VM whose release comes within the grace period running until the release', async () => {
    const gce = provider(600);
    const req = request('STANDARD', ['true']);
    await gce.provision(req, () => undefined);
    await eventually('the trainer exited', async () => ((await emu.instances()).find((v) => v.name === req.name)?.guestAttributes.sterna?.phase === 'exited' ? true : undefined), 60_000, 200);
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal((await emu.instances()).find((v) => v.name === req.name)?.status, 'RUNNING');
    const released = await gce.release({ ref: { backend: 'gce', name: req.name, zone: ZONE }, owner: req.owner, createMayBeInFlight: false });
    assert.equal(released.outcome, 'deleted');
  });
});

describe('VM-side limits of synthetic guests', function () {
  this.timeout(60_000);
  let emu: TestEmulator;

  before(async () => {
    emu = await startTestEmulator({ timeFactor: 20, guest: 'synthetic', synthetic: { steps: 10, stepSeconds: 1, checkpointEvery: 5, startingSeconds: 1, stagingSeconds: 1, uploadSeconds: 1, datasetBytes: 1 }, syntheticTickMs: 20 });
  });
  after(async () => emu?.stop());

  it('powers off after the grace period in emulated seconds, as the agent does', async () => {
    const instances = new InstancesClient(emu.clientOptions);
    const name = 'synthetic-poweroff';
    await instances.insert({
      project: 'limits-test',
      zone: 'us-central1-a',
      instanceResource: {
        name,
        machineType: 'zones/us-central1-a/machineTypes/g2-standard-4',
        scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'STOP', onHostMaintenance: 'TERMINATE', automaticRestart: false },
        metadata: { items: [{ key: 'enable-guest-attributes', value: 'TRUE' }, { key: 'sterna-poweroff-after-seconds', value: '40' }] },
      },
    });
    const exited = await eventually('the guest exited', async () => {
      const view = (await emu.instances()).find((v) => v.name === name);
      return view?.guestAttributes.sterna?.phase === 'exited' ? Date.now() : undefined;
    }, 30_000, 20);
    assert.equal((await emu.instances()).find((v) => v.name === name)?.status, 'RUNNING', 'still up right after the exit');
    await eventually('the VM powered off', async () => ((await emu.instances()).find((v) => v.name === name)?.status === 'TERMINATED' ? true : undefined), 30_000, 20);
    // 40 emulated seconds at 20x: about 2 s after the exit.
    assert.ok(Date.now() - exited >= 1500, `powered off ${Date.now() - exited} ms after the exit`);
  });
});
