/**
 * A plan before you pay: every way the run could be placed, with predicted cost, finish
 * time and deadline risk, and the choice the run would make (workflows/plan/). Runs as a
 * short `planRun` workflow so it lists capacity with the workers' credentials and price
 * book, exactly as the run would; nothing is created.
 *
 *   const plan = await planTrainingRun(client, spec);
 *   for (const row of plan.rows) console.log(row.zone, row.expectedCostUsd, row.pick);
 */
import { randomBytes } from 'node:crypto';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { causeMessages, checkSpec, type PlanResult, type RunSpecInput } from '../workflows/api';
import { explain, InvalidSpecError, SternaClientError, ClientErrorKind } from './errors';
import { DEFAULT_TASK_QUEUE } from './index';
import { requireEncryption } from './encryption';

export type { PlanResult };
export type { PlanRow } from '../workflows/api';

export interface PlanOptions {
  taskQueue?: string;
  /** How long to wait for a worker to list capacity (default 60 s). */
  timeoutMs?: number;
}

export async function planTrainingRun(client: Client, spec: RunSpecInput, options: PlanOptions = {}): Promise<PlanResult> {
  const check = checkSpec(spec);
  if (!check.ok) throw new InvalidSpecError(check.problems);
  requireEncryption(client);
  const workflowId = `plan-${check.spec.name ?? 'run'}-${randomBytes(4).toString('hex')}`;
  const taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
  const timeoutMs = options.timeoutMs ?? 60_000;
  try {
    // The execution timeout ends a plan no worker picked up; nothing of it is left running.
    return await client.workflow.execute('planRun', { taskQueue, workflowId, args: [spec], workflowExecutionTimeout: timeoutMs, staticSummary: `plan ${check.spec.name ?? 'a run'}` });
  } catch (err) {
    if (err instanceof WorkflowFailedError && /timed out/i.test(causeMessages(err).join(' '))) {
      throw new SternaClientError(
        ClientErrorKind.NoWorker,
        `no worker ran the plan within ${timeoutMs / 1000} s: none polls task queue ${taskQueue}, or its workers predate \`sterna plan\``,
        `start (or upgrade) a Sterna worker on task queue ${taskQueue} (\`npm run worker\`, STERNA_TASK_QUEUE=${taskQueue}) against this server`,
        { cause: err, workflowId },
      );
    }
    throw await explain(client, err, { operation: 'plan', workflowId });
  }
}
