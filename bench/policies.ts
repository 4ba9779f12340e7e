/** The online policies the benchmark compares, all driven through the same API. */
import { eagerNextRegionPolicy } from '../workflows/policy/baselines/eager-next-region';
import { onDemandPolicy } from '../workflows/policy/baselines/on-demand';
import { uniformProgressPolicy } from '../workflows/policy/baselines/uniform-progress';
import { sternaPolicy } from '../workflows/policy';
import type { OnlinePolicy } from '../workflows/policy/types';

export const OPTIMAL = 'optimal';

export const onlinePolicies: OnlinePolicy<unknown>[] = [onDemandPolicy, uniformProgressPolicy, eagerNextRegionPolicy, sternaPolicy];
