/**
 * The reaper's Schedule and its log, through the Temporal client: used by the worker (on
 * start, when STERNA_REAPER_INTERVAL_SECONDS is set) and by `sterna reaper`.
 */
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { DEFAULT_GRACE_SECONDS, type ReaperInput, type ReaperResult } from '../../workflows/api';

/** The workflow type (workflows/reaper/reaper.ts), by name: no workflow code runs here. */
export const REAPER_WORKFLOW_TYPE = 'sternaReaper';

export const REAPER_SCHEDULE_ID = 'sterna-reaper';
/** The default: every 5 minutes. */
export const DEFAULT_REAPER_INTERVAL_SECONDS = 300;

export interface ReaperScheduleOptions {
  taskQueue: string;
  intervalSeconds?: number;
  graceSeconds?: number;
}

/** Creates the Schedule, or updates it to these settings: running it twice is harmless. */
export async function installReaperSchedule(client: Client, options: ReaperScheduleOptions): Promise<{ scheduleId: string; created: boolean }> {
  const intervalSeconds = options.intervalSeconds ?? DEFAULT_REAPER_INTERVAL_SECONDS;
  const input: ReaperInput = { graceSeconds: options.graceSeconds ?? DEFAULT_GRACE_SECONDS };
  const spec = { intervals: [{ every: `${intervalSeconds} seconds` as const }] };
  const action = { type: 'startWorkflow' as const, workflowType: REAPER_WORKFLOW_TYPE, workflowId: REAPER_SCHEDULE_ID, taskQueue: options.taskQueue, args: [input] as [ReaperInput] };
  try {
    // A pass still running when the next is due is not doubled; a missed one is not made up.
    await client.schedule.create({ scheduleId: REAPER_SCHEDULE_ID, spec, action, policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' } });
    return { scheduleId: REAPER_SCHEDULE_ID, created: true };
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await client.schedule.getHandle(REAPER_SCHEDULE_ID).update((previous) => ({ ...previous, spec, action }));
    return { scheduleId: REAPER_SCHEDULE_ID, created: false };
  }
}

/** One pass now (`sterna reaper run`), waited for. */
export async function runReaperOnce(client: Client, options: { taskQueue: string; input: ReaperInput }): Promise<ReaperResult> {
  const workflowId = `${REAPER_SCHEDULE_ID}-run-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  return client.workflow.execute<(input: ReaperInput) => Promise<ReaperResult>>(REAPER_WORKFLOW_TYPE, { taskQueue: options.taskQueue, workflowId, args: [options.input] });
}

export interface ReaperLogEntry {
  workflowId: string;
  runId: string;
  result: ReaperResult;
}

/**
 * The most recent passes that deleted something (their `SternaReaped` search attribute
 * is set), newest first, with what each deleted and why; `all` includes passes that
 * deleted nothing and dry runs.
 */
export async function reaperLog(client: Client, options: { limit?: number; all?: boolean } = {}): Promise<ReaperLogEntry[]> {
  const limit = options.limit ?? 20;
  const query = `WorkflowType = '${REAPER_WORKFLOW_TYPE}' AND ExecutionStatus = 'Completed'${options.all ? '' : ' AND SternaReaped IS NOT NULL'}`;
  const entries: ReaperLogEntry[] = [];
  for await (const execution of client.workflow.list({ query })) {
    const result = (await client.workflow.getHandle(execution.workflowId, execution.runId).result()) as ReaperResult;
    entries.push({ workflowId: execution.workflowId, runId: execution.runId, result });
    if (entries.length >= limit) break;
  }
  return entries;
}
