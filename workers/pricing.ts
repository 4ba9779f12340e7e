/**
 * The price book's side of the composition root: the Cloud Billing Catalog client and
 * the worker options that keep a price book. Real GCP: cloudbilling.googleapis.com over
 * REST, with an API key (STERNA_BILLING_API_KEY) or Application Default Credentials. The
 * emulator: plain HTTP on loopback with a pass-through auth client, as for Compute.
 */
import { createRequire } from 'node:module';
import { CloudCatalogClient } from '@google-cloud/billing';
import type { PassThroughClient } from 'google-auth-library';
import { billingCatalog, type BillingCatalog } from '../activities/pricing';
import type { PricesConfig } from '../config/worker-config';
import type { PriceBookSettings } from '../workflows/api';

type BillingClientOptions = NonNullable<ConstructorParameters<typeof CloudCatalogClient>[0]>;

/**
 * A pass-through auth client of the google-auth-library that billing's own google-gax
 * checks against. Billing's newest release (5.1.2) is still built on google-gax 5 and
 * google-auth-library 10, while Compute 7 and the rest of Sterna are on 6 and 11; a
 * client of the other major is a different class to it.
 */
function billingPassThroughClient(): BillingClientOptions['authClient'] {
  const fromBilling = createRequire(require.resolve('@google-cloud/billing'));
  const auth = fromBilling('google-auth-library') as { PassThroughClient: new () => PassThroughClient };
  return new auth.PassThroughClient() as unknown as BillingClientOptions['authClient'];
}

export function billingClientOptions(prices: PricesConfig): ConstructorParameters<typeof CloudCatalogClient>[0] {
  const endpoint = prices.billingEndpoint;
  if (endpoint && endpoint.protocol === 'http') {
    process.env.METADATA_SERVER_DETECTION = 'none';
    return { apiEndpoint: endpoint.host, port: endpoint.port, protocol: 'http', authClient: billingPassThroughClient(), fallback: true };
  }
  return { fallback: true, ...(endpoint ? { apiEndpoint: endpoint.host, port: endpoint.port } : {}), ...(prices.apiKey ? { apiKey: prices.apiKey } : {}) };
}

export function buildBillingCatalog(prices: PricesConfig): BillingCatalog | undefined {
  if (prices.source === 'catalog') return undefined;
  return billingCatalog(new CloudCatalogClient(billingClientOptions(prices)));
}

export function priceBookSettings(prices: PricesConfig): PriceBookSettings {
  return { source: prices.source, refreshSeconds: prices.refreshSeconds };
}
