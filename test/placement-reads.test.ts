/**
 * Placement reads are the worker's, not each run's: where accelerators are offered and
 * each region's quotas are read once and shared by every placement until they age out,
 * a refused insert drops the quota it contradicted, and a failed refresh (a GET outage)
 * serves the last good answer instead of stopping placement. Counted by the emulator's
 * per-method API usage, through the real `@google-cloud/compute` client.
 */
import { strict as assert } from 'node:assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { GceProvider } from '../activities/providers/gce';
import { catalogPriceBook } from '../config/price-book';
import type { CapacityRequest } from '../workflows/activity-contract';
import { FailureType, namedFailureOf } from '../workflows/failures';
import { ownerLabels, type Owner } from '../workflows/naming';
import { startTestEmulator, type TestEmulator } from './helpers/emulator';

const L4: CapacityRequest = { accelerators: [{ type: 'nvidia-l4', count: 1 }], provisioningModels: ['SPOT', 'STANDARD'] };

describe('placement reads shared by a worker', function () {
  this.timeout(120_000);
  let emu: TestEmulator;
  let project = 0;

  before(async () => {
    emu = await startTestEmulator({});
  });
  after(async () => {
    await emu?.stop();
  });

  function provider(options: { acceleratorZonesTtlMs?: number; regionQuotasTtlMs?: number } = {}) {
    const name = `reads-${++project}`;
    return { name, gce: new GceProvider({ project: name, prices: catalogPriceBook(), clientOptions: emu.clientOptions, pollIntervalMs: 100, ...options }) };
  }

  async function calls(project: string): Promise<Record<string, number>> {
    const usage = await emu.admin.apiUsage(project);
    const methods = usage.projects.find((p) => p.project === project)?.methods ?? {};
    return Object.fromEntries(Object.entries(methods).map(([method, use]) => [method, use.calls]));
  }

  it('costs one aggregatedList and one regions.get per region for any number of concurrent placements', async () => {
    const { name, gce } = provider();
    const found = await Promise.all(Array.from({ length: 25 }, () => gce.findCapacity(L4)));
    const regions = new Set(found[0].offers.map((o) => o.region));
    assert.ok(regions.size >= 2, 'the catalog offers L4 in several regions');
    assert.ok(found.every((f) => JSON.stringify(f.offers) === JSON.stringify(found[0].offers)), 'every placement sees the same offers');
    await Promise.all(Array.from({ length: 25 }, () => gce.findCapacity(L4)));
    assert.deepEqual(await calls(name), { 'compute.acceleratorTypes.aggregatedList': 1, 'compute.regions.get': regions.size });
  });

  it('reads a region again once its quotas age out, and sees the new quota', async () => {
    const { name, gce } = provider({ regionQuotasTtlMs: 300 });
    const before = await gce.findCapacity(L4);
    const region = before.offers[0].region;
    assert.ok(before.offers.filter((o) => o.region === region).every((o) => o.quotaAvailable));
    await emu.admin.setQuota(name, region, 'PREEMPTIBLE_NVIDIA_L4_GPUS', 0);
    await emu.admin.setQuota(name, region, 'NVIDIA_L4_GPUS', 0);
    await sleep(400);
    const after = await gce.findCapacity(L4);
    assert.deepEqual(
      after.offers.filter((o) => o.region === region).map((o) => o.quotaAvailable),
      after.offers.filter((o) => o.region === region).map(() => false),
    );
    assert.equal((await calls(name))['compute.acceleratorTypes.aggregatedList'], 1, 'where accelerators are offered is still the first read');
  });

  it('drops a region\'s quotas when an insert there is refused for quota, so the next placement sees it', async () => {
    const { name, gce } = provider();
    const offer = (await gce.findCapacity(L4)).offers.find((o) => o.provisioningModel === 'STANDARD')!;
    await emu.admin.setQuota(name, offer.region, 'NVIDIA_L4_GPUS', 0);
    assert.ok((await gce.findCapacity(L4)).offers.find((o) => o.zone === offer.zone && o.provisioningModel === 'STANDARD')!.quotaAvailable, 'still the shared answer');
    const owner: Owner = { run: `${name}-run`, execution: 'e'.repeat(14), attempt: 1 };
    const refused = await gce
      .provision({ name: `${name}-vm`, offer, owner, labels: ownerLabels(owner), diskSizeGb: 50, agent: { runId: owner.run, attempt: 1, argv: ['true'], env: {}, datasets: [], checkpointUri: 'file:///nonexistent', pollSeconds: 1 } }, () => undefined)
      .then(() => undefined, (err: unknown) => err);
    assert.equal(namedFailureOf(refused)?.type, FailureType.QuotaExceeded);
    assert.equal((await gce.findCapacity(L4)).offers.find((o) => o.zone === offer.zone && o.provisioningModel === 'STANDARD')!.quotaAvailable, false);
  });

  it('serves the last good answer while GCE refuses reads', async () => {
    const { name, gce } = provider({ acceleratorZonesTtlMs: 200, regionQuotasTtlMs: 200 });
    const good = await gce.findCapacity(L4);
    await sleep(300);
    const outage = await emu.admin.injectFault({ fraction: 1, status: 503, method: 'GET', path: '/(aggregated/acceleratorTypes|regions/)' });
    try {
      const during = await gce.findCapacity(L4);
      assert.deepEqual(during.offers, good.offers);
      assert.ok((await emu.admin.faults()).find((f) => f.id === outage.id)!.hits > 0, 'the refresh was tried and refused');
    } finally {
      await emu.admin.clearFaults();
    }
    assert.ok((await calls(name))['compute.regions.get'] >= 2);
  });

  // bench:chaos: a worker restarted during the GET outage had no answer to fall back on,
  // and every run placing then failed NoCapacity ("no zone offers nvidia-l4 x1").
  it('retries a first read GCE refuses, with no earlier answer to serve: never "no zone offers it"', async () => {
    const good = await provider().gce.findCapacity(L4);
    assert.ok(good.offers.length > 0);
    const { name, gce } = provider();
    await emu.admin.injectFault({ fraction: 1, status: 503, method: 'GET', path: '/aggregated/acceleratorTypes', count: 2 });
    try {
      // Concurrent placements share the refused read, as a worker's runs do.
      const found = await Promise.all(Array.from({ length: 5 }, () => gce.findCapacity(L4)));
      for (const f of found) assert.deepEqual(f.offers, good.offers);
    } finally {
      await emu.admin.clearFaults();
    }
    const usage = (await emu.admin.apiUsage(name)).projects.find((p) => p.project === name)?.methods['compute.acceleratorTypes.aggregatedList'];
    assert.deepEqual({ calls: usage?.calls, errors: usage?.errors }, { calls: 3, errors: 2 }, 'refused twice, then read once for all five');
  });
});
