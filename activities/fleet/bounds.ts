/**
 * The observer's settings as a worker applies them. They reach the observer in its input
 * and in `observerWanted` signals, which anyone who may signal it can send, so the
 * worker's own configuration is the bound: each setting is taken no costlier than the
 * worker's (no more looks, reads or signals). The silence a run may hear costs both
 * ways (longer: a lost observer is noticed late; shorter: a signal to every run more
 * often), so it is the worker's own.
 */
import { DEFAULT_FLEET_SETTINGS, type FleetSettings } from '../../workflows/api';

type Bound = 'at-least' | 'at-most' | 'exactly';

/** Every setting's bound; a setting added to FleetSettings without one does not compile. */
const BOUNDS: Record<keyof FleetSettings, Bound> = {
  intervalSeconds: 'at-least',
  readsPerMinute: 'at-most',
  progressReadSeconds: 'at-least',
  busyReadSeconds: 'at-least',
  progressSignalSeconds: 'at-least',
  maxSilenceSeconds: 'exactly',
  burstSeconds: 'at-most',
  drainReadSeconds: 'at-least',
};

export function boundSettings(requested: FleetSettings, allowed: FleetSettings): FleetSettings {
  const bounded = { ...DEFAULT_FLEET_SETTINGS, ...allowed };
  for (const key of Object.keys(BOUNDS) as (keyof FleetSettings)[]) {
    const limit = bounded[key]!;
    const asked = requested[key];
    // A forged value may be anything JSON can carry: only a positive number is weighed.
    if (typeof asked !== 'number' || !Number.isFinite(asked) || asked <= 0) continue;
    const bound = BOUNDS[key];
    bounded[key] = bound === 'at-least' ? Math.max(asked, limit) : bound === 'at-most' ? Math.min(asked, limit) : limit;
  }
  return bounded;
}
