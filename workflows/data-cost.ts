/**
 * What moving a run's data to an offer's region costs: inter-region egress for its size,
 * and the staging time, paid at the offer's price while nothing trains. Placement adds
 * both to an attempt's expected cost (placement.ts `dataCostUsd`). Pure.
 *
 * The per-GB rates and throughputs below are by continent pair, approximating Google
 * Cloud's published Cloud Storage data-transfer prices (2024: free within a region,
 * $0.02/GB between regions of one continent, $0.08/GB between continents, more to and from
 * Oceania, South America, the Middle East and Africa) and typical single-VM `gcloud storage
 * cp` rates. Every number can be overridden in the spec (`placement.dataTransfer`).
 */

export const Continent = { NorthAmerica: 'na', SouthAmerica: 'sa', Europe: 'eu', Asia: 'asia', Oceania: 'oceania', MiddleEast: 'me', Africa: 'africa' } as const;
export type Continent = (typeof Continent)[keyof typeof Continent];

/** Continents whose inter-continental transfer costs more. */
const FAR: readonly Continent[] = [Continent.Oceania, Continent.SouthAmerica, Continent.MiddleEast, Continent.Africa];

export interface DataTransferRates {
  /** USD per GB leaving the data's region for another region of the same continent. */
  sameContinentUsdPerGb: number;
  /** USD per GB between NA, EU and Asia. */
  otherContinentUsdPerGb: number;
  /** USD per GB to or from Oceania, South America, the Middle East or Africa. */
  farContinentUsdPerGb: number;
  /** Staging throughput, MB/s. */
  sameRegionMBps: number;
  sameContinentMBps: number;
  otherContinentMBps: number;
}

export const DEFAULT_DATA_TRANSFER: DataTransferRates = {
  sameContinentUsdPerGb: 0.02,
  otherContinentUsdPerGb: 0.08,
  farContinentUsdPerGb: 0.14,
  sameRegionMBps: 400,
  sameContinentMBps: 200,
  otherContinentMBps: 60,
};

/** GCS multi-regions name a continent. */
const MULTI_REGIONS: Record<string, Continent> = { us: Continent.NorthAmerica, eu: Continent.Europe, asia: Continent.Asia };
/** GCS's predefined dual-regions (as the storage API names them) and the two regions each spans. */
const DUAL_REGIONS: Record<string, readonly string[]> = { nam4: ['us-central1', 'us-east1'], eur4: ['europe-north1', 'europe-west4'], asia1: ['asia-northeast1', 'asia-northeast2'] };

/** The continent of a GCE region or zone, or of a GCS location (region or multi-region); undefined if unknown. */
export function continentOf(location: string): Continent | undefined {
  const l = location.toLowerCase();
  if (MULTI_REGIONS[l]) return MULTI_REGIONS[l];
  if (DUAL_REGIONS[l]) return continentOf(DUAL_REGIONS[l][0]);
  if (/^(us|northamerica)-/.test(l)) return Continent.NorthAmerica;
  if (/^southamerica-/.test(l)) return Continent.SouthAmerica;
  if (/^europe-/.test(l)) return Continent.Europe;
  if (/^asia-/.test(l)) return Continent.Asia;
  if (/^australia-/.test(l)) return Continent.Oceania;
  if (/^me-/.test(l)) return Continent.MiddleEast;
  if (/^africa-/.test(l)) return Continent.Africa;
  return undefined;
}

/** One dataset's location and size, as placement sees it. */
export interface DataPlace {
  /** A GCS location: region (asia-southeast1) or multi-region (US, EU, ASIA). */
  location: string;
  bytes: number;
}

export interface DataCost {
  egressUsd: number;
  stagingSeconds: number;
  /** The staging time at the offer's price: paid, and no progress. */
  stagingUsd: number;
  totalUsd: number;
}

/**
 * Same place: no egress, the fastest copy. A multi-region counts as every region of its
 * continent, a dual-region as its two regions. Locations may come in the storage API's
 * upper case (ASIA-SOUTHEAST1).
 */
function relation(location: string, region: string): 'region' | 'continent' | 'other' | 'far' {
  const l = location.toLowerCase();
  const from = continentOf(l);
  const to = continentOf(region);
  if (l === region || (MULTI_REGIONS[l] !== undefined && from === to) || DUAL_REGIONS[l]?.includes(region)) return 'region';
  if (from !== undefined && from === to) return 'continent';
  if (from === undefined || to === undefined) return 'other';
  return FAR.includes(from) || FAR.includes(to) ? 'far' : 'other';
}

export function dataCost(data: readonly DataPlace[], region: string, pricePerHour: number, rates: DataTransferRates = DEFAULT_DATA_TRANSFER): DataCost {
  let egressUsd = 0;
  let stagingSeconds = 0;
  for (const d of data) {
    const gb = d.bytes / 1e9;
    const where = relation(d.location, region);
    egressUsd += gb * { region: 0, continent: rates.sameContinentUsdPerGb, other: rates.otherContinentUsdPerGb, far: rates.farContinentUsdPerGb }[where];
    const mbps = { region: rates.sameRegionMBps, continent: rates.sameContinentMBps, other: rates.otherContinentMBps, far: rates.otherContinentMBps }[where];
    stagingSeconds += (d.bytes / 1e6) / mbps;
  }
  const stagingUsd = (stagingSeconds / 3600) * pricePerHour;
  return { egressUsd, stagingSeconds, stagingUsd, totalUsd: egressUsd + stagingUsd };
}
