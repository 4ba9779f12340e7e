/**
 * The Cloud Billing Catalog's Compute Engine SKUs as Sterna's rates: which SKU
 * description prices what. One table, read both ways: the price book reads real (or
 * emulated) SKUs through it, and the emulator writes its SKUs from its catalog through it,
 * so the two cannot drift apart.
 *
 *   SKU description (case-insensitive)                              rate key          model
 *   "<Family> Instance Core running in <place>"                     core:<family>     on demand
 *   "<Family> Instance Ram running in <place>"      (per GiB-hour)   ram:<family>      on demand
 *   "Spot Preemptible <Family> Instance Core|Ram running in ..."    core|ram:<family> spot
 *   "DWS Defined Duration <Family> [Instance ]Core|Ram running..."  core|ram:<family> flex-start
 *   "Nvidia <GPU> GPU running in <place>"                           gpu:<type>        on demand
 *   "Nvidia <GPU> GPU attached to Spot Preemptible VMs running..."  gpu:<type>        spot
 *   "Spot Preemptible Nvidia <GPU> GPU running in ..."  (older)     gpu:<type>        spot
 *   "Nvidia <GPU> GPU attached to DWS Defined Duration VMs ..."     gpu:<type>        flex-start
 *
 * <Family> is FAMILY_SKU_NAMES' right-hand side ("N1 Predefined" for n1, "G2", "A2"...),
 * <GPU> is GPU_SKU_NAMES' ("Tesla T4", "L4", "Tesla A100 80GB", "H100 80GB"...). Where a
 * SKU sells is its `serviceRegions`, never the place in its description. The model must
 * agree with `category.usageType` (Preemptible for spot, OnDemand otherwise).
 * Everything else is skipped, by design: commitments ("Commitment v1: ..."), custom,
 * sole-tenant, reserved, Calendar Mode, virtual-workstation GPU licences, disks,
 * egress, licences, and GPU or family names not in the tables.
 */
import type { RateKey } from './catalog';

/** Compute Engine in the Cloud Billing Catalog. */
export const COMPUTE_ENGINE_SERVICE_ID = '6F81-5844-456A';

/** How an hour is bought: on demand, spot, or flex-start (DWS). */
export const RateModel = { OnDemand: 'onDemand', Spot: 'spot', Flex: 'flex' } as const;
export type RateModel = (typeof RateModel)[keyof typeof RateModel];

/** Machine family -> its name in SKU descriptions. */
export const FAMILY_SKU_NAMES: Readonly<Record<string, string>> = {
  n1: 'N1 Predefined',
  e2: 'E2',
  g2: 'G2',
  a2: 'A2',
  a3: 'A3',
};

/** GCE accelerator type -> its name in SKU descriptions ("Nvidia <name> GPU ..."). */
export const GPU_SKU_NAMES: Readonly<Record<string, string>> = {
  'nvidia-tesla-t4': 'Tesla T4',
  'nvidia-tesla-v100': 'Tesla V100',
  'nvidia-tesla-p100': 'Tesla P100',
  'nvidia-tesla-p4': 'Tesla P4',
  'nvidia-tesla-k80': 'Tesla K80',
  'nvidia-tesla-a100': 'Tesla A100',
  'nvidia-a100-80gb': 'Tesla A100 80GB',
  'nvidia-l4': 'L4',
  'nvidia-h100-80gb': 'H100 80GB',
  'nvidia-h100-mega-80gb': 'H100 80GB Mega',
  'nvidia-h200-141gb': 'H200 141GB',
};

const familyBySkuName = new Map(Object.entries(FAMILY_SKU_NAMES).map(([family, name]) => [name.toLowerCase(), family]));
const gpuBySkuName = new Map(Object.entries(GPU_SKU_NAMES).map(([type, name]) => [name.toLowerCase(), type]));
// The catalog has spelled the 80 GB A100 both ways.
gpuBySkuName.set('a100 80gb', 'nvidia-a100-80gb');

/** The unit each kind of rate is priced in (Billing Catalog `usageUnit`). */
export const USAGE_UNITS: Readonly<Record<'core' | 'ram' | 'gpu', string>> = { core: 'h', ram: 'GiBy.h', gpu: 'h' };

