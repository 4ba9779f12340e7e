/**
 * The options an observer runs by, as it accepts them. They arrive in its input and in
 * `observerWanted` signals, which anyone who may signal the observer can send: options
 * that are not a well-formed set are ignored (the observer keeps what it had), so a
 * malformed one can neither stop the observer nor make it spin. How costly well-formed
 * settings may be is bounded where they are applied, by the worker's own configuration
 * (activities/fleet/bounds.ts).
 */
import { z } from 'zod';
import { DEFAULT_FLEET_SETTINGS, type FleetSettings, type ObserverOptions } from './contract';

export const DEFAULT_OBSERVER_OPTIONS: ObserverOptions = { settings: DEFAULT_FLEET_SETTINGS, watchSeconds: 300, idleExitSeconds: 1800 };

/** Built on first use, as spec.ts's schema is. */
let built: ReturnType<typeof buildSchema> | undefined;

function buildSchema() {
  const Seconds = z.number().positive().max(86_400);
  const settings = z.object({
    intervalSeconds: Seconds,
    readsPerMinute: z.number().positive().max(1_000_000),
    progressReadSeconds: Seconds,
    busyReadSeconds: Seconds,
    progressSignalSeconds: Seconds,
    maxSilenceSeconds: Seconds,
    burstSeconds: Seconds,
    drainReadSeconds: Seconds.optional(),
  } satisfies Record<keyof FleetSettings, z.ZodType>);
  return z.object({ settings, watchSeconds: z.number().min(1).max(3_600), idleExitSeconds: Seconds.max(7 * 86_400) });
}

/** `asked` when it is a well-formed set of options, else `current`. */
export function acceptedOptions(asked: unknown, current: ObserverOptions): ObserverOptions {
  const parsed = (built ??= buildSchema()).safeParse(asked);
  if (!parsed.success) return current;
  const { settings, watchSeconds, idleExitSeconds } = parsed.data;
  return { settings, watchSeconds, idleExitSeconds };
}
