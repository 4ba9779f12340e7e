/**
 * The price book's side of the composition root: the Cloud Billing Catalog client and
 * the worker options that keep a price book. Real GCP: cloudbilling.googleapis.com over
 * REST, with an API key (STERNA_BILLING_API_KEY) or Application Default Credentials. The
 * emulator: plain HTTP on loopback with a pass-through auth client, as for Compute.
 */
import { CloudCatalogClient } from '@google-cloud/billing';
import { PassThroughClient } from 'google-auth-library';
import { billingCatalog, type BillingCatalog } from '../activities/pricing';
import type { PricesConfig } from '../config/worker-config';
import type { PriceBookSettings } from '../workflows/api';

export function billingClientOptions(prices: PricesConfig): ConstructorParameters<typeof CloudCatalogClient>[0] {
  const endpoint = prices.billingEndpoint;
  if (endpoint && endpoint.protocol === 'http') {
    process.env.METADATA_SERVER_DETECTION = 'none';
    return { apiEndpoint: endpoint.host, port: endpoint.port, protocol: 'http', authClient: new PassThroughClient(), fallback: true };
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
