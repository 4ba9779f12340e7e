/**
 * Which Sterna resources the reaper deletes: a pure function of what the listing showed,
 * what Temporal says of each owning run, and `now`.
 *
 * A resource names its owner in its labels (`sterna-run` = runKey(workflow id),
 * `sterna-exec` = the execution chain's token, `sterna-attempt`) and carries the workflow
 * id itself (the agent's `sterna-run-id` input), so the reaper asks Temporal about that
 * workflow id directly: a describe reads the execution's own state, which is current,
 * where a visibility query may lag. The latest execution of a workflow id is the only
 * one that can be open, and a continue-as-new keeps the chain (and its token).
 *
 *   resource younger than the grace period                         -> keep (young)
 *   owner's workflow unreadable (server trouble)                   -> keep (owner-unreadable)
 *   kept for inspection (`sterna-keep-until` not yet passed), its run ended -> keep (kept)
 *   no workflow id on it, or one whose runKey is not its label     -> delete (unknown)
 *   no execution of that workflow id                               -> delete (unknown)
 *   latest execution closed (completed, failed, terminated...)     -> delete (closed)
 *   latest execution open, of another chain (a reused workflow id) -> delete (closed: its chain ended)
 *   open, this chain, a newer attempt, this one's release in flight -> keep (releasing)
 *   open, this chain, the run's current attempt is newer           -> delete (superseded)
 *   open, this chain, this attempt or the attempt not yet known    -> keep (live)
 *
 * A kept resource (a failed attempt's VM, workflows/run/keep.ts) is judged as any other
 * once its keep-until has passed; a keep-until further ahead than any keep Sterna makes
 * (KEEP_ON_FAILURE_BOUNDS.max) is not Sterna's and is ignored, as is a malformed one.
 *
 * A run mid-provision or mid-continue-as-new is open and of this chain, so its current
 * attempt is always kept; the grace period covers a resource whose create landed before
 * its run said which attempt is current.
 */
import type { Owner } from '../naming';
import { KEEP_ON_FAILURE_BOUNDS } from '../spec';
import type { Backend, ResourceRef } from '../types';

/** One Sterna-labelled resource, as the listing showed it. */
export interface ReapCandidate {
  ref: ResourceRef;
  owner: Owner;
  /** The run's workflow id, as the resource carries it; absent when it does not. */
  workflowId?: string;
  /** The listing could not yet read whether it carries a run (FleetResource.runUnread): kept. */
  runUnread?: true;
  /** ISO time the resource was created. */
  createdAt?: string;
  /** Epoch seconds it is kept until for inspection (its `sterna-keep-until` label; workflows/run/keep.ts). */
  keepUntil?: number;
}

/** What Temporal says of a workflow id (its latest execution). */
export type OwnerRun =
  | { found: false }
  /** The server could not answer (unavailable, permission): nothing is decided on it. */
  | { found: 'unreadable'; message: string }
  | {
      found: true;
      open: boolean;
      /** The Temporal status name of the latest execution (RUNNING, TERMINATED...). */
      status: string;
      /** executionToken(first run id of the latest execution's chain), when the server tells it. */
      execution?: string;
      /** The run's current attempt (SternaAttempt), when it has published one. */
      attempt?: number;
      /** Older attempts the run is releasing itself (its `sternaReleasing` memo; run/views.ts). */
      releasing?: number[];
    };

/** Resources younger than this are never deleted: 10 minutes, by default. */
export const DEFAULT_GRACE_SECONDS = 600;

export const ReapReason = { Unknown: 'unknown', Closed: 'closed', Superseded: 'superseded' } as const;
export type ReapReason = (typeof ReapReason)[keyof typeof ReapReason];
export const KeepReason = { Young: 'young', Live: 'live', Releasing: 'releasing', OwnerUnreadable: 'owner-unreadable', Kept: 'kept' } as const;
export type KeepReason = (typeof KeepReason)[keyof typeof KeepReason];

export type ReapDecision = { candidate: ReapCandidate; ageSeconds?: number } & ({ reap: true; reason: ReapReason; detail: string } | { reap: false; reason: KeepReason });

/**
 * The workflow id a candidate's owner can be asked about: only one whose runKey is the
 * resource's own run label (`runKeyOf` is naming.runKey), so a mislabelled resource is
 * never judged by another run's state.
 */
export function ownerWorkflowId(candidate: ReapCandidate, runKeyOf: (workflowId: string) => string): string | undefined {
  const id = candidate.workflowId;
  return id && runKeyOf(id) === candidate.owner.run ? id : undefined;
}

