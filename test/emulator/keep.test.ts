/**
 * The GCE provider's keep (workflows/run/keep.ts) against the emulator, through the real
 * @google-cloud/compute client: it labels only the owner's VM `sterna-keep-until`, cuts
 * the keep to the VM's own time limit, says how to reach it, and the fleet listing reads
 * the label back; the emulator's setLabels holds to the labels' fingerprint as GCE does;
 * a run that keeps has its agent wait the keep out before powering off.
 */
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InstancesClient } from '@google-cloud/compute';
import { GceProvider } from '../../activities/providers/gce';
import { catalogPriceBook } from '../../config/price-book';
import type { ProvisionRequest } from '../../workflows/activity-contract';
import { ownerLabels, type Owner } from '../../workflows/naming';
import { KEEP_UNTIL_LABEL } from '../../workflows/run/keep';
import type { Offer, ResourceRef } from '../../workflows/types';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

describe('keeping a failed attempt\'s VM on the emulator', function () {
  this.timeout(120_000);
  const PROJECT = 'keep-test';
  const ZONE = 'us-central1-a';
  let emu: TestEmulator;
  let scratch: string;
  let gce: GceProvider;
  let instances: InstancesClient;

  before(async () => {
    emu = await startTestEmulator({ timeFactor: 10 });
    scratch = mkdtempSync(join(tmpdir(), 'sterna-keep-'));
    gce = new GceProvider({ project: PROJECT, prices: catalogPriceBook(), clientOptions: emu.clientOptions, pollIntervalMs: 100 });
    instances = new InstancesClient(emu.clientOptions);
  });
  after(async () => {
    await emu?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  function request(n: number, releaseBy: string, keepOnFailureSeconds?: number): ProvisionRequest {
    const owner: Owner = { run: `keep-${n}`, execution: 'e'.repeat(14), attempt: 1 };
    const offer: Offer = { backend: 'gce', zone: ZONE, region: 'us-central1', accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: 'STANDARD', pricePerHour: 1, onDemandPricePerHour: 1, quotaAvailable: true };
    return {
      name: `keep-vm-${n}`,
      offer,
      owner,
      labels: { ...ownerLabels(owner), team: 'ml' },
      diskSizeGb: 50,
      releaseBy,
      ...(keepOnFailureSeconds !== undefined ? { keepOnFailureSeconds } : {}),
      agent: { runId: `keep-${n}`, attempt: 1, argv: ['sleep', '600'], env: {}, datasets: [], checkpointUri: `file://${scratch}/ckpt-${n}`, pollSeconds: 0.2 },
    };
  }
  const refOf = (req: ProvisionRequest): ResourceRef => ({ backend: 'gce', name: req.name, zone: ZONE });

  it('labels only the owner\'s VM, until the asked time or its own limit if that comes first, and says how to reach it', async () => {
    const limit = Date.now() + 3_600_000;
    const req = request(1, new Date(limit).toISOString(), 1800);
    await gce.provision(req, () => undefined);
    const [created] = await instances.get({ project: PROJECT, zone: ZONE, instance: req.name });
    assert.equal(created.metadata?.items?.find((i) => i.key === 'sterna-poweroff-after-seconds')?.value, '1800', 'the agent waits the keep out before powering off');

    const soon = new Date(Date.now() + 600_000);
    const kept = await gce.keep({ ref: refOf(req), owner: req.owner, until: soon.toISOString() });
    const seconds = Math.floor(soon.getTime() / 1000);
    assert.deepEqual(kept, { outcome: 'kept', until: new Date(seconds * 1000).toISOString(), reach: [`gcloud compute ssh ${req.name} --zone ${ZONE} --project ${PROJECT}`] });
    const [labelled] = await instances.get({ project: PROJECT, zone: ZONE, instance: req.name });
    assert.deepEqual(labelled.labels, { ...req.labels, [KEEP_UNTIL_LABEL]: String(seconds) }, 'its other labels unchanged');
    const listed = (await gce.listFleet()).find((r) => r.ref.name === req.name);
    assert.equal(listed?.keepUntil, seconds);

    // Asked past the VM's own limit: kept until the limit, which deletes it anyway.
    const past = await gce.keep({ ref: refOf(req), owner: req.owner, until: new Date(limit + 3_600_000).toISOString() });
    assert.equal(past.until, new Date(Math.floor(limit / 1000) * 1000).toISOString());

    // Not ours, or gone: nothing labelled.
    const other = await gce.keep({ ref: refOf(req), owner: { ...req.owner, run: 'someone-else' }, until: soon.toISOString() });
    assert.deepEqual(other, { outcome: 'not-ours' });
    assert.deepEqual(await gce.keep({ ref: { backend: 'gce', name: 'keep-vm-none', zone: ZONE }, owner: req.owner, until: soon.toISOString() }), { outcome: 'absent' });
    await gce.release({ ref: refOf(req), owner: req.owner, createMayBeInFlight: false });
  });

  it('setLabels holds to the labels\' fingerprint, as GCE does', async () => {
    const req = request(2, new Date(Date.now() + 3_600_000).toISOString());
    await gce.provision(req, () => undefined);
    const [before] = await instances.get({ project: PROJECT, zone: ZONE, instance: req.name });
    await assert.rejects(
      instances.setLabels({ project: PROJECT, zone: ZONE, instance: req.name, instancesSetLabelsRequestResource: { labelFingerprint: 'stale', labels: { a: 'b' } } }),
      (err: { code?: number; message?: string }) => err.code === 412 || /fingerprint/i.test(err.message ?? ''),
    );
    await assert.rejects(instances.setLabels({ project: PROJECT, zone: ZONE, instance: req.name, instancesSetLabelsRequestResource: { labelFingerprint: before.labelFingerprint, labels: { Bad: 'x' } } }), /Label key 'Bad'/);
    const [after] = await instances.get({ project: PROJECT, zone: ZONE, instance: req.name });
    assert.deepEqual(after.labels, before.labels, 'refused writes change nothing');
    await gce.release({ ref: refOf(req), owner: req.owner, createMayBeInFlight: false });
  });
});
