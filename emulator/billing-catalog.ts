/**
 * The Cloud Billing Catalog, as cloudbilling.googleapis.com serves it over REST, for the
 * one service Sterna reads (Compute Engine, 6F81-5844-456A): `GET /v1/services` and
 * `GET /v1/services/{service}/skus` with `currencyCode`, `pageSize` and `pageToken`.
 * The SKUs are written from the emulator's catalog through config/billing-skus.ts: one
 * SKU per rate and model for each group of regions that share a place name and a price,
 * as the real catalog groups them ("... running in Americas"). So the price a worker
 * reads is the price the emulator bills.
 *
 * The admin API (POST /emulator/v1/billing-catalog) changes single rates in a region
 * (the catalog's `rateOverrides`; running VMs start a new billing segment at the new
 * price) and can refuse access, as the real API does to a caller without permission.
 * Neither is persisted: a restarted emulator serves its catalog's prices, openly.
 */
import { z } from 'zod';
import { COMPUTE_ENGINE_SERVICE_ID, RateModel, skuDescription, USAGE_UNITS, usageTypeOf } from '../config/billing-skus';
import { baseRates, flexRateIn, rateIn, type Catalog, type RateKey } from '../config/catalog';
import { fnv1a } from '../workflows/api';
import { GceError, Reason } from './errors';

const SERVICE_NAME = `services/${COMPUTE_ENGINE_SERVICE_ID}`;
const MAX_PAGE_SIZE = 5000;

/** The real API's error shape (google.rpc.Status as JSON). */
export class BillingApiError extends Error {
  constructor(
    readonly status: number,
    readonly rpcStatus: string,
    message: string,
  ) {
    super(message);
  }

  toJSON(): unknown {
    return { error: { code: this.status, message: this.message, status: this.rpcStatus } };
  }
}

/** The place a SKU description names for a region (the real catalog uses continents and cities alike). */
function placeOf(region: string): string {
  if (/^(us|northamerica|southamerica)-/.test(region)) return 'Americas';
  if (/^(europe|me|africa)-/.test(region)) return 'EMEA';
  if (/^(asia|australia)-/.test(region)) return 'APAC';
  return region;
}

function skuId(description: string, regions: string[]): string {
  const hex = (text: string) => parseInt(fnv1a(text), 36).toString(16).toUpperCase().padStart(8, '0');
  const h = hex(description) + hex(regions.join(','));
  return `${h.slice(0, 4)}-${h.slice(4, 8)}-${h.slice(8, 12)}`;
}

export interface EmulatedSku {
  name: string;
  skuId: string;
  description: string;
  category: { serviceDisplayName: string; resourceFamily: string; resourceGroup: string; usageType: string };
  serviceRegions: string[];
  pricingInfo: {
    summary: string;
    pricingExpression: {
      usageUnit: string;
      usageUnitDescription: string;
      baseUnit: string;
      baseUnitDescription: string;
      baseUnitConversionFactor: number;
      displayQuantity: number;
      tieredRates: { startUsageAmount: number; unitPrice: { currencyCode: string; units: string; nanos: number } }[];
    };
    currencyConversionRate: number;
    effectiveTime: string;
  }[];
  serviceProviderName: string;
}

/** Every SKU the catalog's rates make, in a stable order. */
export function skusOf(catalog: Catalog, effectiveTime: string): EmulatedSku[] {
  const skus: EmulatedSku[] = [];
  for (const { key } of baseRates(catalog)) {
    const kind = key.slice(0, key.indexOf(':')) as 'core' | 'ram' | 'gpu';
    for (const model of [RateModel.OnDemand, RateModel.Spot, RateModel.Flex]) {
      const groups = new Map<string, { place: string; usd: number; regions: string[] }>();
      for (const region of Object.keys(catalog.regions).sort()) {
        const usd = model === RateModel.Flex ? flexRateIn(region, key, catalog) : rateIn(region, key, model === RateModel.Spot, catalog);
        if (usd === undefined) continue;
        const place = placeOf(region);
        const group = groups.get(`${place}|${usd}`) ?? { place, usd, regions: [] };
        group.regions.push(region);
        groups.set(`${place}|${usd}`, group);
      }
      for (const { place, usd, regions } of groups.values()) {
        const description = skuDescription(key, model, place);
        if (description) skus.push(sku(description, kind, model, regions, usd, effectiveTime));
      }
    }
  }
  return skus;
}

