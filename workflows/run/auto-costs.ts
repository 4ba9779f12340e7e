/**
 * What `auto` adds to an attempt's price when it chooses where and how to run (issue 18,
 * issue 13): the egress and staging time of bringing the run's data to the offer's region
 * (data-cost.ts, by the same rule placement ranks offers with), and the flex-start tier's
 * wait window. Pure.
 */
import { dataCost } from '../data-cost';
import { flexStartMaxWaitSeconds } from '../pricing';
import type { RunSpec } from '../spec';
import type { Offer } from '../types';
import { dataPlaces, transferRates } from './data-placement';
import type { RunState } from './state';

/** Egress (USD) and staging time of each start on an offer; undefined when no dataset states a location. */
export function dataCostsFor(spec: RunSpec, state: RunState): ((offer: Offer) => { egressUsd: number; stagingSeconds: number }) | undefined {
  const places = dataPlaces(spec, state);
  if (places.length === 0) return undefined;
  const rates = transferRates(spec);
  const cached = state.dataCachedRegions ?? [];
  // A region that holds the run's cache stages from there: as if the data lived in it.
  return (offer) => {
    const c = dataCost(cached.includes(offer.region) ? places.map((p) => ({ ...p, location: offer.region })) : places, offer.region, offer.pricePerHour, rates);
    return { egressUsd: c.egressUsd, stagingSeconds: c.stagingSeconds };
  };
}

/** The flex-start tier's terms for the policy, when the spec makes flex-start a tier of auto. */
export function flexTermsFor(spec: RunSpec): { maxWaitSeconds: number } | undefined {
  return spec.pricing.flexStart ? { maxWaitSeconds: flexStartMaxWaitSeconds(spec) } : undefined;
}
