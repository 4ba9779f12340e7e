/**
 * The GPU catalog: machine types, accelerator types, regions and zones, prices and
 * default quotas. The emulator serves it as Compute Engine resources; the provider
 * prices offers from it (GCE has no price API in the Compute surface).
 *
 * Prices are component rates, as GCE bills them (and as the Cloud Billing Catalog lists
 * them, see config/billing-skus.ts): USD per vCPU-hour and per GiB-hour of each machine
 * family, and per GPU-hour of each accelerator; a machine's price is the sum of its
 * components. They approximate Google Cloud's public list prices
 * (cloud.google.com/compute/vm-instance-pricing, /compute/gpus-pricing and
 * /spot-vms/pricing) as of January 2025, written from memory of those pages, not
 * fetched. us-central1 is the base; other regions apply one multiplier approximating the
 * published regional differences, and a region may override single rates.
 *
 * Workers price offers from the Cloud Billing Catalog (activities/pricing); this table is
 * the emulator's source of truth (it serves its Billing Catalog from it) and the
 * workers' fallback when the Billing Catalog cannot be read.
 * Sustained-use and committed-use discounts are not modelled.
 */

import { regionOf } from '../workflows/api';

export const PRICES_AS_OF = '2025-01-15';

/** USD per unit-hour, on demand and spot; flex-start (DWS) where GCE sells it. */
export interface Rate {
  onDemand: number;
  spot: number;
  /**
   * Flex-start (Dynamic Workload Scheduler) rate, absent where flex-start is not sold:
   * flex-start VMs are accelerator-optimized only (A2, A3, A4, G2...), so N1, E2 and the
   * GPUs attached to N1 have none.
   */
  flexStart?: number;
}

/**
 * What one rate prices: a vCPU-hour or a GiB-hour of a machine family, or a GPU-hour of
 * an accelerator type. The Billing Catalog's SKUs map onto these (config/billing-skus.ts).
 */
export type RateKey = `core:${string}` | `ram:${string}` | `gpu:${string}`;

export interface MachineFamily {
  /** USD per vCPU-hour. */
  core: Rate;
  /** USD per GiB-hour of memory. */
  ramGb: Rate;
}

export interface AcceleratorType {
  /** GCE accelerator type name, e.g. nvidia-l4. */
  name: string;
  description: string;
  /** Regional quota metric; spot VMs use `PREEMPTIBLE_` + this. */
  quotaMetric: string;
  maximumCardsPerInstance: number;
  /** Counts GCE allows when the GPU is attached to an N1 VM (undefined: not attachable). */
  attachableCounts?: readonly number[];
  /** USD/hour per GPU, attached (N1) or built in (A2, A3, G2), in us-central1. */
  usdPerHour: Rate;
}

export interface MachineType {
  name: string;
  /** The machine family whose core and RAM rates price it (n1, e2, g2, a2, a3). */
  family: string;
  guestCpus: number;
  memoryMb: number;
  /** Accelerators that come with the machine type (A2, A3, G2). */
  builtIn?: { type: string; count: number };
  /** True for N1: GPUs are attached with `guestAccelerators`. */
  acceptsAttachedGpus: boolean;
  /** Whole-machine USD/hour in us-central1 (built-in GPUs included; attached GPUs not), from the rates. */
  usdPerHour: Rate;
}

export interface Zone {
  name: string;
  region: string;
  /** Accelerator types offered in the zone. */
  accelerators: readonly string[];
}

export interface Region {
  name: string;
  description: string;
  /** Price multiplier relative to us-central1 (1 = same price). */
  priceMultiplier: number;
  zones: readonly Zone[];
  /**
   * Whole-instance prices that replace the computed ones, keyed by `instanceKey()`.
   * Used by trace replay, whose prices are per instance and per region.
   */
  instancePrices?: Readonly<Record<string, Rate>>;
  /** Rates that differ from base x multiplier in this region (the emulator's admin API sets them). */
  rateOverrides?: Readonly<Record<RateKey, Partial<Rate>>>;
}

