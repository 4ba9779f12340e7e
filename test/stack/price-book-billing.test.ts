/**
 * The price book end to end: the real `@google-cloud/billing` CloudCatalogClient reads
 * the emulator's Billing Catalog into the priceBook workflow (real Temporal dev server),
 * and runs price their offers from it. The emulator's catalog has a sixth region the
 * bundled catalog (the worker's fallback) does not know, so only the Billing path can
 * price it.
 */
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudCatalogClient } from '@google-cloud/billing';
import type { WorkflowHandle } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { billingCatalog, priceBookReader } from '../../activities/pricing';
import type { GceProvider } from '../../activities/providers/gce';
import { allZones, defaultCatalog, pricePerHour, type Catalog } from '../../config/catalog';
import { catalogPriceBook } from '../../config/price-book';
import { publishExampleLocally } from '../../examples/publish';
import { billingClientOptions } from '../../workers/pricing';
import { buildGceProvider } from '../../workers/providers';
import { createSternaWorker } from '../../workers/worker';
import { statusQuery } from '../../workflows/messages';
import { priceBookWorkflowId, type PriceBookSettings } from '../../workflows/pricing-book/contract';
import { priceBookQuery, refreshPricesSignal } from '../../workflows/pricing-book/messages';
import type { RunStatus } from '../../workflows/run/views';
import type { trainingRun } from '../../workflows/run/training-run';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';
import { eventually } from '../helpers/processes';
import { exampleSpec, PROJECT } from '../helpers/stack';
import { queryCountingClient, testEnv, uniqueTaskQueue, workflowBundle } from '../helpers/temporal';

const REGION = 'southamerica-east1';
const ZONE = 'southamerica-east1-c';
const L4 = { type: 'nvidia-l4', count: 1 };
const SETTINGS: PriceBookSettings = { source: 'billing', refreshSeconds: 0 };

/** The emulator's world: the bundled five regions and São Paulo, which the bundled catalog does not price. */
const emulatorCatalog: Catalog = {
  ...defaultCatalog,
  regions: {
    ...defaultCatalog.regions,
    [REGION]: { name: REGION, description: 'Osasco, São Paulo, South America', priceMultiplier: 1.37, zones: [{ name: ZONE, region: REGION, accelerators: ['nvidia-l4', 'nvidia-tesla-t4'] }] },
  },
};

type Run = WorkflowHandle<typeof trainingRun>;