export function decideReap(
  candidate: ReapCandidate,
  owner: OwnerRun | undefined,
  nowMs: number,
  graceSeconds: number,
): ReapDecision {
  const created = candidate.createdAt ? Date.parse(candidate.createdAt) : Number.NaN;
  const ageSeconds = Number.isFinite(created) ? Math.max(0, (nowMs - created) / 1000) : undefined;
  // Without a creation time nothing says how old it is: it is never old enough.
  if (ageSeconds === undefined || ageSeconds < graceSeconds) return { candidate, ageSeconds, reap: false, reason: KeepReason.Young };
  // Which run owns it is not read yet: an absent id here says nothing.
  if (candidate.runUnread) return { candidate, ageSeconds, reap: false, reason: KeepReason.OwnerUnreadable };
  const reap = (reason: ReapReason, detail: string): ReapDecision => ({ candidate, ageSeconds, reap: true, reason, detail });
  // Kept for inspection by its run, which has ended (or is ending): not before its time.
  const keptUntil = keptUntilMs(candidate, nowMs);
  // (Its own run still open, this chain: the rules below apply, as to any live run's resource.)
  const ownRunOpen = owner?.found === true && owner.open && (owner.execution === undefined || owner.execution === candidate.owner.execution);
  if (keptUntil !== undefined && keptUntil > nowMs && !ownRunOpen) return { candidate, ageSeconds, reap: false, reason: KeepReason.Kept };
  if (!owner || owner.found === false) {
    return reap(ReapReason.Unknown, candidate.workflowId ? `no workflow ${candidate.workflowId} owns it` : `it names no workflow whose run key is ${candidate.owner.run}`);
  }
  if (owner.found === 'unreadable') return { candidate, ageSeconds, reap: false, reason: KeepReason.OwnerUnreadable };
  if (!owner.open) return reap(ReapReason.Closed, `its run ${candidate.workflowId} is ${owner.status.toLowerCase()}`);
  // Open: a chain token the server did not give cannot be compared, so the run keeps it.
  if (owner.execution !== undefined && owner.execution !== candidate.owner.execution) {
    return reap(ReapReason.Closed, `its execution of ${candidate.workflowId} ended; a later one (another chain) reuses the workflow id`);
  }
  if (owner.attempt !== undefined && candidate.owner.attempt < owner.attempt) {
    // An attempt ended by preemption is released beside the next placement: the run is on it.
    if (owner.releasing?.includes(candidate.owner.attempt)) return { candidate, ageSeconds, reap: false, reason: KeepReason.Releasing };
    return reap(ReapReason.Superseded, `its run ${candidate.workflowId} is on attempt ${owner.attempt}; attempt ${candidate.owner.attempt} was released already`);
  }
  return { candidate, ageSeconds, reap: false, reason: KeepReason.Live };
}

/** Epoch ms a candidate is kept until, if it carries a keep-until Sterna could have written (at most a keep's longest ahead). */
export function keptUntilMs(candidate: ReapCandidate, nowMs: number): number | undefined {
  if (candidate.keepUntil === undefined) return undefined;
  const ms = candidate.keepUntil * 1000;
  return Number.isFinite(ms) && ms <= nowMs + KEEP_ON_FAILURE_BOUNDS.max * 1000 ? ms : undefined;
}

/** `<backend>/<zone>/<name>`: how a deletion is recorded in the SternaReaped search attribute. */
export function reapedKey(ref: ResourceRef): string {
  return `${ref.backend}/${ref.zone}/${ref.name}`;
}

/** The reaper's inputs: a Schedule starts it with these. */
export interface ReaperInput {
  /** Resources younger than this are never deleted (default 600 s). */
  graceSeconds?: number;
  /** Decide and report only: delete nothing. */
  dryRun?: boolean;
  /** Backends to look at (default: both; a backend the worker has no provider for is skipped). */
  backends?: Backend[];
}

export interface ReapedResource {
  ref: ResourceRef;
  owner: Owner;
  workflowId?: string;
  reason: ReapReason;
  detail: string;
  ageSeconds: number;
  /** What the owner-checked release found (dry runs: none). */
  outcome?: 'deleted' | 'absent' | 'not-ours';
  /** When the release returned (dry runs: none). */
  deletedAt?: string;
}

export interface ReaperResult {
  at: string;
  dryRun: boolean;
  graceSeconds: number;
  /** Resources looked at, per backend (backends the worker lacks are absent). */
  listed: Partial<Record<Backend, number>>;
  /** Deleted (or, on a dry run, what would be). */
  reaped: ReapedResource[];
  /** Kept, counted by why. */
  kept: Record<KeepReason, number>;
  /**
   * Decided on, but already gone when the reaper came to delete them: their run released
   * them between the listing and the delete. Not the reaper's doing, so not in `reaped`.
   * (Passes from before this count have none.)
   */
  gone?: number;
}
