/**
 * How a refresh changes the book. Pure. A good Billing Catalog read replaces the book; a
 * failed one keeps an earlier Billing book (prices a day old beat remembered ones) and
 * otherwise takes the bundled catalog; either way the book carries a warning saying so.
 */
import { PriceSource, type PriceBookState, type PriceStamp, type RefreshResult } from './contract';

export function absorbRefresh(state: PriceBookState, result: RefreshResult, nowMs: number): void {
  state.refreshes += 1;
  state.lastRefreshMs = nowMs;
  if (!result.billingError) {
    state.book = result.book;
    state.warning = undefined;
    return;
  }
  const at = new Date(nowMs).toISOString();
  if (state.book?.source === PriceSource.Billing) {
    state.warning = `the Cloud Billing Catalog could not be read at ${at} (${result.billingError}); prices are still those read at ${state.book.asOf}`;
    return;
  }
  state.book = result.book;
  state.warning = `the Cloud Billing Catalog could not be read at ${at} (${result.billingError}); prices are the bundled catalog's (config/catalog.ts, as of ${result.book.asOf})`;
}

export function stampOf(state: PriceBookState): PriceStamp | undefined {
  if (!state.book) return undefined;
  return { asOf: state.book.asOf, source: state.book.source, ...(state.warning ? { warning: state.warning } : {}) };
}

/** Epoch ms of the next scheduled refresh, or undefined when the refresh is off. */
export function nextRefreshMs(state: PriceBookState, refreshSeconds: number): number | undefined {
  if (refreshSeconds <= 0 || state.lastRefreshMs === undefined) return undefined;
  return state.lastRefreshMs + refreshSeconds * 1000;
}
