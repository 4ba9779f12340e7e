/**
 * The bridge between the trainingRun workflow and the deadline-aware policy of
 * workflows/policy (the same code the trace-replay benchmark scores). It turns what the
 * run knows (offers, this run's stockouts and preemptions, work left, time left) into
 * the policy's Observation, and the policy's Action back into offers to try.
 */
import { ActionKind, sternaPolicy, type Action, type Observation, type ZoneObservation } from './policy';
import { inCooldown, type PlacementPolicy, type ZoneEvent } from './placement';
import type { Offer } from './types';

export interface AutoInputs {
  offers: readonly Offer[];
  events: readonly ZoneEvent[];
  placement: PlacementPolicy;
  nowMs: number;
  runStartMs: number;
  deadlineMs: number;
  remainingWorkSeconds: number;
  changeoverSeconds: number;
  /** How long until the workflow asks the policy again. */
  stepSeconds: number;
  current: Action;
}

const HOUR_MS = 3_600_000;

/** Per zone: the cheapest spot and on-demand price among the acceptable offers. */
export function zoneObservations(offers: readonly Offer[], events: readonly ZoneEvent[], placement: PlacementPolicy, current: Action): ZoneObservation[] {
  const zones = new Map<string, ZoneObservation>();
  for (const offer of offers) {
    if (!offer.quotaAvailable) continue;
    const zone = zones.get(offer.zone) ?? { zone: offer.zone, spotAvailable: 'unknown', spotPrice: Infinity, onDemandPrice: Infinity };
    if (offer.provisioningModel === 'SPOT') {
      zone.spotPrice = Math.min(zone.spotPrice, offer.pricePerHour);
      // What the run can know without probing: spot that failed it recently is out.
      if (inCooldown(offer, events, placement)) zone.spotAvailable = false;
    } else if (offer.provisioningModel === 'STANDARD') {
      // Flex-start offers are not the policy's to weigh (run/flex-start.ts is their tier).
      zone.onDemandPrice = Math.min(zone.onDemandPrice, offer.pricePerHour);
    }
    zones.set(offer.zone, zone);
  }
  if (current.kind === ActionKind.Spot && zones.has(current.zone)) zones.get(current.zone)!.spotAvailable = true;
  // A zone must offer both models for the policy's model; drop the half-known ones.
  return [...zones.values()].filter((z) => Number.isFinite(z.spotPrice) || Number.isFinite(z.onDemandPrice)).map((z) => ({
    ...z,
    spotPrice: Number.isFinite(z.spotPrice) ? z.spotPrice : Number.MAX_VALUE,
    spotAvailable: Number.isFinite(z.spotPrice) ? z.spotAvailable : false,
    onDemandPrice: Number.isFinite(z.onDemandPrice) ? z.onDemandPrice : Number.MAX_VALUE,
  }));
}

export function observation(inputs: AutoInputs): Observation {
  return {
    nowHours: (inputs.nowMs - inputs.runStartMs) / HOUR_MS,
    remainingWorkHours: inputs.remainingWorkSeconds / 3600,
    hoursUntilDeadline: (inputs.deadlineMs - inputs.nowMs) / HOUR_MS,
    changeoverHours: inputs.changeoverSeconds / 3600,
    stepHours: inputs.stepSeconds / 3600,
    current: inputs.current,
    changeoverRemainingHours: 0,
    zones: zoneObservations(inputs.offers, inputs.events, inputs.placement, inputs.current),
  };
}

/** Asks the policy; returns its action and its next state (JSON-plain). */
export function decideAuto(policyState: unknown, inputs: AutoInputs): { action: Action; state: unknown } {
  const state = (policyState ?? sternaPolicy.initialState()) as ReturnType<typeof sternaPolicy.initialState>;
  return sternaPolicy.decide(state, observation(inputs));
}

/** The offers that carry out an action, best first: the chosen zone and model. */
export function offersFor(action: Action, ranked: readonly Offer[]): Offer[] {
  if (action.kind === ActionKind.Idle) return [];
  const model = action.kind === ActionKind.Spot ? 'SPOT' : 'STANDARD';
  return ranked.filter((o) => o.zone === action.zone && o.provisioningModel === model);
}

export function actionOf(offer: Offer): Action {
  return offer.provisioningModel === 'SPOT' ? { kind: ActionKind.Spot, zone: offer.zone } : { kind: ActionKind.OnDemand, zone: offer.zone };
}
