/**
 * Between attempts: find capacity, weigh the round's offers, begin an attempt on the
 * next candidate and hear how its create went. Pure reducers over a draft of the state
 * (machine.ts runs them).
 *
 *   find-capacity -> offers -> provision -> provisioned (staging) | provision-failed -> next offer
 *   no acceptable offer -> wait (NO_CAPACITY_BACKOFF_MS) -> find-capacity
 */
import { offersFor } from '../auto-policy';
import { FailureType } from '../failures';
import { resourceName } from '../naming';
import { rankOffers } from '../placement';
import { ActionKind, idle } from '../policy';
import { flexStartMaxWaitSeconds, modelsOf } from '../pricing';
import type { RunSpec } from '../spec';
import { ProvisioningModel, type Offer } from '../types';
import { memoryFor, rankWithMemory } from '../zones/prior';
import { absorbBucketLocations } from './data-placement';
import { missingDatasets } from './datasets';
import { endAttempt } from './ending';
import { PROVISION_FAILURES } from './endings';
import { runEndMs } from './flex-cut';
import { flexRunDurationSeconds, FLEX_START_MAX_RUN_SECONDS, isFlexStart } from './flex-start';
import { gangRef, gangSize } from './gang';
import { limitAtMs } from './limits';
import { noteStartInterval } from './live-interval';
import { absorbPrices, unpricedNote } from './prices';
import { askPolicy, autoPolicyApplies, placementPolicy, triedKey, usable, usableFlex } from './policy-inputs';
import type { Action, Context, RunEvent } from './protocol';
import { AttemptOutcome, Phase, record, TimelineKind, type Attempt, type RunState } from './state';

/** Wait between rounds when every acceptable offer failed: capacity comes back. */
export const NO_CAPACITY_BACKOFF_MS = 30_000;

type PlacingEvent = Extract<RunEvent, { kind: 'offers' | 'provisioned' | 'provision-failed' }>;

/** This phase's events: a round's offers, and what came of a create. */
export function absorbPlacingEvent(state: RunState, spec: RunSpec, event: PlacingEvent, now: number): Action | undefined {
  switch (event.kind) {
    case 'offers': {
      // A dataset that is not there would fail staging on every VM: fail before creating one.
      const missing = event.datasets && missingDatasets(spec, event.datasets);
      if (missing) return { kind: 'fail', ...missing };
      if (event.bucketLocations) absorbBucketLocations(state, event.bucketLocations, now);
      absorbPrices(state, event);
      if (event.zoneMemory) state.zoneMemory = memoryFor(event.zoneMemory, event.offers);
      return absorbOffers(state, spec, event.offers);
    }
    case 'provisioned': {
      const attempt = state.attempts[event.attempt - 1];
      if (event.ref) attempt.ref = event.ref;
      attempt.createSettled = true;
      attempt.startedAt = event.startedAt;
      state.phase = Phase.Staging;
      state.lastHeardAt = now;
      // The worker asked for the observer as it created the resource: no ask of the run's own for now.
      if (event.observerAsked) state.observerAskedAt = now;
      record(state, now, {
        kind: TimelineKind.Running,
        event: `attempt ${attempt.attempt} running in ${attempt.offer.zone}${event.adopted ? ' (adopted after a retried create)' : ''}`,
        attempt: attempt.attempt,
        zone: attempt.offer.zone,
      });
      return undefined;
    }
    case 'provision-failed': {
      const attempt = state.attempts[event.attempt - 1];
      attempt.createSettled = true;
      const outcome = PROVISION_FAILURES[event.failure as FailureType];
      if (!outcome) return { kind: 'fail', failure: event.failure as FailureType, message: event.message };
      return endAttempt(state, spec, attempt, outcome, now, event.message);
    }
  }
}

function absorbOffers(state: RunState, spec: RunSpec, offers: Offer[]): Action | undefined {
  if (offers.length === 0) {
    return {
      kind: 'fail',
      failure: FailureType.NoCapacity,
      message: `resources.accelerators: no zone offers ${spec.resources.accelerators.map((a) => `${a.type} x${a.count}`).join(' or ')} within the placement constraints${unpricedNote(state.prices)}; choose another accelerator or count, or widen placement`,
    };
  }
  const max = spec.pricing.maxPricePerHour;
  const cheapest = offers.reduce((best, o) => (o.pricePerHour < best.pricePerHour ? o : best));
  if (max !== undefined && cheapest.pricePerHour > max) {
    return {
      kind: 'fail',
      failure: FailureType.NoCapacity,
      message: `pricing.maxPricePerHour $${max}/h is below every offer; the cheapest is $${cheapest.pricePerHour.toFixed(4)}/h (${cheapest.provisioningModel} ${cheapest.accelerator} x${cheapest.acceleratorCount} in ${cheapest.zone}); raise it or allow other accelerators`,
    };
  }
  state.placement = { offers, tried: [] };
  return undefined;
}

