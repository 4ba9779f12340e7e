/** The catalog as the GCE provider's PriceBook: shapes, prices and quota metrics. */
import type { PriceBook } from '../activities/providers/gce';
import { defaultCatalog, hasBuiltInAccelerators, machineTypeFor, pricePerHour, quotaMetric, type Catalog } from './catalog';

export function catalogPriceBook(catalog: Catalog = defaultCatalog): PriceBook {
  return {
    machineTypeFor: (accelerator, count) => machineTypeFor(accelerator, count, catalog),
    pricePerHour: (query) => pricePerHour(query, catalog),
    quotaMetric: (accelerator) => quotaMetric(accelerator, catalog),
    hasBuiltInAccelerators: (machineType) => hasBuiltInAccelerators(machineType, catalog),
  };
}
