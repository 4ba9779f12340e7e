/**
 * The bridge between the trainingRun workflow and the deadline-aware policy of
 * workflows/policy (the same code the trace-replay benchmark scores). It turns what the
 * run knows (offers, this run's stockouts and preemptions, work left, time left) into
 * the policy's Observation - by the same live-view rule the benchmark's live view uses -
 * and the policy's Action back into offers to try.
 */
import { ActionKind, type Action, type Observation, type PolicyState, type Sighting, type ZoneQuote, liveZones, sternaPolicy } from './policy';
import type { StatsTable } from './policy/zone-stats';
import { type PlacementPolicy, type ZoneEvent, ZoneEventKind } from './placement';
import type { Offer } from './types';

export interface AutoInputs {
  offers: readonly Offer[];
  /** This run's zone events so far, oldest first (append-only). */
  events: readonly ZoneEvent[];
  placement: PlacementPolicy;
  nowMs: number;
  runStartMs: number;
  deadlineMs: number;
  remainingWorkSeconds: number;
  changeoverSeconds: number;
  /** Changeover still to pay on the current instance (0 when unknown). */
  changeoverRemainingSeconds?: number;
  /** How long until the workflow asks the policy again. */
  stepSeconds: number;
  current: Action;
  /** Zone statistics from before this run (the project's memory), used when the policy starts. */
  memory?: StatsTable;
  /**
   * What other runs saw (the zone memory's stockouts), not append-only like `events`: each
   * is shown once, at the first decision after it (at the first of all, while it cools down).
   */
  others?: readonly ZoneEvent[];
}

/** The policy's state plus how many of the run's zone events it has been shown. JSON-plain. */
export interface AutoState {
  policy: PolicyState;
  eventsSeen: number;
  /** When the policy last decided (epoch ms): other runs' sightings after it are news. */
  decidedAtMs?: number;
}

const HOUR_MS = 3_600_000;

/** Per zone: the cheapest spot and on-demand price among the acceptable offers; a zone must offer both. */
export function zoneQuotes(offers: readonly Offer[]): ZoneQuote[] {
  const zones = new Map<string, ZoneQuote>();
  for (const offer of offers) {
    if (!offer.quotaAvailable) continue;
    const zone = zones.get(offer.zone) ?? { zone: offer.zone, spotPrice: Infinity, onDemandPrice: Infinity };
    if (offer.provisioningModel === 'SPOT') zone.spotPrice = Math.min(zone.spotPrice, offer.pricePerHour);
    // Flex-start offers are not the policy's to weigh (run/flex-start.ts is their tier).
    else if (offer.provisioningModel === 'STANDARD') zone.onDemandPrice = Math.min(zone.onDemandPrice, offer.pricePerHour);
    zones.set(offer.zone, zone);
  }
  return [...zones.values()].filter((z) => Number.isFinite(z.spotPrice) || Number.isFinite(z.onDemandPrice)).map((z) => ({
    zone: z.zone,
    spotPrice: Number.isFinite(z.spotPrice) ? z.spotPrice : Number.MAX_VALUE,
    onDemandPrice: Number.isFinite(z.onDemandPrice) ? z.onDemandPrice : Number.MAX_VALUE,
  }));
}

/** What this run saw of spot capacity: each spot stockout and spot preemption is a zone without it. */
export function sightingsOf(events: readonly ZoneEvent[]): Sighting[] {
  return events
    .filter((e) => e.provisioningModel === 'SPOT' && (e.kind === ZoneEventKind.Stockout || e.kind === ZoneEventKind.Preempted))
    .map((e) => ({ zone: e.zone, available: false }));
}

/** The policy's observation, by the live view's rule (workflows/policy/live-view.ts) over the events since the last decision. */
export function observation(inputs: AutoInputs, eventsSeen = 0, decidedAtMs?: number): Observation {
  const quotes = zoneQuotes(inputs.offers);
  const news = (inputs.others ?? []).filter((e) => (decidedAtMs === undefined ? inputs.nowMs - e.at < inputs.placement.cooldownSeconds * 1000 : e.at > decidedAtMs));
  const zones = liveZones(quotes, inputs.current, sightingsOf([...inputs.events.slice(eventsSeen), ...news])).map((z) =>
    // A zone without a spot offer has no spot to launch.
    z.spotPrice === Number.MAX_VALUE ? { ...z, spotAvailable: false as const } : z,
  );
  return {
    nowHours: (inputs.nowMs - inputs.runStartMs) / HOUR_MS,
    remainingWorkHours: inputs.remainingWorkSeconds / 3600,
    hoursUntilDeadline: (inputs.deadlineMs - inputs.nowMs) / HOUR_MS,
    changeoverHours: inputs.changeoverSeconds / 3600,
    stepHours: inputs.stepSeconds / 3600,
    current: inputs.current,
    changeoverRemainingHours: (inputs.changeoverRemainingSeconds ?? 0) / 3600,
    zones,
  };
}

/** Runs from before AutoState kept the policy's state bare and were shown every event. */
function autoState(saved: unknown, inputs: AutoInputs): AutoState {
  if (saved === undefined || saved === null) return { policy: sternaPolicy.initialState(inputs.memory), eventsSeen: 0 };
  if (typeof saved === 'object' && 'eventsSeen' in saved) return saved as AutoState;
  return { policy: saved as PolicyState, eventsSeen: inputs.events.length };
}

/** Asks the policy; returns its action and the next state (JSON-plain, an AutoState). */
export function decideAuto(saved: unknown, inputs: AutoInputs): { action: Action; state: AutoState } {
  const state = autoState(saved, inputs);
  const { action, state: policy } = sternaPolicy.decide(state.policy, observation(inputs, state.eventsSeen, state.decidedAtMs));
  return { action, state: { policy, eventsSeen: inputs.events.length, decidedAtMs: inputs.nowMs } };
}

/** The offers that carry out an action, best first: the chosen zone and model. */
export function offersFor(action: Action, ranked: readonly Offer[]): Offer[] {
  if (action.kind === ActionKind.Idle) return [];
  const model = action.kind === ActionKind.Spot ? 'SPOT' : 'STANDARD';
  return ranked.filter((o) => o.zone === action.zone && o.provisioningModel === model);
}

export function actionOf(offer: Offer): Action {
  return offer.provisioningModel === 'SPOT' ? { kind: ActionKind.Spot, zone: offer.zone } : { kind: ActionKind.OnDemand, zone: offer.zone };
}
