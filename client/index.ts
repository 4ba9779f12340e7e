/**
 * The typed client for other services: start a training run, read its status, cancel
 * it, list runs. The spec is validated here with the same schema the workflow uses, so
 * a caller learns about a bad field before anything is started.
 *
 *   const client = new Client({ connection: await Connection.connect() });
 *   const run = await startTrainingRun(client, spec, { workflowId: 'team-a-run-42' });
 *   console.log(await getStatus(client, run.workflowId));
 */
import { randomBytes } from 'node:crypto';
import { WorkflowNotFoundError, type Client, type WorkflowHandle } from '@temporalio/client';
import { statusQuery, setBudgetUpdate, setDeadlineUpdate } from '../workflows/messages';
import type { RunResult, RunStatus } from '../workflows/run-state';
import { SternaTeam } from '../workflows/search-attributes';
import { checkSpec, describeProblems, type RunSpecInput } from '../workflows/spec';
import type { trainingRun } from '../workflows/training-run';

export const DEFAULT_TASK_QUEUE = 'sterna';

export class InvalidSpecError extends Error {
  override name = 'InvalidSpecError';
  constructor(readonly problems: { path: string; message: string }[]) {
    super(describeProblems(problems));
  }
}

export interface StartOptions {
  workflowId?: string;
  taskQueue?: string;
}

export async function startTrainingRun(client: Client, spec: RunSpecInput, options: StartOptions = {}): Promise<WorkflowHandle<typeof trainingRun>> {
  const check = checkSpec(spec);
  if (!check.ok) throw new InvalidSpecError(check.problems);
  const s = check.spec;
  const workflowId = options.workflowId ?? `${s.name ?? 'run'}-${randomBytes(4).toString('hex')}`;
  const accelerators = s.resources.accelerators.map((a) => `${a.type} x${a.count}`).join(' | ');
  return client.workflow.start('trainingRun', {
    taskQueue: options.taskQueue ?? DEFAULT_TASK_QUEUE,
    workflowId,
    args: [spec],
    staticSummary: `train ${s.name ?? workflowId} on ${accelerators} (${s.pricing.mode}${s.pricing.budgetUsd ? `, budget $${s.pricing.budgetUsd}` : ''})`,
    typedSearchAttributes: s.labels.team ? [{ key: SternaTeam, value: s.labels.team }] : undefined,
  });
}

export async function getStatus(client: Client, workflowId: string): Promise<RunStatus> {
  return client.workflow.getHandle(workflowId).query(statusQuery);
}

export async function setBudget(client: Client, workflowId: string, budgetUsd: number): Promise<RunStatus> {
  return client.workflow.getHandle(workflowId).executeUpdate(setBudgetUpdate, { args: [budgetUsd] });
}

export async function setDeadline(client: Client, workflowId: string, deadline: string): Promise<RunStatus> {
  return client.workflow.getHandle(workflowId).executeUpdate(setDeadlineUpdate, { args: [deadline] });
}

/** Requests cancellation; the run releases its resources before it ends. */
export async function cancel(client: Client, workflowId: string): Promise<void> {
  await client.workflow.getHandle(workflowId).cancel();
}

export async function result(client: Client, workflowId: string): Promise<RunResult> {
  return client.workflow.getHandle<typeof trainingRun>(workflowId).result();
}

export interface RunSummary {
  workflowId: string;
  status: string;
  startTime: Date;
  phase?: string;
  zone?: string;
  costUsd?: number;
}

/** Runs, newest first; `query` is a Temporal visibility query, e.g. `SternaTeam = "ml"`. */
export async function listRuns(client: Client, query?: string, limit = 100): Promise<RunSummary[]> {
  const runs: RunSummary[] = [];
  const q = ['WorkflowType = "trainingRun"', query].filter(Boolean).join(' AND ');
  for await (const execution of client.workflow.list({ query: q })) {
    const attrs = execution.searchAttributes as Record<string, unknown[] | undefined>;
    runs.push({
      workflowId: execution.workflowId,
      status: execution.status.name,
      startTime: execution.startTime,
      phase: attrs.SternaPhase?.[0] as string | undefined,
      zone: attrs.SternaZone?.[0] as string | undefined,
      costUsd: attrs.SternaCostUsd?.[0] as number | undefined,
    });
    if (runs.length >= limit) break;
  }
  return runs;
}

export { WorkflowNotFoundError };
