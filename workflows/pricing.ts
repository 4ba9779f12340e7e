/**
 * Spot or on-demand for the next attempt, and the run's deadline. Pure.
 */
import { FLEX_START_WAIT_BOUNDS, PricingMode, type RunSpec } from './spec';
import { ProvisioningModel } from './types';

/** GCE's longest flex-start run: 7 days. */
export const FLEX_START_MAX_RUN_SECONDS = 7 * 24 * 3600;

/**
 * Which provisioning models to try, in order of preference, when the deadline-aware
 * policy is not asked: `spot`, `on-demand` and `flex-start` are the user's word; `auto`
 * without a deadline (or without an expected duration) tries spot first, then flex-start
 * when the spec allows it (`pricing.flexStart`), then on-demand. `auto` with both is the
 * policy's decision (workflows/auto-policy.ts), not this function's.
 */
export function chooseModels(mode: PricingMode, flexTier = false): ProvisioningModel[] {
  if (mode === PricingMode.Spot) return [ProvisioningModel.Spot];
  if (mode === PricingMode.OnDemand) return [ProvisioningModel.OnDemand];
  if (mode === PricingMode.FlexStart) return [ProvisioningModel.FlexStart];
  return flexTier ? [ProvisioningModel.Spot, ProvisioningModel.FlexStart, ProvisioningModel.OnDemand] : [ProvisioningModel.Spot, ProvisioningModel.OnDemand];
}

/** The models a spec's runs may use, in order of preference (without the deadline-aware policy). */
export function modelsOf(spec: RunSpec): ProvisioningModel[] {
  return chooseModels(spec.pricing.mode, spec.pricing.flexStart !== undefined);
}

/** Seconds a flex-start request of this spec may wait for capacity (GCE's 2 hours unless the spec says less). */
export function flexStartMaxWaitSeconds(spec: RunSpec): number {
  return spec.pricing.flexStart?.maxWait ?? FLEX_START_WAIT_BOUNDS.max;
}

export function deadlineMs(spec: RunSpec, runStartMs: number): number | undefined {
  if (spec.time.deadline) return Date.parse(spec.time.deadline);
  if (spec.time.deadlineAfter !== undefined) return runStartMs + spec.time.deadlineAfter * 1000;
  return undefined;
}
