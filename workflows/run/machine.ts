/**
 * The run's reducer: `step(state, spec, event, context)` folds one event into the state
 * and returns the new state, the effects to carry out beside, and the one action to carry
 * out next; `absorb` folds in a message or a release heard beside the loop (no action).
 * Pure: no I/O, no clock but `context.nowMs`. The state is never changed in place: each
 * step returns a new one, frozen (Immer), so nothing outside the reducers can write it.
 *
 * The rules live in the phases, each a reducer over the step's draft:
 *   admission.ts  checks, then the team's admission
 *   placing.ts    find capacity, choose an offer, begin an attempt, hear its create
 *   attempt.ts    while it stages and trains: observations, interval, policy, moves
 *   ending.ts     an attempt ends and is released; the run completes, stops or ends
 * and effects.ts says what the world hears of each step.
 *
 *   start -> check -> ask-admission -> find-capacity -> offers -> provision -> provisioned
 *     -> wait/look -> observed ... -> (attempt ends) -> release -> released
 *     -> complete | next offer | place again
 */
import { produce } from 'immer';
import type { RunSpec } from '../spec';
import { absorbAdmissionEvent, admissionStep } from './admission';
import { absorbAttemptEvent, followStep } from './attempt';
import { effectsOf, publishOf, withWakes } from './effects';
import { absorbEndingEvent, releasesInFlight, releaseStep } from './ending';
import { absorbKept, askKeep } from './keep';
import { limitReached } from './limits';
import { absorbPlacingEvent, placeStep } from './placing';
import type { Absorbed, Action, Context, Effect, RunEvent, Step } from './protocol';
import { currentAttempt, Phase, record, TimelineKind, type RunState } from './state';
import { setBudget, setDeadline } from './validators';

/** Continue as new after this many attempts even if the server does not suggest it. */
export const ATTEMPTS_PER_RUN = 50;

/**
 * Continue as new once an execution's history has this many events, well before the
 * server's suggestion (about 4,000). A cached run's memory on the worker grows with its
 * history: the SDK core keeps a state machine for every command the execution issued,
 * about 1 KB of worker memory per event in all (docs/benchmarks, rows Q and Q4), so a
 * worker's memory is bounded by its runs times this budget, not by how long they run.
 * A training run adds about 11 events a minute (an observer signal, its task, the wake
 * timer moved), so this is a new execution every 10 to 15 minutes; a new execution
 * costs a handful of events (its start, first task, the search attributes it publishes).
 */
export const HISTORY_EVENTS_PER_EXECUTION = 150;

/** One step of the run's loop: fold `event` in, then decide what to do next. */
export function step(state: RunState, spec: RunSpec, event: RunEvent, context: Context): Step<RunState> {
  let action!: Action;
  let effects: Effect[] = [];
  const next = produce(state, (draft) => {
    const stop = absorbInto(draft, spec, event, context);
    action = withWakes(stop ?? decide(draft, spec, context), draft, spec, context.nowMs);
    askKeep(draft, spec, action, context.nowMs);
    effects = effectsOf(draft, state, spec, event, 'step', context.nowMs);
  });
  return { state: next, effects: [publishOf(next, spec, context.nowMs), ...effects], action };
}

/**
 * Folds in what arrives beside the loop: an accepted update, a notification's failure,
 * the releases and the end of a stopping run. Its effects show the change; the loop
 * decides what follows at its next step.
 */
export function absorb(state: RunState, spec: RunSpec, event: RunEvent, context: Context): Absorbed<RunState> {
  let effects: Effect[] = [];
  const next = produce(state, (draft) => {
    absorbInto(draft, spec, event, context);
    effects = effectsOf(draft, state, spec, event, 'beside', context.nowMs);
  });
  return { state: next, effects: [publishOf(next, spec, context.nowMs), ...effects] };
}

function absorbInto(state: RunState, spec: RunSpec, event: RunEvent, context: Context): Action | undefined {
  const now = context.nowMs;
  // Its namespace is its team: known from its first step, so it shows as its team from then on.
  if (context.namespace !== undefined && state.namespace !== context.namespace) state.namespace = context.namespace;
  switch (event.kind) {
    case 'start':
      // A release in flight belongs to the execution that began it: this one asks again.
      for (const a of state.attempts) if (a.releasing && !a.released) a.releasing = undefined;
      return undefined;
    case 'tick':
    case 'observer-asked':
    case 'releasing':
      return undefined;
    case 'checked':
    case 'admission':
    case 'admission-asked':
      return absorbAdmissionEvent(state, event, now);
    case 'offers':
    case 'provisioned':
    case 'provision-failed':
      return absorbPlacingEvent(state, spec, event, now);
    case 'observed':
    case 'notice':
    case 'zone-memory':
    case 'checkpoint-interval-set':
    case 'move-asked':
      return absorbAttemptEvent(state, spec, event, context);
    case 'released':
    case 'release-failed':
    case 'stopped':
    case 'releasing-all':
    case 'ended':
      absorbEndingEvent(state, event, now);
      return undefined;
    case 'kept':
      absorbKept(state, event, now);
      return undefined;
    case 'budget-set':
      setBudget(state, event.usd, now, event.by);
      return undefined;
    case 'deadline-set':
      setDeadline(state, event.deadline, now, event.by);
      return undefined;
    case 'notification-failed':
      record(state, now, { kind: TimelineKind.Warning, event: event.target ? `notification ${event.notification} refused by ${event.target}: ${event.problem}` : `notification ${event.notification} not delivered: ${event.problem}` });
      return undefined;
    case 'continuing':
      record(state, now, { kind: TimelineKind.ContinuedAsNew, event: 'continuing as new to keep the history short' });
      return undefined;
  }
}

/** What to do next, in the order the phases take precedence. */
function decide(state: RunState, spec: RunSpec, context: Context): Action {
  const now = context.nowMs;
  const release = releaseStep(state);
  if (release) return release;
  const limit = limitReached(state, spec, now);
  if (limit) return { kind: 'fail', failure: limit.failure, message: limit.message };

  const live = currentAttempt(state);
  if (live && state.phase === Phase.Provisioning) return { kind: 'provision', attempt: live.attempt };
  // A release in flight is this execution's to finish: the next one would not hear of it.
  if (!releasesInFlight(state) && shouldContinueAsNew(state, context)) return { kind: 'continue-as-new' };
  // A policy switch ends the live attempt: what follows is its release.
  if (live) return followStep(state, spec, live, context) ?? decide(state, spec, context);
  return admissionStep(state, spec, now) ?? placeStep(state, spec, context);
}

function shouldContinueAsNew(state: RunState, context: Context): boolean {
  if (context.continueAsNewSuggested || context.newVersionCurrent || state.attempts.length - context.attemptsAtStart >= ATTEMPTS_PER_RUN) return true;
  return (context.historyLength ?? 0) >= HISTORY_EVENTS_PER_EXECUTION;
}
