/**
 * The ledger ends where billing did, even when a release is retried after its delete
 * landed (the worker died between the delete and the activity's answer): the retry finds
 * nothing, and reads when the VM stopped from GCE's own operations instead of calling it
 * "now". Through the real `@google-cloud/compute` client against the emulator.
 */
import { strict as assert } from 'node:assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { GceProvider } from '../../activities/providers/gce';
import { catalogPriceBook } from '../../config/price-book';
import { ReleaseOutcome, type ProvisionRequest } from '../../workflows/activity-contract';
import { absorbRelease } from '../../workflows/run/ending';
import { AttemptOutcome, initialState } from '../../workflows/run/state';
import { ownerLabels, type Owner } from '../../workflows/naming';
import type { Offer } from '../../workflows/types';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

const PROJECT = 'release-window';
const ZONE = 'us-central1-a';

describe('a release retried after its delete landed', function () {
  this.timeout(120_000);
  let emu: TestEmulator;

  before(async () => {
    emu = await startTestEmulator({});
  });
  after(async () => {
    await emu?.stop();
  });

  it('reports the stop time GCE recorded, not the time of the retry', async () => {
    const gce = new GceProvider({ project: PROJECT, prices: catalogPriceBook(), clientOptions: emu.clientOptions, pollIntervalMs: 100 });
    const owner: Owner = { run: 'window-run', execution: 'w'.repeat(14), attempt: 1 };
    const offer: Offer = { backend: 'gce', zone: ZONE, region: 'us-central1', accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: 'STANDARD', pricePerHour: 1, onDemandPricePerHour: 1, quotaAvailable: true };
    const request: ProvisionRequest = {
      name: 'window-vm',
      offer,
      owner,
      labels: ownerLabels(owner),
      diskSizeGb: 50,
      agent: { runId: owner.run, attempt: 1, argv: ['sleep', '600'], env: {}, datasets: [], checkpointUri: 'file:///nonexistent', pollSeconds: 1 },
    };
    const { startedAt } = (await gce.provision(request, () => undefined)).window;
    assert.ok(startedAt);
    const ref = { backend: 'gce' as const, name: request.name, zone: ZONE };
    const first = await gce.release({ ref, owner, createMayBeInFlight: false, startedAt });
    assert.equal(first.outcome, ReleaseOutcome.Deleted);
    await sleep(1500);
    const retried = await gce.release({ ref, owner, createMayBeInFlight: false, startedAt });
    assert.deepEqual(retried, { outcome: ReleaseOutcome.Absent, stoppedAt: first.stoppedAt });

    // The run's ledger takes it: the attempt stopped when GCE says, whatever the clock says now.
    const state = initialState('window-run', Date.parse(startedAt), undefined, undefined);
    state.attempts.push({ attempt: 1, ref, offer, startedAt, outcome: AttemptOutcome.Running, released: false, createSettled: true });
    absorbRelease(state, { kind: 'released', attempt: 1, ...retried }, Date.now() + 60_000);
    assert.equal(state.attempts[0].stoppedAt, first.stoppedAt);
  });

  it('still calls a VM that never ran absent, with no window', async () => {
    const gce = new GceProvider({ project: PROJECT, prices: catalogPriceBook(), clientOptions: emu.clientOptions, pollIntervalMs: 100 });
    const owner: Owner = { run: 'never-run', execution: 'n'.repeat(14), attempt: 1 };
    assert.deepEqual(await gce.release({ ref: { backend: 'gce', name: 'never-vm', zone: ZONE }, owner, createMayBeInFlight: false }), { outcome: ReleaseOutcome.Absent, stoppedAt: undefined });
  });
});
