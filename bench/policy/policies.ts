/** The online policies the benchmark compares, all driven through the same API. */
import { eagerNextRegionPolicy, onDemandPolicy, type OnlinePolicy, sternaPolicy, uniformProgressPolicy } from '../../workflows/policy';

export const OPTIMAL = 'optimal';
/** Not online: the two-threshold family of hindsight.ts with thresholds chosen per window in hindsight. */
export const HINDSIGHT = 'threshold-hindsight';
/** Not online: the same family with the one pair of thresholds best over all windows (tuned to the file). */
export const FIXED = 'threshold-best-fixed';
/**
 * Online: the same family with one pair given in changeovers (`--thresholds`), carried
 * unchanged to every setting - whether a pair fitted to one row holds on the others.
 */
export const PAIR = 'threshold-pair';
/** With the flex-start tier (`--flex`): the optimum without it, and sterna run without it. */
export const OPTIMAL_NO_FLEX = 'optimal-no-flex';
export const STERNA_NO_FLEX = 'sterna-no-flex';

export const onlinePolicies: OnlinePolicy<unknown>[] = [onDemandPolicy, uniformProgressPolicy, eagerNextRegionPolicy, sternaPolicy];
