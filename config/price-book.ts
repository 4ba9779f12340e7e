/** The catalog as the GCE provider's PriceBook: shapes, prices and quota metrics. */
import type { PriceStamp } from '../workflows/api';
import { defaultCatalog, hasBuiltInAccelerators, machineTypeFor, pricePerHour, quotaMetric, type Catalog } from './catalog';

export type { PriceStamp };

/** Prices and shapes for the providers (an interface, so a trace replay can bring its own). */
export interface PriceBook {
  /** The machine type to use for `count` x `accelerator`, unless the spec names one. */
  machineTypeFor(accelerator: string, count: number): string | undefined;
  /** Whole-instance USD/hour in a region, or undefined when the region does not sell it. */
  pricePerHour(query: { region: string; machineType: string; accelerator: string; count: number; spot: boolean; flexStart?: boolean }): number | undefined;
  /** GCE quota metric for the accelerator, e.g. NVIDIA_L4_GPUS. */
  quotaMetric(accelerator: string): string | undefined;
  /** True when the machine type has the GPUs built in (a2, a3, g2); false for n1 + guestAccelerators. */
  hasBuiltInAccelerators(machineType: string): boolean;
  /** Where the prices come from and as of when: every offer carries it. */
  readonly stamp: PriceStamp;
}

/** The bundled catalog's prices (the emulator's truth; a trace replay's own prices). */
export function catalogPriceBook(catalog: Catalog = defaultCatalog): PriceBook {
  return {
    machineTypeFor: (accelerator, count) => machineTypeFor(accelerator, count, catalog),
    pricePerHour: (query) => pricePerHour(query, catalog),
    quotaMetric: (accelerator) => quotaMetric(accelerator, catalog),
    hasBuiltInAccelerators: (machineType) => hasBuiltInAccelerators(machineType, catalog),
    stamp: { asOf: catalog.pricesAsOf, source: 'catalog' },
  };
}