export interface Catalog {
  pricesAsOf: string;
  families: Readonly<Record<string, MachineFamily>>;
  accelerators: Readonly<Record<string, AcceleratorType>>;
  machineTypes: Readonly<Record<string, MachineType>>;
  regions: Readonly<Record<string, Region>>;
  /** Default regional GPU quota per project (GPUs), unless changed through the emulator's admin API. */
  defaultQuota: { onDemandGpus: number; preemptibleGpus: number };
  /** Default GPUs of each offered accelerator type per zone that can be allocated, per provisioning model. */
  defaultCapacity: { spotGpus: number; onDemandGpus: number; flexStartGpus?: number };
}

/**
 * Flex-start (DWS) prices, remembered like the rest: GCE sells flex-start A2, A3 and A4
 * vCPUs, memory and GPUs at a discount (cloud.google.com/compute/docs/instances/
 * about-flex-start-vms; "up to about half off" on-demand, /products/dws/pricing), and
 * G2 (L4) flex-start at on-demand rates. Approximated as half the on-demand rate for
 * A2/A3, the on-demand rate for G2.
 */
const FLEX_START_DISCOUNT = 0.5;
function flexOf(onDemand: number): number {
  return Math.round(onDemand * FLEX_START_DISCOUNT * 1e6) / 1e6;
}

/**
 * Emulated seconds a flex-start request is expected to wait for capacity, per GPU type:
 * an assumption, not a published figure (GCE publishes no expected wait; its requests
 * wait at most 2 hours). Offers carry it; the policy weighs it against the deadline.
 */
export const FLEX_START_EXPECTED_WAIT_SECONDS: Readonly<Record<string, number>> = {
  'nvidia-l4': 300,
  'nvidia-tesla-a100': 900,
  'nvidia-a100-80gb': 1200,
  'nvidia-h100-80gb': 1800,
};
/** GCE's bounds on a flex-start request's wait (`params.requestValidForDuration`): 90 s to 2 hours. */
export const FLEX_START_MIN_WAIT_SECONDS = 90;
export const FLEX_START_MAX_WAIT_SECONDS = 2 * 3600;
/** GCE's longest flex-start run (`scheduling.maxRunDuration`): 7 days. */
export const FLEX_START_MAX_RUN_SECONDS = 7 * 24 * 3600;

const accelerators: Record<string, AcceleratorType> = {
  'nvidia-l4': { name: 'nvidia-l4', description: 'NVIDIA L4', quotaMetric: 'NVIDIA_L4_GPUS', maximumCardsPerInstance: 8, usdPerHour: { onDemand: 0.56012, spot: 0.22404, flexStart: 0.56012 } },
  'nvidia-tesla-t4': {
    name: 'nvidia-tesla-t4',
    description: 'NVIDIA T4',
    quotaMetric: 'NVIDIA_T4_GPUS',
    maximumCardsPerInstance: 4,
    attachableCounts: [1, 2, 4],
    usdPerHour: { onDemand: 0.35, spot: 0.14 },
  },
  'nvidia-tesla-v100': {
    name: 'nvidia-tesla-v100',
    description: 'NVIDIA V100',
    quotaMetric: 'NVIDIA_V100_GPUS',
    maximumCardsPerInstance: 8,
    attachableCounts: [1, 2, 4, 8],
    usdPerHour: { onDemand: 2.48, spot: 0.992 },
  },
  'nvidia-tesla-p100': {
    name: 'nvidia-tesla-p100',
    description: 'NVIDIA P100',
    quotaMetric: 'NVIDIA_P100_GPUS',
    maximumCardsPerInstance: 4,
    attachableCounts: [1, 2, 4],
    usdPerHour: { onDemand: 1.46, spot: 0.584 },
  },
  // K80s reached end of life on GCE in 2024; kept so the 2022 AWS trace (K80 rows) can replay.
  'nvidia-tesla-k80': {
    name: 'nvidia-tesla-k80',
    description: 'NVIDIA K80',
    quotaMetric: 'NVIDIA_K80_GPUS',
    maximumCardsPerInstance: 8,
    attachableCounts: [1, 2, 4, 8],
    usdPerHour: { onDemand: 0.45, spot: 0.18 },
  },
  'nvidia-tesla-a100': {
    name: 'nvidia-tesla-a100',
    description: 'NVIDIA A100 40GB',
    quotaMetric: 'NVIDIA_A100_GPUS',
    maximumCardsPerInstance: 16,
    usdPerHour: { onDemand: 2.933908, spot: 1.30603, flexStart: flexOf(2.933908) },
  },
  'nvidia-a100-80gb': {
    name: 'nvidia-a100-80gb',
    description: 'NVIDIA A100 80GB',
    quotaMetric: 'NVIDIA_A100_80GB_GPUS',
    maximumCardsPerInstance: 8,
    usdPerHour: { onDemand: 3.969168, spot: 1.78464, flexStart: flexOf(3.969168) },
  },
  'nvidia-h100-80gb': {
    name: 'nvidia-h100-80gb',
    description: 'NVIDIA H100 80GB',
    quotaMetric: 'NVIDIA_H100_GPUS',
    maximumCardsPerInstance: 8,
    usdPerHour: { onDemand: 9.247906, spot: 3.278246, flexStart: flexOf(9.247906) },
  },
};