/** The description the Billing Catalog gives a rate (the emulator writes these). */
export function skuDescription(key: RateKey, model: RateModel, place: string): string | undefined {
  const [kind, name] = [key.slice(0, key.indexOf(':')), key.slice(key.indexOf(':') + 1)];
  if (kind === 'gpu') {
    const gpu = GPU_SKU_NAMES[name];
    if (!gpu) return undefined;
    if (model === RateModel.Spot) return `Nvidia ${gpu} GPU attached to Spot Preemptible VMs running in ${place}`;
    if (model === RateModel.Flex) return `Nvidia ${gpu} GPU attached to DWS Defined Duration VMs running in ${place}`;
    return `Nvidia ${gpu} GPU running in ${place}`;
  }
  const family = FAMILY_SKU_NAMES[name];
  if (!family) return undefined;
  const part = kind === 'core' ? 'Core' : 'Ram';
  const prefix = model === RateModel.Spot ? 'Spot Preemptible ' : model === RateModel.Flex ? 'DWS Defined Duration ' : '';
  return `${prefix}${family} Instance ${part} running in ${place}`;
}

/** The Billing Catalog's usageType for a model. */
export function usageTypeOf(model: RateModel): string {
  return model === RateModel.Spot ? 'Preemptible' : 'OnDemand';
}

/** The fields of a Billing Catalog SKU this module reads (the client's ISku fits it). */
export interface SkuLike {
  description?: string | null;
  category?: { usageType?: string | null } | null;
  serviceRegions?: string[] | null;
  pricingInfo?:
    | {
        effectiveTime?: unknown;
        pricingExpression?: {
          usageUnit?: string | null;
          tieredRates?: { startUsageAmount?: number | null; unitPrice?: { currencyCode?: string | null; units?: unknown; nanos?: number | null } | null }[] | null;
        } | null;
      }[]
    | null;
}

export type SkuReading =
  | { key: RateKey; model: RateModel; regions: string[]; usdPerUnit: number }
  | { skipped: string };

const GPU_PATTERN = /^(spot preemptible |dws defined duration )?nvidia (.+?) gpu(?: attached to (spot preemptible|dws defined duration) vms)? running in .+$/;
const MACHINE_PATTERN = /^(spot preemptible |dws defined duration )?(.+?) (?:instance )?(core|ram) running in .+$/;

function modelOf(words: string | undefined): RateModel {
  const w = (words ?? '').trim();
  if (w === 'spot preemptible') return RateModel.Spot;
  if (w === 'dws defined duration') return RateModel.Flex;
  return RateModel.OnDemand;
}

/** What one SKU prices, or why it is skipped. */
export function readSku(sku: SkuLike): SkuReading {
  const description = (sku.description ?? '').trim().toLowerCase().replace(/\s+/g, ' ');
  let key: RateKey | undefined;
  let model: RateModel = RateModel.OnDemand;
  const gpu = GPU_PATTERN.exec(description);
  const machine = gpu ? undefined : MACHINE_PATTERN.exec(description);
  if (gpu) {
    const type = gpuBySkuName.get(gpu[2]);
    if (!type) return { skipped: `GPU '${gpu[2]}' is not in GPU_SKU_NAMES` };
    key = `gpu:${type}`;
    model = modelOf(gpu[1] ?? gpu[3]);
  } else if (machine) {
    const family = familyBySkuName.get(machine[2]);
    if (!family) return { skipped: `family '${machine[2]}' is not in FAMILY_SKU_NAMES` };
    key = machine[3] === 'core' ? `core:${family}` : `ram:${family}`;
    model = modelOf(machine[1]);
  } else {
    return { skipped: 'not a machine core, RAM or GPU rate' };
  }
  const usageType = sku.category?.usageType ?? '';
  if ((model === RateModel.Spot) !== (usageType === 'Preemptible') || (model === RateModel.OnDemand && usageType !== 'OnDemand')) {
    return { skipped: `usageType ${usageType || '(none)'} does not fit a ${model} rate` };
  }
  const expression = sku.pricingInfo?.[0]?.pricingExpression;
  const kind = key.slice(0, key.indexOf(':')) as 'core' | 'ram' | 'gpu';
  if (expression?.usageUnit !== USAGE_UNITS[kind]) return { skipped: `usageUnit ${expression?.usageUnit ?? '(none)'} is not ${USAGE_UNITS[kind]}` };
  // The list price is the tier that starts at zero usage.
  const tier = [...(expression.tieredRates ?? [])].sort((a, b) => (a.startUsageAmount ?? 0) - (b.startUsageAmount ?? 0))[0];
  const price = tier?.unitPrice;
  if (!price) return { skipped: 'no tiered rate' };
  if (price.currencyCode && price.currencyCode !== 'USD') return { skipped: `currency ${price.currencyCode} is not USD` };
  const usdPerUnit = Number(price.units ?? 0) + (price.nanos ?? 0) / 1e9;
  if (!Number.isFinite(usdPerUnit) || usdPerUnit < 0) return { skipped: 'unit price is not a number' };
  const regions = (sku.serviceRegions ?? []).filter((r) => r !== 'global');
  if (regions.length === 0) return { skipped: 'no service region' };
  return { key, model, regions, usdPerUnit };
}
