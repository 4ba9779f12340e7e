/**
 * Spot or on-demand for the next attempt. `spot` and `on-demand` are the user's word;
 * `auto` asks the deadline-aware policy. Pure, so tests and the benchmark call it too.
 */
import { PricingMode, type RunSpec } from './spec';
import { ProvisioningModel } from './types';

export interface PricingInputs {
  mode: PricingMode;
  nowMs: number;
  deadlineMs?: number;
  /** Accelerator seconds of work still to do; undefined when the spec gives no estimate. */
  remainingWorkSeconds?: number;
  /** Seconds a new attempt spends before it makes progress (provision + stage + resume). */
  changeoverSeconds: number;
}

/**
 * Which provisioning models to try, in order of preference. `auto` uses spot while the
 * deadline leaves room to lose an attempt and still finish on on-demand, and on-demand
 * once it does not (the safety net of Uniform Progress, "Can't Be Late", NSDI 2024).
 */
export function chooseModels(inputs: PricingInputs): ProvisioningModel[] {
  if (inputs.mode === PricingMode.Spot) return [ProvisioningModel.Spot];
  if (inputs.mode === PricingMode.OnDemand) return [ProvisioningModel.OnDemand];
  if (inputs.deadlineMs === undefined || inputs.remainingWorkSeconds === undefined) return [ProvisioningModel.Spot, ProvisioningModel.OnDemand];
  const slackSeconds = (inputs.deadlineMs - inputs.nowMs) / 1000 - inputs.remainingWorkSeconds;
  // Spot is safe only while one more failed attempt (two changeovers: the lost one and the
  // on-demand restart) still fits in the slack.
  return slackSeconds > 2 * inputs.changeoverSeconds ? [ProvisioningModel.Spot, ProvisioningModel.OnDemand] : [ProvisioningModel.OnDemand];
}

export function deadlineMs(spec: RunSpec, runStartMs: number): number | undefined {
  if (spec.time.deadline) return Date.parse(spec.time.deadline);
  if (spec.time.deadlineAfter !== undefined) return runStartMs + spec.time.deadlineAfter * 1000;
  return undefined;
}
