/**
 * Placement: which offer to try first. A pure function of the offers, what this run has
 * seen so far and the policy, so the workflow, the tests and the benchmark share it.
 *
 *   us-central1-a (stockout) -> us-central1-b (preempted at step 120) -> us-east1-c
 *
 * Cheapest expected cost first; a zone that stocked out or preempted this run is skipped
 * while its cooldown lasts and costs a decaying penalty after that, so a run does not
 * bounce straight back into the zone that just failed it.
 */
import type { Offer, ProvisioningModel } from './types';

export const ZoneEventKind = { Stockout: 'stockout', Quota: 'quota', Preempted: 'preempted' } as const;
export type ZoneEventKind = (typeof ZoneEventKind)[keyof typeof ZoneEventKind];

export interface ZoneEvent {
  zone: string;
  region: string;
  provisioningModel: ProvisioningModel;
  kind: ZoneEventKind;
  /** Epoch milliseconds (workflow time). */
  at: number;
  /**
   * Set on events remembered from other runs (workflows/zones): a stockout of one
   * accelerator says nothing of another's capacity. A run's own events leave it out.
   */
  accelerator?: string;
}

export interface PlacementPolicy {
  nowMs: number;
  cooldownSeconds: number;
  /** Accelerator hours still to run; scales price into expected cost. */
  expectedHours: number;
  maxPricePerHour?: number;
  models: readonly ProvisioningModel[];
  /** USD an attempt on this offer pays to bring the run's data to it (egress + staging time; data-cost.ts). */
  dataCostUsd?: (offer: Offer) => number;
}

/** How much a recent failure in a zone adds, as a share of that offer's expected cost. */
const FAILURE_PENALTY_SHARE = 0.25;

function affects(event: ZoneEvent, offer: Offer): boolean {
  // Quota is per region and model; capacity and preemption are per zone and model.
  const samePlace = event.kind === ZoneEventKind.Quota ? event.region === offer.region : event.zone === offer.zone;
  return samePlace && event.provisioningModel === offer.provisioningModel && (event.accelerator === undefined || event.accelerator === offer.accelerator);
}

export function inCooldown(offer: Offer, events: readonly ZoneEvent[], policy: PlacementPolicy): boolean {
  const cooldownMs = policy.cooldownSeconds * 1000;
  return events.some((e) => affects(e, offer) && policy.nowMs - e.at < cooldownMs);
}

export function expectedCost(offer: Offer, events: readonly ZoneEvent[], policy: PlacementPolicy): number {
  const base = offer.pricePerHour * Math.max(policy.expectedHours, 1 / 60) + (policy.dataCostUsd?.(offer) ?? 0);
  const cooldownMs = Math.max(policy.cooldownSeconds * 1000, 1);
  const penalty = events
    .filter((e) => affects(e, offer))
    .reduce((sum, e) => sum + FAILURE_PENALTY_SHARE * base * Math.exp(-(policy.nowMs - e.at) / cooldownMs), 0);
  return base + penalty;
}

/** Offers worth trying now, best first. */
export function rankOffers(offers: readonly Offer[], events: readonly ZoneEvent[], policy: PlacementPolicy): Offer[] {
  return offers
    .filter((o) => policy.models.includes(o.provisioningModel))
    .filter((o) => o.quotaAvailable)
    .filter((o) => policy.maxPricePerHour === undefined || o.pricePerHour <= policy.maxPricePerHour)
    .filter((o) => !inCooldown(o, events, policy))
    .map((offer) => ({ offer, cost: expectedCost(offer, events, policy) }))
    .sort((a, b) => a.cost - b.cost || a.offer.zone.localeCompare(b.offer.zone) || a.offer.accelerator.localeCompare(b.offer.accelerator))
    .map(({ offer }) => offer);
}
