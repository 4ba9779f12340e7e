/** The price book's messages. */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { PriceBookSettings, PriceBookView } from './contract';

/** The book, its stamp and its schedule (no history event: runs read prices through it). */
export const priceBookQuery = defineQuery<PriceBookView>('priceBook');

/**
 * Refresh now (`sterna prices --refresh`, a worker starting). `settings`, when given,
 * apply from now on: workers restarted with a new configuration change a running book.
 */
export const refreshPricesSignal = defineSignal<[request: { requester: string; settings?: PriceBookSettings }]>('refreshPrices');
