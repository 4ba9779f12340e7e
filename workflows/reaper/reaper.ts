/**
 * sternaReaper: one pass over every Sterna-labelled resource, deleting those whose run
 * is closed, unknown or past that attempt (reaper/decide.ts), once they are older than
 * the grace period. A Temporal Schedule starts it every few minutes (`sterna reaper
 * install`, or the worker with STERNA_REAPER_INTERVAL_SECONDS); `sterna reaper run
 * --dry-run` starts one pass that deletes nothing.
 *
 * Every deletion is recorded three ways: an activity in this workflow's history, the
 * workflow's result, and the `SternaReaped` search attribute (`sterna reaper log`).
 */
import { proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import { runKey } from '../naming';
import { NOTIFY_ACTIVITY_OPTIONS, type NotifyActivities } from '../run/notify-contract';
import { SternaReaped } from '../search-attributes';
import { Backend } from '../types';
import type { ReaperActivities } from './contract';
import { decideReap, DEFAULT_GRACE_SECONDS, KeepReason, ownerWorkflowId, reapedKey, type OwnerRun, type ReapedResource, type ReaperInput, type ReaperResult } from './decide';

/** Owners asked per activity, deletions in flight at once: bounded payloads and API load. */
const OWNERS_PER_CALL = 200;
const DELETIONS_AT_ONCE = 10;

const { reaperList, reaperOwners } = proxyActivities<ReaperActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', maximumAttempts: 10 },
});
const { reaperDelete } = proxyActivities<ReaperActivities>({
  startToCloseTimeout: '15 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', maximumAttempts: 10 },
});

// A pass waits for its notices, so a webhook that is down holds it up for minutes, not an hour.
const { notifyReaped } = proxyActivities<NotifyActivities>({ ...NOTIFY_ACTIVITY_OPTIONS, scheduleToCloseTimeout: '5 minutes' });

export async function sternaReaper(input: ReaperInput = {}): Promise<ReaperResult> {
  const graceSeconds = input.graceSeconds ?? DEFAULT_GRACE_SECONDS;
  const dryRun = input.dryRun ?? false;
  const result: ReaperResult = { at: new Date().toISOString(), dryRun, graceSeconds, listed: {}, reaped: [], kept: { [KeepReason.Young]: 0, [KeepReason.Live]: 0, [KeepReason.Releasing]: 0, [KeepReason.OwnerUnreadable]: 0 }, gone: 0 };
  for (const backend of input.backends ?? [Backend.Gce, Backend.Gke]) {
    const listing = await reaperList({ backend });
    if (!listing.configured) continue;
    result.listed[backend] = listing.candidates.length;
    const ids = [...new Set(listing.candidates.map((c) => ownerWorkflowId(c, runKey)).filter((id): id is string => id !== undefined))];
    const owners: Record<string, OwnerRun> = {};
    for (let i = 0; i < ids.length; i += OWNERS_PER_CALL) Object.assign(owners, await reaperOwners({ workflowIds: ids.slice(i, i + OWNERS_PER_CALL) }));
    // Decided after the owners were read, on the workflow's clock.
    const now = Date.now();
    const doomed: ReapedResource[] = [];
    for (const candidate of listing.candidates) {
      const id = ownerWorkflowId(candidate, runKey);
      const decision = decideReap(candidate, id === undefined ? undefined : owners[id], now, graceSeconds);
      if (!decision.reap) result.kept[decision.reason]++;
      else doomed.push({ ref: candidate.ref, owner: candidate.owner, workflowId: candidate.workflowId, reason: decision.reason, detail: decision.detail, ageSeconds: Math.round(decision.ageSeconds ?? 0) });
    }
    for (let i = 0; i < doomed.length; i += DELETIONS_AT_ONCE) {
      const batch = doomed.slice(i, i + DELETIONS_AT_ONCE);
      if (!dryRun) {
        const outcomes = await Promise.all(batch.map((r) => reaperDelete({ ref: r.ref, owner: r.owner })));
        const at = new Date().toISOString();
        batch.forEach((r, k) => Object.assign(r, { outcome: outcomes[k].outcome, deletedAt: at }));
        await tellReaped(batch);
      }
      for (const r of batch) {
        if (r.outcome === 'absent') result.gone!++;
        else result.reaped.push(r);
      }
    }
  }
  const deleted = result.reaped.filter((r) => r.outcome === 'deleted').map((r) => reapedKey(r.ref));
  if (deleted.length > 0) upsertSearchAttributes([{ key: SternaReaped, value: deleted }]);
  return result;
}

/**
 * Each deleted resource of a known run is told to that run's webhooks and its team's
 * (the activity reads them from the run). A notice that cannot be delivered is dropped.
 */
async function tellReaped(batch: readonly ReapedResource[]): Promise<void> {
  const told = batch.filter((r) => r.outcome === 'deleted' && r.workflowId !== undefined);
  if (told.length === 0) return;
  await Promise.all(
    told.map((r) =>
      notifyReaped({ workflowId: r.workflowId!, at: r.deletedAt!, resource: { backend: r.ref.backend, zone: r.ref.zone, name: r.ref.name, reason: r.reason, detail: r.detail } }).catch(() => undefined),
    ),
  );
}
