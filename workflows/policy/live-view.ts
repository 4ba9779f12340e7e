/**
 * What a live run can know about spot capacity at a decision point, as the policy's
 * zone observations. One rule, used by both the trace benchmark's live and fleet views
 * (bench/policy/simulate.ts) and the trainingRun workflow's `auto` mode (workflows/auto-policy.ts):
 *
 * - the zone of the spot instance running now has capacity (`true`);
 * - a zone in which something was seen since the last decision - this run's failed
 *   launch (a stockout), this run's preemption, or another run's look (the fleet
 *   observer) - has what was seen last (`true` / `false`);
 * - every other zone is `unknown`. Each sighting is reported once; remembering it is
 *   the policy's business (its zone statistics), not the view's.
 */
import { type Action, ActionKind, type ZoneObservation } from './types';

/** A zone's prices (and the run's data costs there), which a run can always look up. */
export type ZoneQuote = Omit<ZoneObservation, 'spotAvailable'>;

/** Spot capacity seen in a zone: a failed launch or a preemption (false), another run's look (either). */
export interface Sighting {
  zone: string;
  available: boolean;
  /** Seen by another run (the fleet observer, the zone memory), not by this one. */
  byOthers?: boolean;
}

export function liveZones(quotes: readonly ZoneQuote[], current: Action, sightingsSinceLastDecision: readonly Sighting[]): ZoneObservation[] {
  const seen = new Map<string, Sighting>();
  for (const s of sightingsSinceLastDecision) seen.set(s.zone, s);
  return quotes.map((q) => {
    if (current.kind === ActionKind.Spot && current.zone === q.zone) return { ...q, spotAvailable: true };
    const s = seen.get(q.zone);
    if (s === undefined) return { ...q, spotAvailable: 'unknown' };
    return s.byOthers === true ? { ...q, spotAvailable: s.available, seenByOthers: true } : { ...q, spotAvailable: s.available };
  });
}
