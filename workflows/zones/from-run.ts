/**
 * What a run tells the zone memory about an attempt once it is released: a stockout, a
 * preemption (with how long the VM ran), or a VM that ran and was released without one
 * (its lifetime is exposure: time spot capacity held). Quota and name conflicts say
 * nothing about a zone's capacity and are not told. Pure.
 */
import { AttemptOutcome, type Attempt } from '../run/state';
import { OutcomeKind, type ZoneModel, type ZoneOutcome } from './memory';

const HOUR_MS = 3_600_000;

function runningHours(attempt: Attempt): number | undefined {
  if (!attempt.startedAt || !attempt.stoppedAt) return undefined;
  const ms = Date.parse(attempt.stoppedAt) - Date.parse(attempt.startedAt);
  return Number.isFinite(ms) && ms >= 0 ? ms / HOUR_MS : undefined;
}

export function outcomeOf(attempt: Attempt, nowMs: number): ZoneOutcome | undefined {
  const { zone, region, accelerator, provisioningModel } = attempt.offer;
  const base = { zone, region, accelerator, model: provisioningModel as ZoneModel, resource: attempt.ref.name };
  const lifetimeHours = runningHours(attempt);
  const stoppedAt = attempt.stoppedAt ? Date.parse(attempt.stoppedAt) : nowMs;
  switch (attempt.outcome) {
    // A flex-start wait that ran out is the flex pool's stockout (its key's model is FLEX_START).
    case AttemptOutcome.Stockout:
    case AttemptOutcome.WaitExpired:
      return { ...base, kind: OutcomeKind.Stockout, at: nowMs };
    case AttemptOutcome.Preempted:
      return { ...base, kind: OutcomeKind.Preempted, at: Math.min(stoppedAt, nowMs), ...(lifetimeHours !== undefined ? { lifetimeHours } : {}) };
    case AttemptOutcome.Completed:
    case AttemptOutcome.Failed:
    case AttemptOutcome.NotRunnable:
    case AttemptOutcome.Switched:
    case AttemptOutcome.Stopped:
    case AttemptOutcome.RunDurationReached:
      return lifetimeHours === undefined ? undefined : { ...base, kind: OutcomeKind.Released, at: Math.min(stoppedAt, nowMs), lifetimeHours };
    // Quota and name conflicts say nothing about capacity; a running attempt has not ended.
    case AttemptOutcome.QuotaExceeded:
    case AttemptOutcome.Conflict:
    case AttemptOutcome.Running:
      return undefined;
    default:
      return attempt.outcome satisfies never;
  }
}

/** The outcomes of released attempts not told yet (`told`: attempt numbers already told). */
export function outcomesToTell(attempts: readonly Attempt[], told: ReadonlySet<number>, nowMs: number): { attempts: number[]; outcomes: ZoneOutcome[] } {
  const fresh = attempts.filter((a) => a.released && !told.has(a.attempt));
  const outcomes = fresh.map((a) => outcomeOf(a, nowMs)).filter((o): o is ZoneOutcome => o !== undefined);
  return { attempts: fresh.map((a) => a.attempt), outcomes };
}