describe('the price book on the Cloud Billing Catalog (emulator + real billing client + Temporal)', function () {
  this.timeout(180_000);
  let env: TestWorkflowEnvironment;
  let emu: TestEmulator;
  let provider: GceProvider;
  let buckets: string;
  let taskQueue: string;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let warnings: Record<string, unknown>[];
  const runs: Run[] = [];

  before(async () => {
    env = await testEnv();
    buckets = mkdtempSync(join(tmpdir(), 'sterna-prices-'));
    publishExampleLocally(buckets);
    emu = await startTestEmulator({
      catalog: emulatorCatalog,
      timeFactor: 10,
      guest: 'synthetic',
      synthetic: { steps: 100_000, stepSeconds: 1, checkpointEvery: 50, stagingSeconds: 1 },
      bucketsDir: buckets,
    });
    // The provider's own book is the bundled catalog: five regions, no São Paulo.
    provider = buildGceProvider({ project: PROJECT, emulatorEndpoint: { host: '127.0.0.1', port: emu.port, protocol: 'http' }, localBucketsDir: buckets }, catalogPriceBook(), 200);
  });

  beforeEach(async () => {
    // A task queue per test: each gets its own priceBook workflow.
    taskQueue = uniqueTaskQueue('prices');
    warnings = [];
    const billing = billingCatalog(new CloudCatalogClient(billingClientOptions({ source: 'billing', refreshSeconds: 0, billingEndpoint: { host: '127.0.0.1', port: emu.port, protocol: 'http' } })), {
      maxElapsedMs: 2_000,
    });
    worker = await createSternaWorker({
      connection: env.nativeConnection,
      namespace: env.namespace,
      taskQueue,
      providers: { gce: provider },
      workflowBundle: await workflowBundle(require.resolve('../../workflows')),
      prices: { settings: SETTINGS, billing, warn: (_message, attributes) => void warnings.push(attributes) },
    });
    running = worker.run();
  });

  afterEach(async () => {
    for (const run of runs.splice(0)) {
      await run.cancel().catch(() => undefined);
      await run.result().catch(() => undefined);
    }
    await env.client.workflow.getHandle(priceBookWorkflowId(taskQueue)).terminate('test over').catch(() => undefined);
    worker?.shutdown();
    await running;
    await emu.admin.setBillingCatalog({ access: 'granted', rates: [{ region: REGION, rate: 'gpu:nvidia-l4', model: 'spot', usdPerHour: null }] });
  });

  after(async () => {
    await emu?.stop();
    rmSync(buckets, { recursive: true, force: true });
  });

  async function startRun(id: string): Promise<Run> {
    const spec = exampleSpec({ resources: { accelerators: [L4] }, placement: { zones: { allow: [ZONE] } }, pricing: { mode: 'spot', budgetUsd: 100 } });
    const run = await env.client.workflow.start('trainingRun', { taskQueue, workflowId: `${taskQueue}-${id}`, args: [spec] });
    runs.push(run);
    return run;
  }

  async function training(run: Run): Promise<RunStatus> {
    return eventually(`${run.workflowId} training`, async () => {
      const status = await run.query(statusQuery);
      return status.phase === 'training' && status.ledger[0]?.runningSeconds > 0 ? status : undefined;
    });
  }

  async function refreshed(): Promise<void> {
    const book = env.client.workflow.getHandle(priceBookWorkflowId(taskQueue));
    const before = (await book.query(priceBookQuery)).refreshes;
    await book.signal(refreshPricesSignal, { requester: 'test' });
    await eventually('the price book refreshed', async () => ((await book.query(priceBookQuery)).refreshes > before ? true : undefined));
  }

  it('is queried again only when the book it holds moves: each other read is a describe no worker answers', async () => {
    const { client: counted, queries } = queryCountingClient(env);
    const read = priceBookReader(counted, SETTINGS);
    const first = await read(taskQueue);
    const queriesForFirst = queries();
    assert.ok(queriesForFirst >= 1);
    for (let i = 0; i < 5; i++) assert.equal(await read(taskQueue), first, 'the same book, kept');
    assert.equal(queries(), queriesForFirst, 'no query while the book held is the same');
    await emu.admin.setBillingCatalog({ access: 'granted', rates: [{ region: REGION, rate: 'gpu:nvidia-l4', model: 'spot', usdPerHour: 0.5 }] });
    await refreshed();
    const second = await read(taskQueue);
    assert.equal(queries(), queriesForFirst + 1, 'one query for the refreshed book');
    assert.notEqual(second, first);
    assert.equal(second.stamp.source, 'billing');
    const request = { accelerators: [L4], provisioningModels: ['SPOT'] as 'SPOT'[] };
    const priceIn = async (book: typeof first) => (await provider.findCapacity(request, book)).offers.find((o) => o.zone === ZONE)?.pricePerHour;
    assert.notEqual(await priceIn(second), await priceIn(first), 'the new book has the new spot rate');
  });

  it('prices every zone the emulator offers through the billing client, a region outside the bundled five included', async () => {
    const book = await priceBookReader(env.client, SETTINGS)(taskQueue);
    assert.equal(book.stamp.source, 'billing');
    assert.equal(book.stamp.warning, undefined);

    const request = { accelerators: [L4], provisioningModels: ['SPOT', 'STANDARD'] as ('SPOT' | 'STANDARD')[] };
    const found = await provider.findCapacity(request, book);
    assert.deepEqual(found.unpriced, []);
    const l4Zones = allZones(emu.handle.catalog).filter((z) => z.accelerators.includes('nvidia-l4')).map((z) => z.name);
    assert.deepEqual([...new Set(found.offers.map((o) => o.zone))].sort(), [...l4Zones].sort());
    for (const offer of found.offers) {
      const expected = pricePerHour({ region: offer.region, machineType: offer.machineType, accelerator: 'nvidia-l4', count: 1, spot: offer.provisioningModel === 'SPOT' }, emu.handle.catalog);
      assert.ok(expected !== undefined && Math.abs(offer.pricePerHour - expected) < 2e-6, `${offer.zone} ${offer.provisioningModel}: ${offer.pricePerHour} vs ${expected}`);
      assert.equal(offer.priceSource, 'billing');
      assert.equal(offer.pricesAsOf, book.stamp.asOf);
    }
    assert.equal(found.offers.filter((o) => o.zone === ZONE).length, 2);

    // The bundled catalog alone cannot price São Paulo: the zone is reported, not dropped.
    const bundled = await provider.findCapacity(request);
    assert.deepEqual(bundled.unpriced, [{ zone: ZONE, accelerator: 'nvidia-l4', machineType: 'g2-standard-4' }]);

    // A run placed there is charged the Billing price, and says where it came from.
    const run = await startRun('sao-paulo');
    const status = await training(run);
    const line = status.ledger[0];
    assert.equal(line.zone, ZONE);
    assert.equal(line.priceSource, 'billing');
    assert.equal(line.pricesAsOf, book.stamp.asOf);
    assert.equal(line.pricePerHour, found.offers.find((o) => o.zone === ZONE && o.provisioningModel === 'SPOT')?.pricePerHour);
    assert.deepEqual(status.prices, { asOf: book.stamp.asOf, source: 'billing', unpriced: [], unpricedCount: 0 });
  });

  it('takes a spot price changed in the emulator into offers after a refresh, leaving earlier ledger entries at their price', async () => {
    const first = await startRun('before');
    const before = (await training(first)).ledger[0];

    const oldL4 = pricePerHour({ region: REGION, machineType: 'g2-standard-4', accelerator: 'nvidia-l4', count: 1, spot: true }, emu.handle.catalog)!;
    await emu.admin.setBillingCatalog({ rates: [{ region: REGION, rate: 'gpu:nvidia-l4', model: 'spot', usdPerHour: 0.5 }] });
    const newL4 = pricePerHour({ region: REGION, machineType: 'g2-standard-4', accelerator: 'nvidia-l4', count: 1, spot: true }, emu.handle.catalog)!;
    assert.notEqual(newL4, oldL4);
    await refreshed();

    const second = await startRun('after');
    const after = (await training(second)).ledger[0];
    assert.ok(Math.abs(after.pricePerHour - newL4) < 2e-6, `${after.pricePerHour} vs ${newL4}`);
    assert.ok(Date.parse(after.pricesAsOf!) > Date.parse(before.pricesAsOf!));

    const firstNow = (await first.query(statusQuery)).ledger[0];
    assert.equal(firstNow.pricePerHour, before.pricePerHour);
    assert.ok(Math.abs(firstNow.pricePerHour - oldL4) < 2e-6);
    assert.equal(firstNow.pricesAsOf, before.pricesAsOf);
    assert.ok(firstNow.costUsd > before.costUsd, 'the earlier run keeps accruing, at its own price');
  });

  it('without Billing Catalog access, warns in the worker log and prices from the bundled catalog, as the run’s status shows', async () => {
    await emu.admin.setBillingCatalog({ access: 'denied' });
    const run = await env.client.workflow.start('trainingRun', {
      taskQueue,
      workflowId: `${taskQueue}-denied`,
      args: [exampleSpec({ resources: { accelerators: [L4] }, placement: { regions: { allow: ['us-central1', REGION] } }, pricing: { mode: 'spot', budgetUsd: 100 } })],
    });
    runs.push(run);
    const status = await training(run);
    assert.equal(status.prices?.source, 'catalog');
    assert.equal(status.prices?.asOf, defaultCatalog.pricesAsOf);
    assert.match(status.prices?.warning ?? '', /could not be read.*PERMISSION_DENIED/);
    // The zone only the Billing Catalog could price is named, not silently dropped.
    assert.deepEqual(status.prices?.unpriced, [`${ZONE} nvidia-l4 g2-standard-4`]);
    assert.equal(status.ledger[0].priceSource, 'catalog');
    assert.ok(warnings.some((w) => /PERMISSION_DENIED/.test(String(w.billingError))), JSON.stringify(warnings));
  });
});
