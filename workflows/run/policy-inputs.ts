/**
 * What the run gives the deadline-aware policy and the placement ranking, read from its
 * state: the placement policy (cooldowns, expected hours, price cap, data cost), the
 * offers it may weigh, and the policy's answer (its own state kept in the run's). Used
 * by the placing and training phases alike.
 */
import { decideAuto, type actionOf } from '../auto-policy';
import { sliceKey } from '../gpu-slices';
import { inCooldown, rankOffers, type PlacementPolicy } from '../placement';
import type { idle } from '../policy';
import { PricingMode, type RunSpec } from '../spec';
import { ProvisioningModel, type Offer } from '../types';
import { memoryStats, rememberedEvents } from '../zones/prior';
import { dataCostsFor, flexTermsFor } from './auto-costs';
import { dataCostUsdFor } from './data-placement';
import { isFlexStart } from './flex-start';
import { remainingWorkSeconds } from './limits';
import type { RunState } from './state';

/** Provision + stage + resume: paid time without progress after each start or switch. */
export const CHANGEOVER_SECONDS = 120;
/** How often the deadline-aware policy is asked again while spot trains. */
export const POLICY_CHECK_SECONDS = 300;

/** One offer's place in a round: zone, model, accelerator and count. */
export function triedKey(offer: Offer): string {
  // A slice is its own shape (absent for whole GPUs, so a whole-GPU key reads as it always did).
  return `${offer.zone}/${offer.provisioningModel}/${offer.accelerator}/${offer.acceleratorCount}${sliceKey(offer)}`;
}

export function autoPolicyApplies(state: RunState, spec: RunSpec): boolean {
  return spec.pricing.mode === PricingMode.Auto && state.deadline !== undefined && spec.time.expectedDuration !== undefined;
}

export function placementPolicy(state: RunState, spec: RunSpec, models: readonly ProvisioningModel[], nowMs: number): PlacementPolicy {
  return {
    nowMs,
    cooldownSeconds: spec.recovery.zoneCooldown,
    expectedHours: (remainingWorkSeconds(state, spec) ?? 3600) / 3600,
    maxPricePerHour: spec.pricing.maxPricePerHour,
    models,
    dataCostUsd: dataCostUsdFor(spec, state),
  };
}

/** Untried in this round and not cooling down for its model. */
export function usable(state: RunState, spec: RunSpec, offer: Offer, nowMs: number): boolean {
  return !state.placement!.tried.includes(triedKey(offer)) && !inCooldown(offer, state.zoneEvents, placementPolicy(state, spec, [offer.provisioningModel], nowMs));
}

/** The offers the policy weighs: flex-start only where a request can be made now (acceptable, untried, not cooling down). */
export function usableFlex(state: RunState, spec: RunSpec, offers: readonly Offer[], nowMs: number): Offer[] {
  if (!spec.pricing.flexStart || state.placement === undefined) return offers.filter((o) => !isFlexStart(o));
  const flex = rankOffers(offers, state.zoneEvents, placementPolicy(state, spec, [ProvisioningModel.FlexStart], nowMs)).filter((o) => usable(state, spec, o, nowMs));
  return offers.filter((o) => !isFlexStart(o) || flex.includes(o));
}

/** The policy's action for the run now; its own state is kept in the run's. */
export function askPolicy(state: RunState, spec: RunSpec, offers: readonly Offer[], current: ReturnType<typeof actionOf> | typeof idle, nowMs: number) {
  // A run that read the zone memory starts the policy from it, and sees its stockouts: what says something of its node count.
  const { action, state: policyState } = decideAuto(state.policyState, {
    memory: state.zoneMemory ? memoryStats(state.zoneMemory, nowMs, Date.parse(state.startedAt), spec.resources.nodes) : undefined,
    offers,
    events: state.zoneEvents,
    others: rememberedEvents(state.zoneMemory, spec.resources.nodes),
    placement: placementPolicy(state, spec, [ProvisioningModel.Spot, ProvisioningModel.OnDemand], nowMs),
    nowMs,
    runStartMs: Date.parse(state.startedAt),
    deadlineMs: Date.parse(state.deadline!),
    remainingWorkSeconds: remainingWorkSeconds(state, spec) ?? 0,
    changeoverSeconds: CHANGEOVER_SECONDS,
    stepSeconds: POLICY_CHECK_SECONDS,
    current,
    flexStart: flexTermsFor(spec),
    dataCost: dataCostsFor(spec, state),
  });
  state.policyState = policyState;
  return action;
}