function sku(description: string, kind: 'core' | 'ram' | 'gpu', model: RateModel, regions: string[], usd: number, effectiveTime: string): EmulatedSku {
  const id = skuId(description, regions);
  const ram = kind === 'ram';
  const units = Math.floor(usd);
  return {
    name: `${SERVICE_NAME}/skus/${id}`,
    skuId: id,
    description,
    category: { serviceDisplayName: 'Compute Engine', resourceFamily: 'Compute', resourceGroup: kind === 'gpu' ? 'GPU' : ram ? 'RAM' : 'CPU', usageType: usageTypeOf(model) },
    serviceRegions: regions,
    pricingInfo: [
      {
        summary: '',
        pricingExpression: {
          usageUnit: USAGE_UNITS[kind],
          usageUnitDescription: ram ? 'gibibyte hour' : 'hour',
          baseUnit: ram ? 'By.s' : 's',
          baseUnitDescription: ram ? 'byte second' : 'second',
          baseUnitConversionFactor: ram ? 3600 * 2 ** 30 : 3600,
          displayQuantity: 1,
          tieredRates: [{ startUsageAmount: 0, unitPrice: { currencyCode: 'USD', units: String(units), nanos: Math.round((usd - units) * 1e9) } }],
        },
        currencyConversionRate: 1,
        effectiveTime,
      },
    ],
    serviceProviderName: 'Google',
  };
}

const RateChange = z.strictObject({
  region: z.string().min(1),
  /** A rate key: core:<family>, ram:<family> or gpu:<accelerator type>. */
  rate: z.string().regex(/^(core|ram|gpu):[a-z0-9-]+$/, 'core:<family>, ram:<family> or gpu:<accelerator type>'),
  model: z.enum(['onDemand', 'spot']),
  /** USD per unit-hour; null restores base x the region's multiplier. */
  usdPerHour: z.number().min(0).max(1000).nullable(),
});

export const BillingCatalogAdminBody = z.strictObject({
  /** `denied` answers every Billing Catalog call 403 PERMISSION_DENIED, as for a caller without access. */
  access: z.enum(['granted', 'denied']).optional(),
  rates: z.array(RateChange).max(1000).optional(),
});

export interface BillingCatalogView {
  access: 'granted' | 'denied';
  effectiveTime: string;
  skus: number;
  overrides: { region: string; rate: string; model: 'onDemand' | 'spot'; usdPerHour: number }[];
}

export class BillingCatalogService {
  private access: 'granted' | 'denied' = 'granted';
  private effectiveTime: string;

  constructor(
    private readonly catalog: Catalog,
    private readonly now: () => number,
    /** Called after a price change, so running VMs are billed at the new price from now on. */
    private readonly repriced: () => void,
  ) {
    this.effectiveTime = new Date(now()).toISOString();
  }

  /** GET /v1/...: `segments` are the path's after `v1`. */
  serve(method: string, segments: string[], query: URLSearchParams): { status: number; body: unknown } {
    if (this.access === 'denied') {
      throw new BillingApiError(403, 'PERMISSION_DENIED', 'The caller does not have permission (the emulator denies Cloud Billing Catalog access; see its admin API)');
    }
    if (method !== 'GET') throw new BillingApiError(405, 'UNIMPLEMENTED', `Method ${method} is not supported here`);
    if (segments.length === 1 && segments[0] === 'services') {
      return { status: 200, body: { services: [{ name: SERVICE_NAME, serviceId: COMPUTE_ENGINE_SERVICE_ID, displayName: 'Compute Engine', businessEntityName: 'businessEntities/GCP' }] } };
    }
    if (segments.length === 3 && segments[0] === 'services' && segments[2] === 'skus') {
      if (segments[1] !== COMPUTE_ENGINE_SERVICE_ID) throw new BillingApiError(404, 'NOT_FOUND', `Service services/${segments[1]} was not found (the emulator serves Compute Engine, ${COMPUTE_ENGINE_SERVICE_ID})`);
      return { status: 200, body: this.page(query) };
    }
    throw new BillingApiError(404, 'NOT_FOUND', `The requested URL /v1/${segments.join('/')} was not found on this server.`);
  }