/** Between attempts: find capacity, then try the next candidate of the round. */
export function placeStep(state: RunState, spec: RunSpec, context: Context): Action {
  const now = context.nowMs;
  if (state.capacityRetryAt !== undefined && now < state.capacityRetryAt) {
    const limitAt = limitAtMs(state, spec, undefined, now);
    return { kind: 'wait', untilMs: Math.min(state.capacityRetryAt, limitAt ?? Infinity) };
  }
  if (!state.placement) {
    state.capacityRetryAt = undefined;
    state.phase = Phase.FindingCapacity;
    return { kind: 'find-capacity' };
  }
  const offer = nextCandidate(state, spec, now);
  if (!offer) {
    state.placement = undefined;
    state.capacityRetryAt = now + NO_CAPACITY_BACKOFF_MS;
    return { kind: 'wait', untilMs: state.capacityRetryAt };
  }
  state.placement.tried.push(triedKey(offer));
  const attempt = beginAttempt(state, offer, context);
  noteStartInterval(state, spec, attempt, now);
  if (isFlexStart(offer)) {
    attempt.requestedAt = new Date(now).toISOString();
    // From the run's own end (flex-cut.ts).
    attempt.runDurationSeconds = flexRunDurationSeconds(runEndMs(state, spec) ?? now + FLEX_START_MAX_RUN_SECONDS * 1000, now);
    record(state, now, {
      kind: TimelineKind.Placing,
      event: `flex-start request in ${offer.zone}: waiting for DWS capacity for up to ${flexStartMaxWaitSeconds(spec)} s, then running at most ${attempt.runDurationSeconds} s`,
      attempt: attempt.attempt,
      zone: offer.zone,
      model: offer.provisioningModel,
    });
  }
  return { kind: 'provision', attempt: attempt.attempt };
}

function beginAttempt(state: RunState, offer: Offer, context: Context): Attempt {
  const number = state.attempts.length + 1;
  // Recorded before the create, so the run releases it even if the worker dies between
  // the API call and the activity's result.
  const attempt: Attempt = {
    attempt: number,
    ref: gangRef({ backend: offer.backend, name: resourceName(context.workflowId, context.execution, number, gangSize(offer)), zone: offer.zone }, offer),
    offer,
    outcome: AttemptOutcome.Running,
    resumedFromStep: state.lastCheckpoint?.step,
    released: false,
    createSettled: false,
  };
  state.attempts.push(attempt);
  state.phase = Phase.Provisioning;
  state.lastHeardAt = undefined;
  state.policyCheckAt = undefined;
  return attempt;
}

/** The next offer to try in this round, or undefined when the round is over. */
export function nextCandidate(state: RunState, spec: RunSpec, nowMs: number): Offer | undefined {
  const round = state.placement!;
  const untried = (o: Offer) => !round.tried.includes(triedKey(o));
  if (autoPolicyApplies(state, spec)) return autoCandidate(state, spec, nowMs);
  const models = modelsOf(spec);
  // Offers another run saw stock out lately go last (the project's zone memory).
  const policy = placementPolicy(state, spec, models, nowMs);
  const ranked = rankWithMemory(rankOffers(round.offers, state.zoneEvents, policy), state.zoneMemory, policy).filter(untried);
  ranked.sort((a, b) => models.indexOf(a.provisioningModel) - models.indexOf(b.provisioningModel));
  if (ranked.length === 0 && round.tried.length === 0) {
    record(state, nowMs, { kind: TimelineKind.NoAcceptableOffer, event: `no acceptable offer now (${round.offers.length} offers, all over price, out of quota or cooling down); waiting` });
  }
  return ranked[0];
}

/**
 * `auto`: the deadline-aware policy picks the zone and the model - spot, on-demand or (a
 * spec with `pricing.flexStart`) flex-start - by expected cost, the run's data cost
 * included; after each failed try it is asked again, now knowing that zone is out.
 */
function autoCandidate(state: RunState, spec: RunSpec, nowMs: number): Offer | undefined {
  const round = state.placement!;
  const models = spec.pricing.flexStart ? [ProvisioningModel.Spot, ProvisioningModel.FlexStart, ProvisioningModel.OnDemand] : [ProvisioningModel.Spot, ProvisioningModel.OnDemand];
  const ranked = rankOffers(round.offers, [], placementPolicy(state, spec, models, nowMs));
  const decision = askPolicy(state, spec, usableFlex(state, spec, round.offers, nowMs), idle, nowMs);
  const chosen = offersFor(decision, ranked).find((o) => usable(state, spec, o, nowMs));
  if (decision.kind === ActionKind.Idle) {
    record(state, nowMs, { kind: TimelineKind.PolicyWait, event: 'policy: wait for cheaper capacity' });
    return undefined;
  }
  const why = decision.kind === ActionKind.FlexStart ? ' (the lowest expected cost under the deadline, a full wait included)' : '';
  if (chosen) record(state, nowMs, { kind: TimelineKind.PolicyChoice, event: `policy: ${decision.kind} in ${decision.zone}${why}`, zone: decision.zone, model: chosen.provisioningModel });
  return chosen;
}
