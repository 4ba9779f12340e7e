import { eagerNextRegionPolicy } from './baselines/eager-next-region';
import type { OnlinePolicy } from './types';
export type PolicyState = { lastZone: string | null };
export const sternaPolicy: OnlinePolicy<PolicyState> = { ...eagerNextRegionPolicy, name: 'sterna' };