  private page(query: URLSearchParams): { skus: EmulatedSku[]; nextPageToken: string } {
    const currency = query.get('currencyCode') ?? 'USD';
    if (currency !== 'USD') throw new BillingApiError(400, 'INVALID_ARGUMENT', `currencyCode ${currency}: the emulator prices in USD only`);
    const size = query.has('pageSize') ? Number(query.get('pageSize')) : MAX_PAGE_SIZE;
    if (!Number.isInteger(size) || size < 0) throw new BillingApiError(400, 'INVALID_ARGUMENT', `pageSize must be a non-negative integer, not ${query.get('pageSize')}`);
    const token = query.get('pageToken') ?? '';
    const start = token === '' ? 0 : Number(/^o(\d+)$/.exec(token)?.[1] ?? NaN);
    if (!Number.isInteger(start)) throw new BillingApiError(400, 'INVALID_ARGUMENT', `Invalid pageToken '${token}'`);
    const all = skusOf(this.catalog, this.effectiveTime);
    const end = start + Math.min(size === 0 ? MAX_PAGE_SIZE : size, MAX_PAGE_SIZE);
    return { skus: all.slice(start, end), nextPageToken: end < all.length ? `o${end}` : '' };
  }

  admin(method: string, body: unknown): BillingCatalogView {
    if (method === 'POST') {
      const parsed = BillingCatalogAdminBody.safeParse(body);
      if (!parsed.success) throw new GceError(400, Reason.Invalid, parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; '));
      const change = parsed.data;
      for (const r of change.rates ?? []) this.checkRate(r.region, r.rate as RateKey);
      if (change.access) this.access = change.access;
      if (change.rates?.length) {
        for (const r of change.rates) this.setRate(r.region, r.rate as RateKey, r.model, r.usdPerHour);
        this.effectiveTime = new Date(this.now()).toISOString();
        this.repriced();
      }
    }
    return this.view();
  }

  private checkRate(region: string, key: RateKey): void {
    if (!this.catalog.regions[region]) throw new GceError(400, Reason.Invalid, `rates: no region ${region} in the emulator's catalog`);
    if (!baseRates(this.catalog).some((b) => b.key === key)) throw new GceError(400, Reason.Invalid, `rates: no rate ${key} in the emulator's catalog`);
  }

  private setRate(region: string, key: RateKey, model: 'onDemand' | 'spot', usd: number | null): void {
    // The emulator's catalog is its own copy (server.ts), so its rates may change at runtime.
    const r = this.catalog.regions[region] as { rateOverrides?: Record<string, Partial<Record<'onDemand' | 'spot', number>>> };
    const overrides = (r.rateOverrides ??= {});
    const entry = (overrides[key] ??= {});
    if (usd === null) delete entry[model];
    else entry[model] = usd;
    if (Object.keys(entry).length === 0) delete overrides[key];
  }

  view(): BillingCatalogView {
    const overrides: BillingCatalogView['overrides'] = [];
    for (const [region, r] of Object.entries(this.catalog.regions)) {
      for (const [rate, entry] of Object.entries(r.rateOverrides ?? {})) {
        for (const model of ['onDemand', 'spot'] as const) {
          const usd = (entry as Partial<Record<'onDemand' | 'spot', number>>)[model];
          if (usd !== undefined) overrides.push({ region, rate, model, usdPerHour: usd });
        }
      }
    }
    return { access: this.access, effectiveTime: this.effectiveTime, skus: skusOf(this.catalog, this.effectiveTime).length, overrides };
  }
}
