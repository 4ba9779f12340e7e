/**
 * Which notifications a run sends, and when: a pure function of the run's state and the
 * moment (a machine step, or the run ending). Each notification has an idempotency key
 * `<runId>/<kind>/<n>` derived from the state alone, so a replayed or retried workflow task
 * computes the same key, and the delivery activity (activities/notify) sends it with every
 * retry: delivery is at least once, and the key lets a receiver drop the repeats.
 *
 *   started            the first attempt is up (staging or training)           n = 1
 *   preempted          each preemption, with the count                         n = count
 *   restarted          each restart after a training failure                   n = count
 *   budget-80/100      spend reached 80% / 100% of the budget                  n = budget in cents
 *   deadline-at-risk   the deadline policy's slack is below one changeover     n = deadline (epoch s)
 *   completed, failed  the run ended (failed names its failure)                n = 1
 *   reaped             the reaper deleted a resource of the run (reaper.ts)    n = resource name
 *
 * The budget and deadline kinds key on the limit itself: raising the budget or moving the
 * deadline re-arms them. Pure (workflow sandbox and tests alike).
 */
import type { RunSpec } from '../spec';
import { runTeamOf } from './team';
import { remainingWorkSeconds } from './limits';
import { currentAttempt, Phase, type NotifyMemory, type RunState } from './state';
import { NotifyKind } from './notify-spec';
import { ledger, runningSeconds } from './views';

/** The share of the budget that earns the early warning. */
export const BUDGET_WARNING_SHARE = 0.8;
/**
 * The deadline is at risk when the time left, less the work left, is down to one
 * changeover: the margin the deadline-aware policy keeps to fall back to on-demand
 * (policy/deadline.ts canRiskStep). Matches machine.ts CHANGEOVER_SECONDS.
 */
export const DEADLINE_MARGIN_SECONDS = 120;

/** The small JSON event a webhook receives (activities/notify adds `url`, the web UI link). */
export interface NotifyEvent {
  /** The idempotency key: `<runId>/<kind>/<n>`. */
  key: string;
  kind: NotifyKind;
  runId: string;
  name?: string;
  team?: string;
  phase: Phase;
  at: string;
  attempt?: number;
  zone?: string;
  costUsd: number;
  budgetUsd?: number;
  deadline?: string;
  /** Preemptions or restarts so far (preempted, restarted). */
  count?: number;
  /** The named failure (failed) or the attempt's failure (restarted). */
  failure?: { type?: string; message: string };
  /** Deadline at risk: the policy's estimate behind it. */
  estimate?: { remainingWorkSeconds: number; secondsToDeadline: number };
  /** Reaped: which resource, and why. */
  resource?: { backend: string; zone: string; name: string; reason: string; detail: string };
}

/** The moment a run looks for what to tell: after a machine step, or as it ends. */
export type NotifyMoment =
  | { kind: 'step' }
  | { kind: 'ended'; phase: typeof Phase.Completed }
  | { kind: 'ended'; phase: typeof Phase.Failed; failure?: string; message: string };

/**
 * Someone may listen: the run's own webhooks, or its team's (the namespace it runs in)
 * unless the worker that carried its ask said the team has none.
 */
export function mayNotify(spec: RunSpec, state: RunState): boolean {
  return (spec.notify?.webhooks.length ?? 0) > 0 || (runTeamOf(state) !== undefined && state.admission?.teamWebhooks !== false);
}

export function notifyKey(runId: string, kind: NotifyKind, n: number | string): string {
  return `${runId}/${kind}/${n}`;
}

/** The notifications due now that were not sent before, oldest first. Pure. */
export function notificationsDue(state: RunState, spec: RunSpec, moment: NotifyMoment, nowMs: number, memory: NotifyMemory | undefined): NotifyEvent[] {
  const sent = new Set(memory?.sent ?? []);
  const base = eventBase(state, spec, nowMs);
  const due: NotifyEvent[] = [];
  const add = (kind: NotifyKind, n: number | string, extra: Partial<NotifyEvent> = {}) => {
    const key = notifyKey(state.runId, kind, n);
    if (!sent.has(key)) due.push({ ...base, key, kind, ...extra });
  };
  if (hasRun(state)) add(NotifyKind.Started, 1);
  // One step ends at most one attempt, so the latest count is the only new one.
  if (state.preemptions > 0) add(NotifyKind.Preempted, state.preemptions, { count: state.preemptions });
  if (state.restarts > 0) {
    const failed = [...state.attempts].reverse().find((a) => a.outcome === 'failed');
    add(NotifyKind.Restarted, state.restarts, { count: state.restarts, failure: failed ? { message: failed.reason ?? `exit code ${failed.exitCode}` } : undefined });
  }
  if (state.budgetUsd !== undefined) {
    const cents = Math.round(state.budgetUsd * 100);
    if (base.costUsd >= BUDGET_WARNING_SHARE * state.budgetUsd - 1e-9) add(NotifyKind.Budget80, cents);
    if (base.costUsd >= state.budgetUsd - 1e-9) add(NotifyKind.Budget100, cents);
  }
  const risk = deadlineEstimate(state, spec, nowMs);
  if (risk && state.deadline && risk.secondsToDeadline - risk.remainingWorkSeconds <= DEADLINE_MARGIN_SECONDS && !isEnded(state.phase)) {
    add(NotifyKind.DeadlineAtRisk, Math.floor(Date.parse(state.deadline) / 1000), { estimate: risk });
  }
  if (moment.kind === 'ended' && moment.phase === Phase.Completed) add(NotifyKind.Completed, 1, { phase: Phase.Completed });
  if (moment.kind === 'ended' && moment.phase === Phase.Failed) add(NotifyKind.Failed, 1, { phase: Phase.Failed, failure: { type: moment.failure, message: moment.message } });
  return due;
}

