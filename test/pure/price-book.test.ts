/**
 * The price book without a server: the SKU mapping read both ways, the book's arithmetic
 * against the catalog's, its size, and how refreshes (good and failed) change it.
 */
import { strict as assert } from 'node:assert';
import { readSku, RateModel, skuDescription, type SkuLike } from '../../config/billing-skus';
import { baseRates, defaultCatalog, pricePerHour, type Catalog, type Region } from '../../config/catalog';
import { skusOf } from '../../emulator/billing-catalog';
import { bookFromCatalog, bookFromSkus, bookPriceBook, bookBytes } from '../../activities/pricing/book-data';
import { absorbRefresh, nextRefreshMs, stampOf } from '../../workflows/pricing-book/book-state';
import type { PriceBookState } from '../../workflows/pricing-book/contract';
import { absorbPrices, capacityFound } from '../../workflows/run/prices';

function sku(description: string, usageType: string, usd: number, options: { unit?: string; regions?: string[]; currency?: string } = {}): SkuLike {
  const units = Math.floor(usd);
  return {
    description,
    category: { usageType },
    serviceRegions: options.regions ?? ['us-central1', 'us-east1'],
    pricingInfo: [{ pricingExpression: { usageUnit: options.unit ?? 'h', tieredRates: [{ startUsageAmount: 0, unitPrice: { currencyCode: options.currency ?? 'USD', units: String(units), nanos: Math.round((usd - units) * 1e9) } }] } }],
  };
}

describe('Billing Catalog SKUs as rates', () => {
  it('reads the descriptions GCE uses for GPUs, cores and RAM, on demand, spot and flex-start', () => {
    const cases: [SkuLike, string, RateModel][] = [
      [sku('Nvidia Tesla T4 GPU running in Americas', 'OnDemand', 0.35), 'gpu:nvidia-tesla-t4', RateModel.OnDemand],
      [sku('Nvidia L4 GPU attached to Spot Preemptible VMs running in Americas', 'Preemptible', 0.2240), 'gpu:nvidia-l4', RateModel.Spot],
      [sku('Spot Preemptible Nvidia L4 GPU running in Virginia', 'Preemptible', 0.2240), 'gpu:nvidia-l4', RateModel.Spot],
      [sku('Nvidia Tesla A100 80GB GPU running in EMEA', 'OnDemand', 3.9), 'gpu:nvidia-a100-80gb', RateModel.OnDemand],
      [sku('NVIDIA A100 80GB GPU running in Americas', 'OnDemand', 3.9), 'gpu:nvidia-a100-80gb', RateModel.OnDemand],
      [sku('Nvidia Tesla A100 GPU attached to DWS Defined Duration VMs running in Americas', 'OnDemand', 1.5), 'gpu:nvidia-tesla-a100', RateModel.Flex],
      [sku('Nvidia H100 80GB GPU running in Americas', 'OnDemand', 9.79), 'gpu:nvidia-h100-80gb', RateModel.OnDemand],
      [sku('N1 Predefined Instance Core running in Americas', 'OnDemand', 0.031611), 'core:n1', RateModel.OnDemand],
      [sku('Spot Preemptible N1 Predefined Instance Ram running in Americas', 'Preemptible', 0.000936, { unit: 'GiBy.h' }), 'ram:n1', RateModel.Spot],
      [sku('A2 Instance Core running in Americas', 'OnDemand', 0.031611), 'core:a2', RateModel.OnDemand],
      [sku('G2 Instance Ram running in Americas', 'OnDemand', 0.002927, { unit: 'GiBy.h' }), 'ram:g2', RateModel.OnDemand],
      [sku('Spot Preemptible A3 Instance Core running in Americas', 'Preemptible', 0.007), 'core:a3', RateModel.Spot],
      [sku('DWS Defined Duration A2 Core running in Americas', 'OnDemand', 0.02), 'core:a2', RateModel.Flex],
    ];
    for (const [input, key, model] of cases) {
      const reading = readSku(input);
      assert.ok(!('skipped' in reading), `${input.description}: ${JSON.stringify(reading)}`);
      assert.deepEqual({ key: reading.key, model: reading.model }, { key, model }, input.description ?? '');
      assert.deepEqual(reading.regions, ['us-central1', 'us-east1']);
    }
    const price = readSku(sku('Nvidia H100 80GB GPU running in Americas', 'OnDemand', 9.79655));
    assert.ok(!('skipped' in price));
    assert.ok(Math.abs(price.usdPerUnit - 9.79655) < 1e-9);
  });

  it('skips what Sterna does not price: commitments, custom and sole-tenant shapes, workstation licences, other units and currencies', () => {
    const skipped: SkuLike[] = [
      sku('Commitment v1: Nvidia L4 GPU running in Americas for 1 Year', 'Commit1Yr', 0.3),
      sku('Commitment v1: N1 Predefined Instance Core in Americas for 1 Year', 'Commit1Yr', 0.02),
      sku('N1 Custom Instance Core running in Americas', 'OnDemand', 0.033),
      sku('Sole Tenancy Instance Core running in Americas', 'OnDemand', 0.03),
      sku('Nvidia L4 GPU Virtual Workstation running in Americas', 'OnDemand', 0.2),
      sku('Nvidia Tesla T4 GPU running in Americas', 'Preemptible', 0.14), // model and usageType disagree
      sku('N1 Predefined Instance Ram running in Americas', 'OnDemand', 3.1, { unit: 'GiBy.mo' }),
      sku('Nvidia Tesla T4 GPU running in Americas', 'OnDemand', 0.3, { currency: 'EUR' }),
      sku('Nvidia Tesla T4 GPU running in Americas', 'OnDemand', 0.35, { regions: [] }),
      sku('Nvidia B200 GPU running in Americas', 'OnDemand', 10),
      sku('Storage PD Capacity in Iowa', 'OnDemand', 0.04),
      sku('Network Internet Egress from Americas to EMEA', 'OnDemand', 0.12),
    ];
    for (const s of skipped) assert.ok('skipped' in readSku(s), `${s.description} should be skipped`);
  });

  it('writes (emulator) and reads (price book) every catalog rate through the same table', () => {
    for (const { key } of baseRates()) {
      for (const model of [RateModel.OnDemand, RateModel.Spot, RateModel.Flex]) {
        const description = skuDescription(key, model, 'Americas');
        assert.ok(description, key);
        const usageType = model === RateModel.Spot ? 'Preemptible' : 'OnDemand';
        const reading = readSku(sku(description, usageType, 1.25, { unit: key.startsWith('ram:') ? 'GiBy.h' : 'h' }));
        assert.ok(!('skipped' in reading), `${description}: ${JSON.stringify(reading)}`);
        assert.deepEqual({ key: reading.key, model: reading.model }, { key, model });
      }
    }
  });
});

