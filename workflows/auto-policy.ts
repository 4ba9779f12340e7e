/**
 * The bridge between the trainingRun workflow and the deadline-aware policy of
 * workflows/policy (the same code the trace-replay benchmark scores). It turns what the
 * run knows (offers, this run's stockouts and preemptions, work left, time left) into
 * the policy's Observation - by the same live-view rule the benchmark's live view uses -
 * and the policy's Action back into offers to try.
 */
import { ActionKind, type Action, type Observation, type PolicyState, type Sighting, type ZoneQuote, initialState, liveZones, sternaPolicy } from './policy';
import { FLEX_START_MAX_RUN_SECONDS } from './run/flex-start';
import type { StatsTable } from './policy/zone-stats';
import { type PlacementPolicy, type ZoneEvent, ZoneEventKind } from './placement';
import { ProvisioningModel, type Offer } from './types';

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
  /** Flex-start as a tier (runs whose spec asks for it): the request's wait window. Its offers are weighed only then. */
  flexStart?: { maxWaitSeconds: number };
  /** What bringing the run's data to an offer costs (data-cost.ts): added to the price of each start there. */
  dataCost?: (offer: Offer) => { egressUsd: number; stagingSeconds: number };
}

/** The policy's state plus how many of the run's zone events it has been shown. JSON-plain. */
export interface AutoState {
  policy: PolicyState;
  eventsSeen: number;
  /** When the policy last decided (epoch ms): other runs' sightings after it are news. */
  decidedAtMs?: number;
}

const HOUR_MS = 3_600_000;

/**
 * Per zone: the cheapest spot and on-demand price among the acceptable offers (a zone must
 * offer one of them), the cheapest flex-start offer's price and expected wait when `flex`,
 * and what a start there pays to bring the run's data when `dataCost` is given (the
 * zone's spot or else on-demand offer: egress and staging time depend on the region only).
 */
export function zoneQuotes(offers: readonly Offer[], flex = false, dataCost?: AutoInputs['dataCost']): ZoneQuote[] {
  const zones = new Map<string, { zone: string; spotPrice: number; onDemandPrice: number; flex?: Offer; any?: Offer }>();
  for (const offer of offers) {
    if (!offer.quotaAvailable) continue;
    const zone = zones.get(offer.zone) ?? { zone: offer.zone, spotPrice: Infinity, onDemandPrice: Infinity };
    if (offer.provisioningModel === ProvisioningModel.Spot) zone.spotPrice = Math.min(zone.spotPrice, offer.pricePerHour);
    else if (offer.provisioningModel === ProvisioningModel.OnDemand) zone.onDemandPrice = Math.min(zone.onDemandPrice, offer.pricePerHour);
    else if (flex && offer.provisioningModel === ProvisioningModel.FlexStart && (zone.flex === undefined || offer.pricePerHour < zone.flex.pricePerHour)) zone.flex = offer;
    if (offer.provisioningModel !== ProvisioningModel.FlexStart) zone.any ??= offer;
    zones.set(offer.zone, zone);
  }
  return [...zones.values()].filter((z) => Number.isFinite(z.spotPrice) || Number.isFinite(z.onDemandPrice)).map((z) => {
    const data = dataCost && z.any ? dataCost(z.any) : undefined;
    return {
      zone: z.zone,
      spotPrice: Number.isFinite(z.spotPrice) ? z.spotPrice : Number.MAX_VALUE,
      onDemandPrice: Number.isFinite(z.onDemandPrice) ? z.onDemandPrice : Number.MAX_VALUE,
      ...(z.flex ? { flexPrice: z.flex.pricePerHour, flexWaitHours: (z.flex.expectedWaitSeconds ?? 0) / 3600 } : {}),
      ...(data ? { startUsd: data.egressUsd, startHours: data.stagingSeconds / 3600 } : {}),
    };
  });
}

/** What this run saw of spot capacity: each spot stockout and spot preemption is a zone without it. */
export function sightingsOf(events: readonly ZoneEvent[]): Sighting[] {
  return events
    .filter((e) => e.provisioningModel === ProvisioningModel.Spot && (e.kind === ZoneEventKind.Stockout || e.kind === ZoneEventKind.Preempted))
    .map((e) => ({ zone: e.zone, available: false }));
}

/** The policy's observation, by the live view's rule (workflows/policy/live-view.ts) over the events since the last decision. */
export function observation(inputs: AutoInputs, eventsSeen = 0, decidedAtMs?: number): Observation {
  const quotes = zoneQuotes(inputs.offers, inputs.flexStart !== undefined, inputs.dataCost);
  const news = (inputs.others ?? []).filter((e) => (decidedAtMs === undefined ? inputs.nowMs - e.at < inputs.placement.cooldownSeconds * 1000 : e.at > decidedAtMs));
  const seen = [...sightingsOf(inputs.events.slice(eventsSeen)), ...sightingsOf(news).map((s) => ({ ...s, byOthers: true }))];
  const zones = liveZones(quotes, inputs.current, seen).map((z) =>
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
    ...(inputs.flexStart ? { flexStart: { maxWaitHours: inputs.flexStart.maxWaitSeconds / 3600, maxRunHours: FLEX_START_MAX_RUN_SECONDS / 3600 } } : {}),
  };
}

/** Asks the policy; returns its action and the next state (JSON-plain). */
export function decideAuto(saved: AutoState | undefined, inputs: AutoInputs): { action: Action; state: AutoState } {
  const state = saved ?? { policy: initialState(inputs.memory), eventsSeen: 0 };
  const { action, state: policy } = sternaPolicy.decide(state.policy, observation(inputs, state.eventsSeen, state.decidedAtMs));
  return { action, state: { policy, eventsSeen: inputs.events.length, decidedAtMs: inputs.nowMs } };
}

const MODEL_OF = { [ActionKind.Spot]: ProvisioningModel.Spot, [ActionKind.OnDemand]: ProvisioningModel.OnDemand, [ActionKind.FlexStart]: ProvisioningModel.FlexStart } as const;

/** The offers that carry out an action, best first: the chosen zone and model. */
export function offersFor(action: Action, ranked: readonly Offer[]): Offer[] {
  if (action.kind === ActionKind.Idle) return [];
  const model = MODEL_OF[action.kind];
  return ranked.filter((o) => o.zone === action.zone && o.provisioningModel === model);
}

export function actionOf(offer: Offer): Action {
  if (offer.provisioningModel === ProvisioningModel.Spot) return { kind: ActionKind.Spot, zone: offer.zone };
  if (offer.provisioningModel === ProvisioningModel.FlexStart) return { kind: ActionKind.FlexStart, zone: offer.zone };
  return { kind: ActionKind.OnDemand, zone: offer.zone };
}
