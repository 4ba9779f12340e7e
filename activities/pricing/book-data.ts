/**
 * The compact price book: built from Billing Catalog SKUs or from the bundled catalog,
 * and read as a PriceBook. Machine shapes (vCPUs, memory, built-in GPUs), the machine
 * type Sterna picks for a GPU count and quota metrics are facts of the machine types,
 * not prices, and come from config/catalog.ts; every price comes from the book.
 */
import { readSku, RateModel, type SkuLike } from '../../config/billing-skus';
import { baseRates, componentsOf, defaultCatalog, flexRateIn, hasBuiltInAccelerators, machineTypeFor, quotaMetric, rateIn, type Catalog, type RateKey } from '../../config/catalog';
import type { PriceBook } from '../../config/price-book';
import { PriceSource, type PriceBookData, type PriceStamp } from '../../workflows/api';

/** Builds a book from a Billing Catalog listing, one SKU at a time (Compute Engine has tens of thousands). */
export class BookBuilder {
  private readonly keys: string[] = [];
  private readonly column = new Map<string, number>();
  private readonly rates = new Map<string, Map<number, number>>();
  private readonly flexRates = new Map<string, Map<number, number>>();
  private readonly counts = { read: 0, used: 0, skipped: 0 };

  /** Reads one SKU through the mapping (config/billing-skus.ts); SKUs it does not map are counted and dropped. */
  add(sku: SkuLike): void {
    this.counts.read++;
    const reading = readSku(sku);
    if ('skipped' in reading) {
      this.counts.skipped++;
      return;
    }
    this.counts.used++;
    let at = this.column.get(reading.key);
    if (at === undefined) {
      at = this.keys.length;
      this.keys.push(reading.key);
      this.column.set(reading.key, at);
    }
    const flex = reading.model === RateModel.Flex;
    const slot = flex ? at : 2 * at + (reading.model === RateModel.Spot ? 1 : 0);
    const table = flex ? this.flexRates : this.rates;
    for (const region of reading.regions) {
      const row = table.get(region) ?? new Map<number, number>();
      table.set(region, row);
      // Two SKUs for one rate in one region: the higher, so a budget is never under-counted.
      row.set(slot, Math.max(row.get(slot) ?? 0, reading.usdPerUnit));
    }
  }

  build(asOf: string): PriceBookData {
    const dense = (table: Map<string, Map<number, number>>, width: number) =>
      Object.fromEntries([...table].sort(([a], [b]) => a.localeCompare(b)).map(([region, row]) => [region, Array.from({ length: width }, (_, i) => row.get(i) ?? null)]));
    return {
      asOf,
      source: PriceSource.Billing,
      keys: [...this.keys],
      regions: dense(this.rates, 2 * this.keys.length),
      ...(this.flexRates.size > 0 ? { flex: dense(this.flexRates, this.keys.length) } : {}),
      skus: { ...this.counts },
    };
  }
}

/** The book from a Billing Catalog listing. */
export function bookFromSkus(skus: Iterable<SkuLike>, asOf: string): PriceBookData {
  const builder = new BookBuilder();
  for (const sku of skus) builder.add(sku);
  return builder.build(asOf);
}

/** The bundled catalog as a book (the fallback), at its own date. */
export function bookFromCatalog(catalog: Catalog = defaultCatalog): PriceBookData {
  const keys = baseRates(catalog).map((b) => b.key);
  const regions: Record<string, (number | null)[]> = {};
  for (const region of Object.keys(catalog.regions)) {
    regions[region] = keys.flatMap((key) => [rateIn(region, key, false, catalog) ?? null, rateIn(region, key, true, catalog) ?? null]);
  }
  const flex: Record<string, (number | null)[]> = {};
  for (const region of Object.keys(catalog.regions)) flex[region] = keys.map((key) => flexRateIn(region, key, catalog) ?? null);
  const anyFlex = Object.values(flex).some((row) => row.some((rate) => rate !== null));
  return { asOf: catalog.pricesAsOf, source: PriceSource.Catalog, keys, regions, ...(anyFlex ? { flex } : {}) };
}

function round6(usd: number): number {
  return Math.round(usd * 1e6) / 1e6;
}

/** A PriceBook over a book: whole-instance prices are the sum of the instance's components at the region's rates. */
export function bookPriceBook(data: PriceBookData, stamp: PriceStamp, catalog: Catalog = defaultCatalog): PriceBook {
  const column = new Map(data.keys.map((key, i) => [key, i]));
  return {
    stamp,
    machineTypeFor: (accelerator, count) => machineTypeFor(accelerator, count, catalog),
    quotaMetric: (accelerator) => quotaMetric(accelerator, catalog),
    hasBuiltInAccelerators: (machineType) => hasBuiltInAccelerators(machineType, catalog),
    pricePerHour(query) {
      // Flex-start rates have one column per key; a book without them prices no flex-start.
      const row = query.flexStart ? data.flex?.[query.region] : data.regions[query.region];
      const parts = row && componentsOf(query, catalog);
      if (!parts) return undefined;
      let usd = 0;
      for (const part of parts) {
        const at = column.get(part.key satisfies RateKey);
        const rate = at === undefined ? undefined : query.flexStart ? row[at] : row[2 * at + (query.spot ? 1 : 0)];
        if (rate === undefined || rate === null) return undefined;
        usd += part.quantity * rate;
      }
      return round6(usd);
    },
  };
}

/** Bytes the book takes as JSON: what each refresh adds to the workflow's history. */
export function bookBytes(data: PriceBookData): number {
  return Buffer.byteLength(JSON.stringify(data));
}
