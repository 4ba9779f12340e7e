/**
 * Reference: SkyPilot's default spot recovery (EAGER_NEXT_REGION). Always spot; after a
 * preemption, move to the cheapest other zone with capacity (or wait); on-demand only
 * when the deadline safety net forces it, and then until the end.
 */
import { isAvailable, withSafetyNet } from '../deadline';
import { type Action, ActionKind, type OnlinePolicy, idle } from '../types';

export interface EagerNextRegionState {
  /** The zone of the last spot instance, avoided on the next launch. */
  lastZone: string | null;
}

export const eagerNextRegionPolicy: OnlinePolicy<EagerNextRegionState> = {
  name: 'eager-next-region',
  initialState: () => ({ lastZone: null }),
  decide(state, obs) {
    if (obs.current.kind !== ActionKind.Idle) {
      const action = withSafetyNet(obs, obs.current);
      return { action, state: action.kind === ActionKind.Spot ? { lastZone: action.zone } : state };
    }
    const open = obs.zones.filter(isAvailable).sort((a, b) => a.spotPrice - b.spotPrice);
    const next = open.find((z) => z.zone !== state.lastZone) ?? open[0];
    const wanted: Action = next === undefined ? idle : { kind: ActionKind.Spot, zone: next.zone };
    const action = withSafetyNet(obs, wanted);
    return { action, state: action.kind === ActionKind.Spot ? { lastZone: action.zone } : state };
  },
};
