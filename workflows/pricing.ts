/**
 * Spot or on-demand for the next attempt, and the run's deadline. Pure.
 */
import { PricingMode, type RunSpec } from './spec';
import { ProvisioningModel } from './types';

/**
 * Which provisioning models to try, in order of preference, when the deadline-aware
 * policy is not asked: `spot` and `on-demand` are the user's word; `auto` without a
 * deadline (or without an expected duration) tries spot first, then on-demand. `auto`
 * with both is the policy's decision (workflows/auto-policy.ts), not this function's.
 */
export function chooseModels(mode: PricingMode): ProvisioningModel[] {
  if (mode === PricingMode.Spot) return [ProvisioningModel.Spot];
  if (mode === PricingMode.OnDemand) return [ProvisioningModel.OnDemand];
  return [ProvisioningModel.Spot, ProvisioningModel.OnDemand];
}

export function deadlineMs(spec: RunSpec, runStartMs: number): number | undefined {
  if (spec.time.deadline) return Date.parse(spec.time.deadline);
  if (spec.time.deadlineAfter !== undefined) return runStartMs + spec.time.deadlineAfter * 1000;
  return undefined;
}
