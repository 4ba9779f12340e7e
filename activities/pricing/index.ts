/**
 * The price book's activity and the way runs read the book.
 *
 *   refreshPriceBook (priceBook workflow, on its timer): the Billing Catalog, or the
 *     bundled catalog with a warning in the worker log when it cannot be read
 *   priceBookReader (findCapacity): the book the priceBook workflow holds, queried when its memo says it changed;
 *     starts that workflow when it is not running
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { defaultCatalog, type Catalog } from '../../config/catalog';
import type { PriceBook } from '../../config/price-book';
import { PRICE_BOOK_MEMO, type PriceBookActivities, type PriceBookInput, type PriceBookMemo, priceBookQuery, type PriceBookSettings, priceBookWorkflowId, PriceSource, refreshPricesSignal } from '../../workflows/api';
import { billingErrorText, type BillingCatalog } from './billing-catalog';
import { bookFromCatalog, bookPriceBook } from './book-data';

export { billingCatalog, type BillingCatalog } from './billing-catalog';

export interface PricingOptions {
  /** The Billing Catalog reader; without one, the bundled catalog is the book (with a warning unless asked for). */
  billing?: BillingCatalog;
  catalog?: Catalog;
  /** The worker log (the activity logger by default). */
  warn?: (message: string, attributes: Record<string, unknown>) => void;
}

export function createPricingActivities(options: PricingOptions): PriceBookActivities {
  const catalog = options.catalog ?? defaultCatalog;
  const warn = options.warn ?? ((message, attributes) => Context.current().log.warn(message, attributes));
  return {
    async refreshPriceBook({ source }) {
      if (source === PriceSource.Catalog) return { book: bookFromCatalog(catalog) };
      if (!options.billing) {
        const billingError = 'this worker has no Cloud Billing Catalog client configured';
        warn(`price book: ${billingError}; pricing from the bundled catalog`, { billingError, pricesAsOf: catalog.pricesAsOf });
        return { book: bookFromCatalog(catalog), billingError };
      }
      try {
        return { book: await options.billing.readBook() };
      } catch (err) {
        const billingError = billingErrorText(err);
        warn(`price book: the Cloud Billing Catalog could not be read (${billingError}); pricing from the bundled catalog of ${catalog.pricesAsOf} unless an earlier Billing book is held`, {
          billingError,
          pricesAsOf: catalog.pricesAsOf,
        });
        return { book: bookFromCatalog(catalog), billingError };
      }
    },
  };
}

/** How long findCapacity waits for a book being read for the first time. */
const FIRST_BOOK_WAIT_MS = 40_000;

/**
 * The PriceBook runs price offers with: the one the priceBook workflow of `taskQueue`
 * holds. Starts that workflow (with `settings`) when it is not running.
 *
 * The book is queried (a worker answers, from the workflow) only when the workflow's memo
 * says it holds another book than the one kept here; otherwise a describe, which the
 * server answers alone, is all a placement costs. Behind a loaded worker a query waits
 * for a workflow task, and every placement asked one.
 */
export function priceBookReader(client: Client, settings: PriceBookSettings, catalog: Catalog = defaultCatalog): (taskQueue: string) => Promise<PriceBook> {
  const kept = new Map<string, { version: string; book: PriceBook }>();
  return async (taskQueue) => {
    const workflowId = priceBookWorkflowId(taskQueue);
    const handle = client.workflow.getHandle(workflowId);
    const giveUpAt = Date.now() + FIRST_BOOK_WAIT_MS;
    for (;;) {
      try {
        const description = await handle.describe();
        // The chain's first run tells a book started again (its count starts over) from the one kept.
        const chain = description.raw.workflowExecutionInfo?.firstRunId;
        const memo = description.memo?.[PRICE_BOOK_MEMO] as PriceBookMemo | undefined;
        const held = chain && typeof memo?.refreshes === 'number' ? `${chain}/${memo.refreshes}` : undefined;
        const hit = kept.get(taskQueue);
        if (held !== undefined && hit?.version === held) return hit.book;
        const view = await handle.query(priceBookQuery);
        if (view.book && view.stamp) {
          const book = bookPriceBook(view.book, view.stamp, catalog);
          // Kept even when the describe came before the book's first memo: the next describe
          // names this version, and a book without a memo (older runs) is never taken from here.
          if (chain) kept.set(taskQueue, { version: `${chain}/${view.refreshes}`, book });
          return book;
        }
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        await startPriceBook(client, { taskQueue, settings, requester: 'findCapacity', signal: false });
      }
      if (Date.now() > giveUpAt) throw new Error(`the price book ${workflowId} has no book yet after ${FIRST_BOOK_WAIT_MS / 1000} s; is its refreshPriceBook activity failing?`);
      await sleep(250);
    }
  };
}

/**
 * Starts the price book of a task queue if it is not running. A worker starting
 * (`signal: true`) also asks it to refresh now with the worker's settings.
 */
export async function startPriceBook(client: Client, request: { taskQueue: string; settings: PriceBookSettings; requester: string; signal: boolean }): Promise<string> {
  const workflowId = priceBookWorkflowId(request.taskQueue);
  const input: PriceBookInput = { settings: request.settings };
  if (request.signal) {
    await client.workflow.signalWithStart('priceBook', {
      workflowId,
      taskQueue: request.taskQueue,
      args: [input],
      signal: refreshPricesSignal,
      signalArgs: [{ requester: request.requester, settings: request.settings }],
    });
  } else {
    await client.workflow.start('priceBook', { workflowId, taskQueue: request.taskQueue, args: [input], workflowIdConflictPolicy: 'USE_EXISTING' });
  }
  return workflowId;
}