/**
 * Per vCPU-hour and per GiB-hour, us-central1. The A2 and A3 core and RAM rates are N1's;
 * their GPU rates carry the rest of the published whole-machine price.
 */
const families: Record<string, MachineFamily> = {
  n1: { core: { onDemand: 0.031611, spot: 0.00698 }, ramGb: { onDemand: 0.004237, spot: 0.000936 } },
  e2: { core: { onDemand: 0.021811, spot: 0.006543 }, ramGb: { onDemand: 0.002923, spot: 0.000877 } },
  g2: { core: { onDemand: 0.024988, spot: 0.00999, flexStart: 0.024988 }, ramGb: { onDemand: 0.002922375, spot: 0.001170625, flexStart: 0.002922375 } },
  a2: { core: { onDemand: 0.031611, spot: 0.00698, flexStart: flexOf(0.031611) }, ramGb: { onDemand: 0.004237, spot: 0.000936, flexStart: flexOf(0.004237) } },
  a3: { core: { onDemand: 0.031611, spot: 0.00698, flexStart: flexOf(0.031611) }, ramGb: { onDemand: 0.004237, spot: 0.000936, flexStart: flexOf(0.004237) } },
};

function shape(name: string, family: string, guestCpus: number, memoryGb: number, builtIn?: { type: string; count: number }): MachineType {
  const f = families[family];
  const gpu = builtIn ? accelerators[builtIn.type].usdPerHour : { onDemand: 0, spot: 0 };
  const usd = (model: 'onDemand' | 'spot') => round(guestCpus * f.core[model] + memoryGb * f.ramGb[model] + (builtIn?.count ?? 0) * gpu[model]);
  return { name, family, guestCpus, memoryMb: memoryGb * 1024, builtIn, acceptsAttachedGpus: family === 'n1', usdPerHour: { onDemand: usd('onDemand'), spot: usd('spot') } };
}

// N1: 3.75 GB per vCPU.
const n1 = (vcpus: number) => shape(`n1-standard-${vcpus}`, 'n1', vcpus, vcpus * 3.75);
const builtIn = (name: string, family: string, guestCpus: number, memoryGb: number, type: string, count: number) => shape(name, family, guestCpus, memoryGb, { type, count });

