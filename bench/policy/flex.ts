/**
 * The flex-start (DWS) tier of the policy benchmark (README: "The flex-start tier").
 *
 * - Price: each zone's on-demand price times the catalog's flex-start ratio (the A100
 *   machine a2-highgpu-1g in us-central1, flex-start over on-demand: config/catalog.ts),
 *   nothing taken from the trace files.
 * - Availability: the flex pool has its own seeded model, independent of the spot trace.
 *   Zone z's mean wait is m_z = m x 2^u_z, u_z uniform on [-1, 1] (seeded per zone and
 *   seed, so one zone's pool is the same in every window of a seed), m the catalog's
 *   expected wait for an A100 (or `--flex-wait-hours`). At each tick a pending request in
 *   zone z is granted with chance 1 - e^(-tick/m_z), independently: a wait that is
 *   exponential with mean m_z, on the tick grid. A request not granted within the wait
 *   window (`--flex-max-wait-hours`, default GCE's and the spec's 2 h) fails.
 * - Online policies are told each zone's price and mean wait (the offer's expected wait),
 *   the window and the 7-day cap; never the grants.
 */
import { FLEX_START_EXPECTED_WAIT_SECONDS, FLEX_START_MAX_RUN_SECONDS, FLEX_START_MAX_WAIT_SECONDS, pricePerHour } from '../../config/catalog';
import { seededRandom } from '../../workflows/api';
import type { FlexTier, Problem } from './problem';

export interface FlexOptions {
  /** Catalog-wide mean wait, hours (each zone's is within a factor 2 of it). */
  meanWaitHours: number;
  /** The request's wait window, hours. */
  maxWaitHours: number;
}

const REFERENCE = { region: 'us-central1', machineType: 'a2-highgpu-1g', accelerator: 'nvidia-tesla-a100', count: 1, spot: false } as const;

/** Flex-start price over on-demand, from the catalog (its remembered approximation). */
export function catalogFlexRatio(): number {
  const onDemand = pricePerHour(REFERENCE);
  const flex = pricePerHour({ ...REFERENCE, flexStart: true });
  if (onDemand === undefined || flex === undefined) throw new Error('the catalog has no flex-start price for a2-highgpu-1g in us-central1');
  return flex / onDemand;
}

export const DEFAULT_FLEX: FlexOptions = {
  meanWaitHours: FLEX_START_EXPECTED_WAIT_SECONDS['nvidia-tesla-a100'] / 3600,
  maxWaitHours: FLEX_START_MAX_WAIT_SECONDS / 3600,
};

/** Zone z's mean wait for a seed: within a factor 2 of the catalog-wide mean. */
export function zoneMeanWaits(zones: number, seed: number, meanWaitHours: number): number[] {
  const random = seededRandom(seed * 7919 + 17);
  return Array.from({ length: zones }, () => meanWaitHours * 2 ** (2 * random() - 1));
}

/** The window's flex tier: grants drawn per zone and tick from seeds of their own. */
export function flexTierFor(p: Problem, startTick: number, seed: number, options: FlexOptions): FlexTier {
  const ticks = p.deadlineTicks;
  const meanWaitHours = zoneMeanWaits(p.zones.length, seed, options.meanWaitHours);
  const grant = meanWaitHours.map((m, z) => {
    const random = seededRandom((seed * 1_000_003 + startTick) * 31 + z + 0x5eed);
    const chance = m <= 0 ? 1 : 1 - Math.exp(-p.tickHours / m);
    return Uint8Array.from({ length: ticks }, () => (random() < chance ? 1 : 0));
  });
  const ratio = catalogFlexRatio();
  return {
    price: p.onDemandPrice.map((od) => od * ratio),
    grant,
    meanWaitHours,
    maxWaitTicks: Math.max(1, Math.ceil(options.maxWaitHours / p.tickHours - 1e-9)),
    maxWaitHours: options.maxWaitHours,
    maxRunHours: FLEX_START_MAX_RUN_SECONDS / 3600,
  };
}

export function withFlex(p: Problem, flex: FlexTier): Problem {
  if (p.workTicks * p.tickHours > flex.maxRunHours) throw new Error(`a job of ${p.workTicks * p.tickHours} h outlasts flex-start's ${flex.maxRunHours} h cap, which the optimum does not model`);
  return { ...p, flex };
}
