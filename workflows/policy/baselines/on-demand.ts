/** Reference: the cheapest on-demand zone from start to finish, never spot. */
import { onDemandAction } from '../deadline';
import type { OnlinePolicy } from '../types';

export type OnDemandState = Record<string, never>;

export const onDemandPolicy: OnlinePolicy<OnDemandState> = {
  name: 'on-demand',
  initialState: () => ({}),
  decide: (state, obs) => ({ action: onDemandAction(obs), state }),
};