describe('the price book', () => {
  it('prices every machine type, GPU and count in every region as the catalog does, from the emulator’s SKUs', () => {
    const book = bookFromSkus(skusOf(defaultCatalog, '2026-01-01T00:00:00Z'), '2026-01-01T00:00:00Z');
    assert.equal(book.skus?.skipped, 0);
    const prices = bookPriceBook(book, { asOf: book.asOf, source: 'billing' });
    let compared = 0;
    for (const region of Object.keys(defaultCatalog.regions)) {
      for (const machineType of Object.keys(defaultCatalog.machineTypes)) {
        for (const accelerator of [undefined, ...Object.keys(defaultCatalog.accelerators)]) {
          for (const count of [1, 2, 4, 8]) {
            for (const spot of [false, true]) {
              const query = { region, machineType, accelerator: accelerator as string, count, spot };
              const expected = pricePerHour(query);
              const actual = prices.pricePerHour(query);
              if (expected === undefined) {
                assert.equal(actual, undefined, JSON.stringify(query));
                continue;
              }
              assert.ok(actual !== undefined && Math.abs(actual - expected) <= 2e-6, `${JSON.stringify(query)}: ${actual} vs ${expected}`);
              compared++;
            }
          }
        }
      }
    }
    assert.ok(compared > 500, `compared ${compared}`);
  });

  it('has no price for a region or a rate the catalog does not list', () => {
    const book = bookFromSkus([sku('Nvidia L4 GPU running in Americas', 'OnDemand', 0.56), sku('G2 Instance Core running in Americas', 'OnDemand', 0.025)], 'now');
    const prices = bookPriceBook(book, { asOf: 'now', source: 'billing' });
    // g2 RAM is missing: a partial price would be a wrong price.
    assert.equal(prices.pricePerHour({ region: 'us-central1', machineType: 'g2-standard-4', accelerator: 'nvidia-l4', count: 1, spot: false }), undefined);
    assert.equal(prices.pricePerHour({ region: 'me-west1', machineType: 'g2-standard-4', accelerator: 'nvidia-l4', count: 1, spot: false }), undefined);
  });

  it('stays compact at GCE’s size: 40 regions in a few kB of history per refresh', () => {
    const many: Record<string, Region> = {};
    const prefixes = ['us', 'europe', 'asia', 'southamerica', 'me', 'australia', 'africa', 'northamerica'];
    for (let i = 0; i < 40; i++) {
      const name = `${prefixes[i % prefixes.length]}-region${i}`;
      many[name] = { name, description: name, priceMultiplier: 1 + i / 100, zones: [{ name: `${name}-a`, region: name, accelerators: ['nvidia-l4'] }] };
    }
    const catalog: Catalog = { ...defaultCatalog, regions: many };
    const book = bookFromSkus(skusOf(catalog, 'now'), new Date(0).toISOString());
    const bytes = bookBytes(book);
    assert.equal(Object.keys(book.regions).length, 40);
    // Temporal warns at 512 kB per payload; a refresh a day for 28 days stays far below that.
    assert.ok(bytes < 32_000, `book of 40 regions takes ${bytes} bytes`);
  });
});

