/**
 * The price book's contract: the compact book the priceBook workflow holds, its
 * settings, and the activity that refreshes it. Plain JSON throughout: the book is an
 * activity result, a query answer and continue-as-new input, so it stays small (one row
 * of numbers per region; a few kB for GCE's ~40 regions).
 */

/** Where the rates came from: the Cloud Billing Catalog, or the bundled catalog (config/catalog.ts). */
export const PriceSource = { Billing: 'billing', Catalog: 'catalog' } as const;
export type PriceSource = (typeof PriceSource)[keyof typeof PriceSource];

export interface PriceBookData {
  /** When the rates were read (ISO 8601): the date every offer and ledger line priced from them carries. */
  asOf: string;
  source: PriceSource;
  /** The rate keys (config/catalog.ts RateKey: core:<family>, ram:<family>, gpu:<type>), in column order. */
  keys: string[];
  /**
   * Region -> two numbers per key, on demand then spot, USD per unit-hour; null where the
   * region sells no such thing.
   */
  regions: Record<string, (number | null)[]>;
  /** Region -> one number per key: flex-start (DWS) rates, where the catalog has any; they price FLEX_START offers. */
  flex?: Record<string, (number | null)[]>;
  /** How many SKUs were read, mapped to a rate, and skipped (see config/billing-skus.ts). */
  skus?: { read: number; used: number; skipped: number };
}

/** What an offer and a ledger line say about the prices they used. */
export interface PriceStamp {
  asOf: string;
  source: PriceSource;
  /** Set when the prices are not what was asked for: the Billing Catalog could not be read. */
  warning?: string;
}

export interface PriceBookSettings {
  /** Seconds between refreshes; 0 turns the scheduled refresh off (the book is read once, and on request). */
  refreshSeconds: number;
  /** `billing` reads the Cloud Billing Catalog (falling back to the bundled catalog); `catalog` never calls it. */
  source: PriceSource;
}

export const DEFAULT_PRICE_BOOK_SETTINGS: PriceBookSettings = { refreshSeconds: 24 * 3600, source: PriceSource.Billing };

/** The refresh activity's answer: a book, and why the Billing Catalog could not be read if it could not. */
export interface RefreshResult {
  book: PriceBookData;
  /** Set when `book` is the bundled catalog because the Billing Catalog failed (no permission, no network...). */
  billingError?: string;
}

export interface PriceBookActivities {
  refreshPriceBook(input: { source: PriceSource }): Promise<RefreshResult>;
}

/** The workflow's durable state, carried through continue-as-new. */
export interface PriceBookState {
  book?: PriceBookData;
  warning?: string;
  /** Refreshes done, over all runs of the workflow. */
  refreshes: number;
  /** Epoch ms of the last refresh attempt. */
  lastRefreshMs?: number;
}

export interface PriceBookInput {
  settings: PriceBookSettings;
  state?: PriceBookState;
  /** A refresh was asked for and not yet done when the previous run continued as new. */
  refreshWanted?: boolean;
}

/** What the `priceBook` query answers. */
export interface PriceBookView {
  book?: PriceBookData;
  stamp?: PriceStamp;
  refreshes: number;
  settings: PriceBookSettings;
  /** ISO time of the next scheduled refresh; absent when the refresh is off. */
  nextRefreshAt?: string;
}

/**
 * The memo key under which the price book says which book it holds (its refresh count):
 * readers keep the book they last queried and ask again only when this moves, reading
 * it with a describe, which no worker has to answer.
 */
export const PRICE_BOOK_MEMO = 'sternaPriceBook';

export interface PriceBookMemo {
  refreshes: number;
}

/** One price book per task queue: the public catalog's list prices are the same for every project. */
export function priceBookWorkflowId(taskQueue: string): string {
  return `sterna-price-book-${taskQueue}`;
}