const machineTypeList: MachineType[] = [
  shape('e2-standard-2', 'e2', 2, 8),
  shape('e2-standard-4', 'e2', 4, 16),
  ...[2, 4, 8, 16, 32, 64].map(n1),
  builtIn('g2-standard-4', 'g2', 4, 16, 'nvidia-l4', 1),
  builtIn('g2-standard-8', 'g2', 8, 32, 'nvidia-l4', 1),
  builtIn('g2-standard-12', 'g2', 12, 48, 'nvidia-l4', 1),
  builtIn('g2-standard-16', 'g2', 16, 64, 'nvidia-l4', 1),
  builtIn('g2-standard-24', 'g2', 24, 96, 'nvidia-l4', 2),
  builtIn('g2-standard-32', 'g2', 32, 128, 'nvidia-l4', 1),
  builtIn('g2-standard-48', 'g2', 48, 192, 'nvidia-l4', 4),
  builtIn('g2-standard-96', 'g2', 96, 384, 'nvidia-l4', 8),
  builtIn('a2-highgpu-1g', 'a2', 12, 85, 'nvidia-tesla-a100', 1),
  builtIn('a2-highgpu-2g', 'a2', 24, 170, 'nvidia-tesla-a100', 2),
  builtIn('a2-highgpu-4g', 'a2', 48, 340, 'nvidia-tesla-a100', 4),
  builtIn('a2-highgpu-8g', 'a2', 96, 680, 'nvidia-tesla-a100', 8),
  builtIn('a2-ultragpu-1g', 'a2', 12, 170, 'nvidia-a100-80gb', 1),
  builtIn('a2-ultragpu-2g', 'a2', 24, 340, 'nvidia-a100-80gb', 2),
  builtIn('a2-ultragpu-4g', 'a2', 48, 680, 'nvidia-a100-80gb', 4),
  builtIn('a2-ultragpu-8g', 'a2', 96, 1360, 'nvidia-a100-80gb', 8),
  builtIn('a3-highgpu-8g', 'a3', 208, 1872, 'nvidia-h100-80gb', 8),
];

const L4 = 'nvidia-l4';
const T4 = 'nvidia-tesla-t4';
const V100 = 'nvidia-tesla-v100';
const P100 = 'nvidia-tesla-p100';
const A100 = 'nvidia-tesla-a100';
const A100_80 = 'nvidia-a100-80gb';
const H100 = 'nvidia-h100-80gb';

function region(name: string, description: string, priceMultiplier: number, zones: Record<string, string[]>): Region {
  return { name, description, priceMultiplier, zones: Object.entries(zones).map(([suffix, accs]) => ({ name: `${name}-${suffix}`, region: name, accelerators: accs })) };
}

/** A realistic subset of where GCE offers each GPU (not exhaustive). */
const regionList: Region[] = [
  region('us-central1', 'Council Bluffs, Iowa, North America', 1, {
    a: [L4, T4, V100, A100, H100],
    b: [L4, T4, V100, A100, A100_80],
    c: [L4, T4, V100, A100, A100_80, H100],
    f: [T4, V100, A100],
  }),
  region('us-east1', 'Moncks Corner, South Carolina, North America', 1, {
    b: [L4, A100, P100],
    c: [L4, T4, V100, P100],
    d: [L4, T4, H100],
  }),
  region('us-west1', 'The Dalles, Oregon, North America', 1, {
    a: [L4, T4, V100, H100],
    b: [L4, T4, V100, A100],
  }),
  region('europe-west4', 'Eemshaven, Netherlands, Europe', 1.1, {
    a: [L4, T4, V100, A100, A100_80, H100],
    b: [L4, T4, V100, A100, H100],
    c: [L4, T4, V100],
  }),
  region('asia-southeast1', 'Jurong West, Singapore, APAC', 1.23, {
    a: [L4, T4, H100],
    b: [L4, T4, A100_80],
    c: [L4, T4, A100, A100_80, H100],
  }),
];

export const defaultCatalog: Catalog = {
  pricesAsOf: PRICES_AS_OF,
  families,
  accelerators,
  machineTypes: Object.fromEntries(machineTypeList.map((m) => [m.name, m])),
  regions: Object.fromEntries(regionList.map((r) => [r.name, r])),
  defaultQuota: { onDemandGpus: 16, preemptibleGpus: 64 },
  defaultCapacity: { spotGpus: 64, onDemandGpus: 64, flexStartGpus: 64 },
};

function round(usd: number): number {
  return Math.round(usd * 1e6) / 1e6;
}

/** Key of a whole-instance configuration in `Region.instancePrices`. */
export function instanceKey(machineType: string, accelerator: string | undefined, count: number): string {
  return accelerator ? `${machineType}+${count}x${accelerator}` : machineType;
}

/**
 * The region a zone is in, as the catalog says (a trace may name a zone's region itself);
 * a zone the catalog does not list, by GCE's naming (workflows/region.ts).
 */
