/**
 * The reaper's activities (workflows/reaper/contract.ts), built like the others: from the
 * worker's providers and a Temporal client.
 *
 *   activities: { ...createReaperActivities({ providers, client }) }
 *
 * Owners are read with describe (the execution's own state, current), not with a
 * visibility query (which may lag): see workflows/reaper/decide.ts.
 */
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { NamespaceClients } from '../namespaces';
import { executionToken, type OwnerRun, type ReaperActivities, RELEASING_MEMO, SternaAttempt } from '../../workflows/api';
import type { Providers } from '../index';

export { DEFAULT_REAPER_INTERVAL_SECONDS, installReaperSchedule, reaperLog, REAPER_SCHEDULE_ID, runReaperOnce, type ReaperScheduleOptions } from './schedule';

const CLOSED = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED', 'CONTINUED_AS_NEW', 'TIMED_OUT']);
/** Describes in flight at once. */
const DESCRIBES_AT_ONCE = 16;

export interface ReaperActivityOptions {
  providers: Providers;
  /** Where runs and the reaper live when `namespaces` is not given. */
  client: Client;
  /** The system and team namespaces: a resource's run is looked for in every team namespace. */
  namespaces?: NamespaceClients;
}

export function createReaperActivities(options: ReaperActivityOptions): ReaperActivities {
  const namespaces = options.namespaces ?? NamespaceClients.single(options.client);
  // It deletes cloud resources: only the platform's reaper, in the system namespace, may call these.
  const guard = (what: string) => namespaces.requireSystemCaller(what);
  return {
    async reaperList({ backend }) {
      guard('reaperList');
      const provider = options.providers[backend];
      if (!provider) return { configured: false, candidates: [] };
      const fleet = await provider.listFleet();
      return { configured: true, candidates: fleet.map((r) => ({ ref: r.ref, owner: r.owner, workflowId: r.workflowId, createdAt: r.createdAt, ...(r.keepUntil !== undefined ? { keepUntil: r.keepUntil } : {}), ...(r.runUnread ? { runUnread: true as const } : {}) })) };
    },

    async reaperOwners({ workflowIds }) {
      guard('reaperOwners');
      const owners: Record<string, OwnerRun> = {};
      const queue = [...workflowIds];
      await Promise.all(
        Array.from({ length: Math.min(DESCRIBES_AT_ONCE, queue.length) }, async () => {
          for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
            owners[id] = await ownerRunIn(namespaces.teams(), id);
            Context.current().heartbeat();
          }
        }),
      );
      return owners;
    },

    async reaperDelete({ ref, owner }) {
      guard('reaperDelete');
      const provider = options.providers[ref.backend];
      if (!provider) throw new Error(`this worker has no ${ref.backend} provider configured; see docs/workers.md`);
      const context = Context.current();
      const timer = setInterval(() => context.heartbeat(), 5000);
      try {
        // The provider's release: it deletes only a resource labelled with exactly this owner.
        const { outcome } = await provider.release({ ref, owner, createMayBeInFlight: false }, (status) => context.heartbeat(status));
        return { outcome };
      } finally {
        clearInterval(timer);
      }
    },
  };
}

/** The attempts a run says it is releasing; anything malformed says nothing. */
function releasingOfMemo(value: unknown): number[] | undefined {
  return Array.isArray(value) && value.every((a) => Number.isInteger(a)) ? (value as number[]) : undefined;
}

/**
 * The run a resource names, looked for in every team namespace. Found in one: that one.
 * Open in several (two teams chose the same workflow id): unreadable, so the reaper keeps
 * the resource rather than judge it by the wrong team's run. Closed in several, open in
 * none: the first closed one (every candidate is closed).
 */
export async function ownerRunIn(clients: Client[], workflowId: string): Promise<OwnerRun> {
  if (clients.length === 1) return ownerRun(clients[0], workflowId);
  const answers = await Promise.all(clients.map((c) => ownerRun(c, workflowId)));
  const unreadable = answers.find((a) => a.found === 'unreadable');
  if (unreadable) return unreadable;
  const found = answers.filter((a) => a.found === true);
  const open = found.filter((a) => a.open);
  if (open.length > 1) return { found: 'unreadable', message: `workflow id ${workflowId} is open in ${open.length} team namespaces` };
  return open[0] ?? found[0] ?? { found: false };
}

/** The latest execution of a workflow id, as the reaper needs it. */
export async function ownerRun(client: Client, workflowId: string): Promise<OwnerRun> {
  try {
    const description = await client.workflow.getHandle(workflowId).describe();
    const firstRunId = description.raw.workflowExecutionInfo?.firstRunId || undefined;
    const attempt = description.typedSearchAttributes.get(SternaAttempt);
    return {
      found: true,
      // Anything not known to be closed counts as open: the reaper keeps what it cannot judge.
      open: !CLOSED.has(description.status.name),
      status: description.status.name,
      execution: firstRunId ? executionToken(firstRunId) : undefined,
      attempt: typeof attempt === 'number' ? attempt : undefined,
      releasing: releasingOfMemo(description.memo?.[RELEASING_MEMO]),
    };
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return { found: false };
    return { found: 'unreadable', message: (err as Error)?.message ?? String(err) };
  }
}
