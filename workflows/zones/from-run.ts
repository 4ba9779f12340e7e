/**
 * What a run tells the zone memory about an attempt once it is released, per its ending's
 * row (run/endings.ts `memory`): a stockout, a preemption (with how long the VM ran), or a
 * VM that ran and was released without one (its lifetime is exposure: time spot capacity
 * held). Quota and name conflicts say nothing about a zone's capacity and are not told. Pure.
 */
import { ENDINGS } from '../run/endings';
import { AttemptOutcome, type Attempt } from '../run/state';
import { OutcomeKind, type ZoneOutcome } from './memory';

const HOUR_MS = 3_600_000;

function runningHours(attempt: Attempt): number | undefined {
  if (!attempt.startedAt || !attempt.stoppedAt) return undefined;
  const ms = Date.parse(attempt.stoppedAt) - Date.parse(attempt.startedAt);
  return Number.isFinite(ms) && ms >= 0 ? ms / HOUR_MS : undefined;
}

export function outcomeOf(attempt: Attempt, nowMs: number): ZoneOutcome | undefined {
  // A running attempt has not ended.
  if (attempt.outcome === AttemptOutcome.Running) return undefined;
  const kind = ENDINGS[attempt.outcome].memory;
  if (kind === undefined) return undefined;
  const { zone, region, accelerator, provisioningModel, nodes } = attempt.offer;
  // A gang's outcome is its size's: a stockout of N nodes says nothing of one VM's capacity.
  const base = { zone, region, accelerator, model: provisioningModel, ...(nodes !== undefined && nodes > 1 ? { nodes } : {}), resource: attempt.ref.name };
  const lifetimeHours = runningHours(attempt);
  const stoppedAt = Math.min(attempt.stoppedAt ? Date.parse(attempt.stoppedAt) : nowMs, nowMs);
  switch (kind) {
    case OutcomeKind.Stockout:
      return { ...base, kind, at: nowMs };
    case OutcomeKind.Preempted:
      return { ...base, kind, at: stoppedAt, ...(lifetimeHours !== undefined ? { lifetimeHours } : {}) };
    case OutcomeKind.Released:
      return lifetimeHours === undefined ? undefined : { ...base, kind, at: stoppedAt, lifetimeHours };
    default:
      return kind satisfies never;
  }
}

/** The outcomes of released attempts not told yet (`told`: attempt numbers already told). */
export function outcomesToTell(attempts: readonly Attempt[], told: ReadonlySet<number>, nowMs: number): { attempts: number[]; outcomes: ZoneOutcome[] } {
  const fresh = attempts.filter((a) => a.released && !told.has(a.attempt));
  const outcomes = fresh.map((a) => outcomeOf(a, nowMs)).filter((o): o is ZoneOutcome => o !== undefined);
  return { attempts: fresh.map((a) => a.attempt), outcomes };
}
