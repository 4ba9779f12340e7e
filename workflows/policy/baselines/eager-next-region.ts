/**
 * Reference: SkyPilot's default spot recovery (EAGER_NEXT_REGION). Always spot; after a
 * preemption, move to the cheapest other zone with capacity (or wait); on-demand only
 * when the deadline safety net forces it, and then until the end. Where capacity is not
 * seen (the live view), it launches to find out, as SkyPilot does: each zone not yet
 * tried since the last launch, cheapest first, the zone it just left last; when every
 * zone has failed, it waits a step and starts over.
 */
import { isAvailable, withSafetyNet } from '../deadline';
import { type Action, ActionKind, type OnlinePolicy, type ZoneObservation, idle } from '../types';

export interface EagerNextRegionState {
  /** The zone of the last spot instance, avoided on the next launch. */
  lastZone: string | null;
  /** Zones whose launch failed since the last instance ran. */
  tried?: string[];
}

const byPrice = (a: ZoneObservation, b: ZoneObservation) => a.spotPrice - b.spotPrice;

export const eagerNextRegionPolicy: OnlinePolicy<EagerNextRegionState> = {
  name: 'eager-next-region',
  initialState: () => ({ lastZone: null, tried: [] }),
  decide(state, obs) {
    if (obs.current.kind !== ActionKind.Idle) {
      const action = withSafetyNet(obs, obs.current);
      return { action, state: action.kind === ActionKind.Spot ? { lastZone: action.zone, tried: [] } : state };
    }
    const failed = obs.zones.filter((z) => z.spotAvailable === false).map((z) => z.zone);
    const tried = [...new Set([...(state.tried ?? []), ...failed])];
    const open = obs.zones.filter(isAvailable).sort(byPrice);
    const untried = obs.zones.filter((z) => z.spotAvailable === 'unknown' && !tried.includes(z.zone)).sort(byPrice);
    const pool = open.length > 0 ? open : untried;
    const next = pool.find((z) => z.zone !== state.lastZone) ?? pool[0];
    const wanted: Action = next === undefined ? idle : { kind: ActionKind.Spot, zone: next.zone };
    const action = withSafetyNet(obs, wanted);
    const lastZone = action.kind === ActionKind.Spot && open.length > 0 ? action.zone : state.lastZone;
    return { action, state: { lastZone, tried: next === undefined ? [] : tried } };
  },
};