describe('refreshing the book', () => {
  const billing = (asOf: string) => ({ ...bookFromCatalog(), asOf, source: 'billing' as const });

  it('takes a good Billing read, keeps it through a failed one with a warning, and clears the warning when reads work again', () => {
    const state: PriceBookState = { refreshes: 0 };
    absorbRefresh(state, { book: billing('2026-03-01T00:00:00.000Z') }, Date.parse('2026-03-01T00:00:00Z'));
    assert.deepEqual(stampOf(state), { asOf: '2026-03-01T00:00:00.000Z', source: 'billing' });

    absorbRefresh(state, { book: bookFromCatalog(), billingError: '7: PERMISSION_DENIED' }, Date.parse('2026-03-02T00:00:00Z'));
    const stamp = stampOf(state);
    assert.equal(stamp?.source, 'billing');
    assert.equal(stamp?.asOf, '2026-03-01T00:00:00.000Z');
    assert.match(stamp?.warning ?? '', /PERMISSION_DENIED/);

    absorbRefresh(state, { book: billing('2026-03-03T00:00:00.000Z') }, Date.parse('2026-03-03T00:00:00Z'));
    assert.deepEqual(stampOf(state), { asOf: '2026-03-03T00:00:00.000Z', source: 'billing' });
    assert.equal(state.refreshes, 3);
  });

  it('falls back to the bundled catalog, with a warning, when no Billing read ever worked', () => {
    const state: PriceBookState = { refreshes: 0 };
    absorbRefresh(state, { book: bookFromCatalog(), billingError: 'ECONNREFUSED' }, Date.parse('2026-03-01T00:00:00Z'));
    assert.equal(stampOf(state)?.source, 'catalog');
    assert.equal(stampOf(state)?.asOf, defaultCatalog.pricesAsOf);
    assert.match(stampOf(state)?.warning ?? '', /bundled catalog/);
  });

  it('schedules the next refresh a period after the last, and none when the refresh is off', () => {
    const state: PriceBookState = { refreshes: 1, lastRefreshMs: 1_000 };
    assert.equal(nextRefreshMs(state, 3600), 1_000 + 3_600_000);
    assert.equal(nextRefreshMs(state, 0), undefined);
  });
});

describe('a run’s prices', () => {
  it('keeps the book’s date, source, warning and unpriced zones from findCapacity, and reads pre-price-book histories', () => {
    const state: Parameters<typeof absorbPrices>[0] = {};
    absorbPrices(state, capacityFound({ offers: [], unpriced: [{ zone: 'me-west1-a', accelerator: 'nvidia-l4', machineType: 'g2-standard-4' }], prices: { asOf: '2025-01-15', source: 'catalog', warning: 'no access' } }));
    assert.deepEqual(state.prices, { asOf: '2025-01-15', source: 'catalog', warning: 'no access', unpriced: ['me-west1-a nvidia-l4 g2-standard-4'], unpricedCount: 1 });
    // An old history's findCapacity result is a bare Offer[]: no stamp, and the run's prices stay as they were.
    absorbPrices(state, capacityFound([]));
    assert.equal(state.prices?.asOf, '2025-01-15');
  });
});