export function regionOfZone(zone: string, catalog: Catalog = defaultCatalog): string {
  return findZone(zone, catalog)?.region ?? regionOf(zone);
}

export function findZone(zone: string, catalog: Catalog = defaultCatalog): Zone | undefined {
  for (const r of Object.values(catalog.regions)) {
    const found = r.zones.find((z) => z.name === zone);
    if (found) return found;
  }
  return undefined;
}

export function allZones(catalog: Catalog = defaultCatalog): Zone[] {
  return Object.values(catalog.regions).flatMap((r) => r.zones);
}

/** Zones offering an accelerator type. */
export function zonesWith(accelerator: string, catalog: Catalog = defaultCatalog): string[] {
  return allZones(catalog)
    .filter((z) => z.accelerators.includes(accelerator))
    .map((z) => z.name);
}

/** Machine types available in a zone: general-purpose everywhere, accelerator-optimized where their GPU is. */
export function machineTypesInZone(zone: string, catalog: Catalog = defaultCatalog): MachineType[] {
  const z = findZone(zone, catalog);
  if (!z) return [];
  return Object.values(catalog.machineTypes).filter((m) => !m.builtIn || z.accelerators.includes(m.builtIn.type));
}

export function quotaMetric(accelerator: string, catalog: Catalog = defaultCatalog): string | undefined {
  return catalog.accelerators[accelerator]?.quotaMetric;
}

export function hasBuiltInAccelerators(machineType: string, catalog: Catalog = defaultCatalog): boolean {
  return catalog.machineTypes[machineType]?.builtIn !== undefined;
}

/** The accelerator-optimized machine type with exactly `count` GPUs of this type, if any. */
function builtInMachineFor(accelerator: string, count: number, catalog: Catalog): string | undefined {
  // The smallest (cheapest) shape wins, e.g. g2-standard-4 rather than g2-standard-32 for one L4.
  const candidates = Object.values(catalog.machineTypes).filter((m) => m.builtIn?.type === accelerator && m.builtIn.count === count);
  candidates.sort((a, b) => a.usdPerHour.onDemand - b.usdPerHour.onDemand);
  return candidates[0]?.name;
}

/** vCPUs of the N1 machine Sterna pairs with `count` attached GPUs (enough host CPU per GPU, within GCE's limits). */
const N1_VCPUS_FOR_GPUS: Record<string, Record<number, number>> = {
  'nvidia-tesla-t4': { 1: 4, 2: 8, 4: 16 },
  'nvidia-tesla-p100': { 1: 8, 2: 16, 4: 32 },
  'nvidia-tesla-v100': { 1: 8, 2: 16, 4: 32, 8: 64 },
  'nvidia-tesla-k80': { 1: 4, 2: 8, 4: 16, 8: 32 },
};

/** The machine type to use for `count` x `accelerator`: a built-in shape where one exists, else N1 + attached GPUs. */
export function machineTypeFor(accelerator: string, count: number, catalog: Catalog = defaultCatalog): string | undefined {
  const builtInName = builtInMachineFor(accelerator, count, catalog);
  if (builtInName) return builtInName;
  const vcpus = N1_VCPUS_FOR_GPUS[accelerator]?.[count];
  const name = vcpus ? `n1-standard-${vcpus}` : undefined;
  return name && catalog.machineTypes[name] ? name : undefined;
}

export interface PriceQuery {
  region: string;
  machineType: string;
  /** The GPU type; omitted (or undefined) for a VM without GPUs. */
  accelerator?: string;
  /** GPUs of that type (built-in or attached). */
  count?: number;
  spot: boolean;
  /** Flex-start (DWS) rates instead (`spot` is then ignored); undefined where flex-start is not sold. */
  flexStart?: boolean;
}

