/**
 * Which runs have ended, from the server's visibility store, a few seconds apart.
 *
 * Not one `result()` per run: each is a long poll, and the server caps concurrent long
 * polls per namespace (the dev server's `frontend.namespaceCount`, 1,200 by default), so
 * 2,000 of them fail and, worse, compete with the worker's own pollers. One list query
 * every few seconds costs the server almost nothing and gives the server's close time.
 */
import type { Client } from '@temporalio/client';

/** How an ended run ended (a continue-as-new is not an end). */
export type Closure = 'completed' | 'failed' | 'cancelled' | 'terminated' | 'timed-out';

const CLOSURES: Record<string, Closure> = {
  COMPLETED: 'completed',
  FAILED: 'failed',
  CANCELLED: 'cancelled',
  TERMINATED: 'terminated',
  TIMED_OUT: 'timed-out',
};

export interface Closed {
  workflowId: string;
  closure: Closure;
  closedAtMs: number;
}

export class ClosureWatcher {
  private readonly seen = new Set<string>();
  /** Close time of the newest closure seen; the next query starts a little before it. */
  private sinceMs = 0;

  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
    private readonly workflowType: string,
  ) {}

  /** The runs that ended since the last call (each reported once). */
  async poll(): Promise<Closed[]> {
    // Visibility is written a moment after the close: overlap the window and dedupe.
    const since = new Date(Math.max(0, this.sinceMs - 10_000)).toISOString();
    const query =
      `TaskQueue = '${this.taskQueue}' AND WorkflowType = '${this.workflowType}' AND ExecutionStatus != 'Running' ` +
      `AND ExecutionStatus != 'ContinuedAsNew' AND CloseTime >= '${since}'`;
    const fresh: Closed[] = [];
    for await (const w of this.client.workflow.list({ query })) {
      const closure = CLOSURES[w.status.name];
      if (!closure || !w.closeTime || this.seen.has(w.workflowId)) continue;
      this.seen.add(w.workflowId);
      const closedAtMs = w.closeTime.getTime();
      this.sinceMs = Math.max(this.sinceMs, closedAtMs);
      fresh.push({ workflowId: w.workflowId, closure, closedAtMs });
    }
    return fresh;
  }
}
