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
import type { ReaperActivities } from '../../workflows/reaper/contract';
import type { OwnerRun } from '../../workflows/reaper/decide';
import { executionToken } from '../../workflows/naming';
import { RELEASING_MEMO } from '../../workflows/run/views';
import { SternaAttempt } from '../../workflows/search-attributes';
import type { Providers } from '../index';

export { installReaperSchedule, reaperLog, REAPER_SCHEDULE_ID, runReaperOnce, type ReaperScheduleOptions } from './schedule';

const CLOSED = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED', 'CONTINUED_AS_NEW', 'TIMED_OUT']);
/** Describes in flight at once. */
const DESCRIBES_AT_ONCE = 16;

export interface ReaperActivityOptions {
  providers: Providers;
  client: Client;
}

export function createReaperActivities(options: ReaperActivityOptions): ReaperActivities {
  return {
    async reaperList({ backend }) {
      const provider = options.providers[backend];
      if (!provider) return { configured: false, candidates: [] };
      const fleet = await provider.listFleet();
      return { configured: true, candidates: fleet.map((r) => ({ ref: r.ref, owner: r.owner, workflowId: r.workflowId, createdAt: r.createdAt, ...(r.runUnread ? { runUnread: true as const } : {}) })) };
    },

    async reaperOwners({ workflowIds }) {
      const owners: Record<string, OwnerRun> = {};
      const queue = [...workflowIds];
      await Promise.all(
        Array.from({ length: Math.min(DESCRIBES_AT_ONCE, queue.length) }, async () => {
          for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
            owners[id] = await ownerRun(options.client, id);
            Context.current().heartbeat();
          }
        }),
      );
      return owners;
    },

    async reaperDelete({ ref, owner }) {
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
