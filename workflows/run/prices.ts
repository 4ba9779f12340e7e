/**
 * What a run knows about its prices: the price book's date and source, the fallback
 * warning, and the zones that offer its accelerator but could not be priced. Pure.
 */
import type { CapacityFound, UnpricedZone } from '../activity-contract';
import type { PriceStamp } from '../pricing-book/contract';
import type { Offer } from '../types';
import type { RunPrices } from './state';

/** The status keeps this many unpriced zones by name (and counts the rest). */
const UNPRICED_LISTED = 50;

/** The offers event: findCapacity's answer, read from new and pre-price-book histories (a bare Offer[]) alike. */
export function capacityFound(result: CapacityFound | Offer[]): Omit<Partial<CapacityFound>, 'offers'> & { offers: Offer[] } {
  return Array.isArray(result) ? { offers: result } : result;
}

export function absorbPrices(state: { prices?: RunPrices }, event: { unpriced?: UnpricedZone[]; prices?: PriceStamp }): void {
  if (!event.prices) return;
  const unpriced = event.unpriced ?? [];
  state.prices = {
    asOf: event.prices.asOf,
    source: event.prices.source,
    ...(event.prices.warning ? { warning: event.prices.warning } : {}),
    unpriced: unpriced.slice(0, UNPRICED_LISTED).map((u) => `${u.zone} ${u.accelerator} ${u.machineType}`),
    unpricedCount: unpriced.length,
  };
}

/** For the no-capacity message: what could not be priced, if anything. */
export function unpricedNote(prices: RunPrices | undefined): string {
  if (!prices || prices.unpricedCount === 0) return '';
  return `; ${prices.unpricedCount} zone(s) offer it but the price book (${prices.source}, ${prices.asOf}) has no price there: ${prices.unpriced.slice(0, 5).join(', ')}`;
}