/** Remembers that `events` were handed to delivery. */
export function remember(memory: NotifyMemory | undefined, events: readonly NotifyEvent[]): NotifyMemory {
  return { sent: [...(memory?.sent ?? []), ...events.map((e) => e.key)] };
}

/**
 * When a notification will fall due without any event (the budget's 80% and 100% at the
 * live attempt's price, the deadline slack running out while nothing trains): the run
 * wakes then, so the warning is not late by a whole observer silence.
 */
export function notifyWakeAtMs(state: RunState, spec: RunSpec, nowMs: number, memory: NotifyMemory | undefined): number | undefined {
  const sent = new Set(memory?.sent ?? []);
  const at: number[] = [];
  const live = currentAttempt(state);
  if (state.budgetUsd !== undefined && live?.startedAt && live.offer.pricePerHour > 0) {
    const spent = ledger(state, nowMs).totalCostUsd;
    const cents = Math.round(state.budgetUsd * 100);
    for (const [kind, share] of [[NotifyKind.Budget80, BUDGET_WARNING_SHARE], [NotifyKind.Budget100, 1]] as const) {
      if (sent.has(notifyKey(state.runId, kind, cents))) continue;
      const left = share * state.budgetUsd - spent;
      if (left > 0) at.push(nowMs + (left / live.offer.pricePerHour) * 3_600_000);
    }
  }
  const risk = deadlineEstimate(state, spec, nowMs);
  if (risk && state.deadline && !training(state) && !sent.has(notifyKey(state.runId, NotifyKind.DeadlineAtRisk, Math.floor(Date.parse(state.deadline) / 1000)))) {
    at.push(nowMs + (risk.secondsToDeadline - risk.remainingWorkSeconds - DEADLINE_MARGIN_SECONDS) * 1000);
  }
  const future = at.filter((t) => t > nowMs);
  return future.length ? Math.ceil(Math.min(...future)) : undefined;
}

/**
 * The deadline-aware policy's view of the run: the work left (the expected duration less
 * what attempts trained, the live one included) and the time left.
 */
export function deadlineEstimate(state: RunState, spec: RunSpec, nowMs: number): { remainingWorkSeconds: number; secondsToDeadline: number } | undefined {
  const left = remainingWorkSeconds(state, spec);
  if (left === undefined || !state.deadline) return undefined;
  const live = currentAttempt(state);
  const liveTrained = live && !live.stoppedAt ? runningSeconds(live, nowMs) : 0;
  return { remainingWorkSeconds: Math.max(0, left - liveTrained), secondsToDeadline: (Date.parse(state.deadline) - nowMs) / 1000 };
}

function training(state: RunState): boolean {
  return currentAttempt(state) !== undefined && (state.phase === Phase.Training || state.phase === Phase.Staging);
}

function hasRun(state: RunState): boolean {
  return state.attempts.some((a) => a.startedAt !== undefined) || state.phase === Phase.Staging || state.phase === Phase.Training;
}

function isEnded(phase: Phase): boolean {
  return phase === Phase.Completed || phase === Phase.Failed || phase === Phase.Cancelled;
}

function eventBase(state: RunState, spec: RunSpec, nowMs: number): Omit<NotifyEvent, 'key' | 'kind'> {
  const last = state.attempts[state.attempts.length - 1];
  return {
    runId: state.runId,
    ...(spec.name ? { name: spec.name } : {}),
    ...(runTeamOf(state) ? { team: runTeamOf(state) } : {}),
    phase: state.phase,
    at: new Date(nowMs).toISOString(),
    ...(last ? { attempt: last.attempt, zone: last.offer.zone } : {}),
    costUsd: Math.round(ledger(state, nowMs).totalCostUsd * 1e6) / 1e6,
    ...(state.budgetUsd !== undefined ? { budgetUsd: state.budgetUsd } : {}),
    ...(state.deadline ? { deadline: state.deadline } : {}),
  };
}