/** The priced parts of a configuration (rate key x quantity), or undefined when the machine type cannot have it. */
export function componentsOf(query: Omit<PriceQuery, 'region' | 'spot'>, catalog: Catalog = defaultCatalog): { key: RateKey; quantity: number }[] | undefined {
  const m = catalog.machineTypes[query.machineType];
  if (!m) return undefined;
  const count = query.accelerator ? (query.count ?? 1) : 0;
  const parts: { key: RateKey; quantity: number }[] = [
    { key: `core:${m.family}`, quantity: m.guestCpus },
    { key: `ram:${m.family}`, quantity: m.memoryMb / 1024 },
  ];
  if (m.builtIn) {
    if (query.accelerator && (query.accelerator !== m.builtIn.type || count !== m.builtIn.count)) return undefined;
    parts.push({ key: `gpu:${m.builtIn.type}`, quantity: m.builtIn.count });
  } else if (query.accelerator) {
    const acc = catalog.accelerators[query.accelerator];
    if (!m.acceptsAttachedGpus || !acc?.attachableCounts?.includes(count)) return undefined;
    parts.push({ key: `gpu:${query.accelerator}`, quantity: count });
  }
  return parts;
}

/** Every rate the catalog prices, with its base (us-central1) figure. */
export function baseRates(catalog: Catalog = defaultCatalog): { key: RateKey; rate: Rate }[] {
  return [
    ...Object.entries(catalog.families).flatMap(([family, f]) => [
      { key: `core:${family}` as RateKey, rate: f.core },
      { key: `ram:${family}` as RateKey, rate: f.ramGb },
    ]),
    ...Object.values(catalog.accelerators).map((a) => ({ key: `gpu:${a.name}` as RateKey, rate: a.usdPerHour })),
  ];
}

export function baseRate(key: RateKey, catalog: Catalog = defaultCatalog): Rate | undefined {
  const at = key.indexOf(':');
  const kind = key.slice(0, at);
  const name = key.slice(at + 1);
  if (kind === 'gpu') return catalog.accelerators[name]?.usdPerHour;
  const family = catalog.families[name];
  return kind === 'core' ? family?.core : kind === 'ram' ? family?.ramGb : undefined;
}

/** One rate in one region: the region's override, else base x the region's multiplier (USD, to the nano). */
export function rateIn(region: string, key: RateKey, spot: boolean, catalog: Catalog = defaultCatalog): number | undefined {
  const r = catalog.regions[region];
  const base = baseRate(key, catalog);
  if (!r || !base) return undefined;
  const model = spot ? 'spot' : 'onDemand';
  return r.rateOverrides?.[key]?.[model] ?? Math.round(base[model] * r.priceMultiplier * 1e9) / 1e9;
}

/** One flex-start rate in one region, or undefined where flex-start is not sold (see `Rate.flexStart`). */
export function flexRateIn(region: string, key: RateKey, catalog: Catalog = defaultCatalog): number | undefined {
  const r = catalog.regions[region];
  const base = baseRate(key, catalog)?.flexStart;
  if (!r || base === undefined) return undefined;
  return r.rateOverrides?.[key]?.flexStart ?? Math.round(base * r.priceMultiplier * 1e9) / 1e9;
}

/**
 * Whole-instance USD/hour for a configuration in a region, or undefined when the
 * region does not sell it (unknown region or machine type, or a GPU count the machine
 * type cannot have): the sum of its components at the region's rates.
 */
export function pricePerHour(query: PriceQuery, catalog: Catalog = defaultCatalog): number | undefined {
  const r = catalog.regions[query.region];
  const m = catalog.machineTypes[query.machineType];
  if (!r || !m) return undefined;
  const count = query.accelerator ? (query.count ?? 1) : 0;
  const override = r.instancePrices?.[instanceKey(m.name, query.accelerator, count)];
  if (override) return query.flexStart ? override.flexStart : query.spot ? override.spot : override.onDemand;
  const parts = componentsOf(query, catalog);
  if (!parts) return undefined;
  let usd = 0;
  for (const part of parts) {
    const rate = query.flexStart ? flexRateIn(query.region, part.key, catalog) : rateIn(query.region, part.key, query.spot, catalog);
    if (rate === undefined) return undefined;
    usd += part.quantity * rate;
  }
  return round(usd);
}

/** The GPUs a VM of this machine type has, built in or attached. */
export function gpusOf(machineType: string, attached: { type: string; count: number } | undefined, catalog: Catalog = defaultCatalog): { type: string; count: number } | undefined {
  return catalog.machineTypes[machineType]?.builtIn ?? attached;
}
