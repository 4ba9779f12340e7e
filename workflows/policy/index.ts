/**
 * Placement policy for the trainingRun workflow's `auto` mode and the trace benchmark.
 * Pure and deterministic: no I/O, clock or randomness, JSON-plain state.
 *
 * ```ts
 * import { decide, initialState } from '../workflows/policy';
 * let state = initialState();
 * // at each decision point:
 * const decision = decide(state, observation); // { action, state }
 * state = decision.state;                      // carry it (also through continue-as-new)
 * ```
 */
import type { OnlinePolicy } from './types';
import { type PolicyState, decide, initialState } from './sterna';

export * from './types';
export { type Sighting, type ZoneQuote, liveZones } from './live-view';
export { type PolicyState, decide, initialState } from './sterna';
// What the benchmarks weigh the policy with: the baselines, the deadline's safety net, the zone statistics.
export { eagerNextRegionPolicy } from './baselines/eager-next-region';
export { onDemandPolicy } from './baselines/on-demand';
export { uniformProgressPolicy } from './baselines/uniform-progress';
export { isAvailable, onDemandAction, withSafetyNet } from './deadline';
export { emptyStats, observe } from './zone-stats';
export type { StatsTable } from './zone-stats';

export const sternaPolicy: OnlinePolicy<PolicyState> = { name: 'sterna', initialState, decide };
