/**
 * Reading the Cloud Billing Catalog through the real `@google-cloud/billing`
 * CloudCatalogClient: every Compute Engine SKU, in USD, into a compact book. The same code
 * reads cloudbilling.googleapis.com and the emulator (which serves
 * /v1/services/{service}/skus from its catalog); only the client options differ
 * (workers/pricing.ts).
 */
import type { CloudCatalogClient } from '@google-cloud/billing';
import { COMPUTE_ENGINE_SERVICE_ID } from '../../config/billing-skus';
import type { PriceBookData } from '../../workflows/api';
import { retryTransient, withDeadline } from '../providers/transient';
import { BookBuilder } from './book-data';

/** The largest page the API serves. */
const PAGE_SIZE = 5000;
/** One whole listing (a few pages): abandoned and retried past this. */
const LISTING_TIMEOUT_MS = 120_000;

export interface BillingCatalog {
  /** Reads the book now; throws when the catalog cannot be read (no permission, no network...). */
  readBook(): Promise<PriceBookData>;
}

export function billingCatalog(client: CloudCatalogClient, options: { timeoutMs?: number; maxElapsedMs?: number } = {}): BillingCatalog {
  return {
    async readBook() {
      return retryTransient(
        () =>
          withDeadline(
            (async () => {
              const asOf = new Date().toISOString();
              const builder = new BookBuilder();
              const request = { parent: `services/${COMPUTE_ENGINE_SERVICE_ID}`, currencyCode: 'USD', pageSize: PAGE_SIZE };
              // Async iteration pages lazily; saying so silences gax's AutopaginateTrueWarning.
              for await (const sku of client.listSkusAsync(request, { autoPaginate: false })) builder.add(sku);
              return builder.build(asOf);
            })(),
            options.timeoutMs ?? LISTING_TIMEOUT_MS,
            'listing Compute Engine SKUs',
          ),
        { maxElapsedMs: options.maxElapsedMs ?? 30_000 },
      );
    },
  };
}

/** gRPC status codes gax reports, by name (what the API's own error says). */
const CODE_NAMES: Record<number, string> = { 3: 'INVALID_ARGUMENT', 4: 'DEADLINE_EXCEEDED', 5: 'NOT_FOUND', 7: 'PERMISSION_DENIED', 8: 'RESOURCE_EXHAUSTED', 14: 'UNAVAILABLE', 16: 'UNAUTHENTICATED' };

/** gax errors carry the API's message as JSON or text; the first line, with the status name, is what a person needs. */
export function billingErrorText(err: unknown): string {
  const e = err as { code?: unknown; message?: string; details?: string };
  const message = (e?.details || e?.message || String(err)).split('\n')[0].slice(0, 300);
  const code = typeof e?.code === 'number' ? (CODE_NAMES[e.code] ?? `code ${e.code}`) : typeof e?.code === 'string' ? e.code : undefined;
  return code ? `${code}: ${message}` : message;
}
