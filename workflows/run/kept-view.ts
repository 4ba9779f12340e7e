/**
 * What `sterna status` and the web UI say of an attempt kept for inspection
 * (`recovery.keepOnFailure`, run/keep.ts): read from the state alone, so the views need
 * nothing of the reducer's protocol.
 */
import type { RunState } from './state';

/** What `sterna status` and the web UI say of a kept attempt. */
export interface KeptView {
  attempt: number;
  name: string;
  zone: string;
  /** When the reaper deletes it (ISO). */
  until: string;
  /** Commands that reach it. */
  reach: string[];
  /** The kept time is not in the run's cost; what it costs at most, at the attempt's price. */
  cost: string;
}

export function keptView(state: RunState): KeptView | undefined {
  const keep = state.keep;
  if (keep?.status !== 'kept' || !keep.keptUntil) return undefined;
  const attempt = state.attempts[keep.attempt - 1];
  const from = attempt.stoppedAt ? Date.parse(attempt.stoppedAt) : Date.parse(keep.keptUntil);
  const hours = Math.max(0, (Date.parse(keep.keptUntil) - from) / 3_600_000);
  const most = (attempt.offer.pricePerHour * hours).toFixed(2);
  return {
    attempt: keep.attempt,
    name: attempt.ref.name,
    zone: attempt.ref.zone,
    until: keep.keptUntil,
    reach: keep.reach ?? [],
    cost: `not in the run's cost: keeping it bills at ${attempt.offer.pricePerHour} USD/h, at most ${most} USD until ${keep.keptUntil} (less if it is deleted sooner)`,
  };
}

/** The run's current details (web UI): one line for a kept attempt. */
export function keptDetails(state: RunState): string | undefined {
  const view = keptView(state);
  if (!view) return undefined;
  return `**Kept** attempt ${view.attempt} (${view.name}) until ${view.until}${view.reach.length > 0 ? `: \`${view.reach[0]}\`` : ''}`;
}
