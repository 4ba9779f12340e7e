/**
 * What `sterna cost` reports from: each run in a time window, found through Temporal
 * visibility, with its costs from the cost memo it leaves when it ends (exact: the
 * ledger's own figures), else its result (runs from before the memo), else, while it
 * still runs, its search attributes (SternaCostUsd, to the cent).
 */
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { COST_MEMO, type CostLine, type CostMemo, DEFAULT_TEAM, type RunResult } from '../workflows/api';
import { requireEncryption } from './encryption';
import { explain } from './errors';
import type { RunCost } from './cost-report';

export interface CostWindow {
  /** Runs started at or after this time. */
  since?: Date;
  /** Runs started before this time. */
  until?: Date;
  /** An extra visibility clause, e.g. `TaskQueue = "sterna"`. */
  query?: string;
}

export function costQuery(window: CostWindow): string {
  // A run that continued as new is listed once per execution, and its latest one carries
  // the whole ledger (the state crosses over): the executions it left behind would count twice.
  const clauses = ['WorkflowType = "trainingRun"', 'ExecutionStatus != "ContinuedAsNew"'];
  if (window.since) clauses.push(`StartTime >= "${window.since.toISOString()}"`);
  if (window.until) clauses.push(`StartTime < "${window.until.toISOString()}"`);
  if (window.query) clauses.push(`(${window.query})`);
  return clauses.join(' AND ');
}

type Attrs = Record<string, unknown[] | undefined>;
const first = <T>(attrs: Attrs, key: string) => attrs[key]?.[0] as T | undefined;

function fromMemo(namespace: string, workflowId: string, memo: CostMemo): RunCost {
  return { namespace, workflowId, team: memo.team, project: memo.project, costUsd: memo.costUsd, onDemandCostUsd: memo.onDemandCostUsd, preemptions: memo.preemptions, lines: memo.lines, source: 'memo' };
}

function fromResult(namespace: string, execution: WorkflowExecutionInfo, result: RunResult): RunCost {
  const attrs = execution.searchAttributes as Attrs;
  const accelerator = first<string>(attrs, 'SternaAccelerator') ?? '';
  // Results carry no accelerator count: one GPU per attempt is assumed for these older runs.
  const lines: CostLine[] = result.attempts.map((a) => ({
    zone: a.zone,
    accelerator,
    provisioningModel: a.provisioningModel,
    gpus: 1,
    attempts: 1,
    preemptions: a.outcome === 'preempted' ? 1 : 0,
    runningSeconds: a.runningSeconds,
    gpuSeconds: a.runningSeconds,
    costUsd: a.costUsd,
    onDemandCostUsd: result.totalCostUsd > 0 ? (a.costUsd * result.onDemandCostUsd) / result.totalCostUsd : 0,
  }));
  return { namespace, workflowId: execution.workflowId, team: first<string>(attrs, 'SternaTeam') ?? DEFAULT_TEAM, costUsd: result.totalCostUsd, onDemandCostUsd: result.onDemandCostUsd, preemptions: result.preemptions, lines, source: 'result' };
}

function fromSearchAttributes(namespace: string, execution: WorkflowExecutionInfo): RunCost {
  const attrs = execution.searchAttributes as Attrs;
  const cost = first<number>(attrs, 'SternaCostUsd') ?? 0;
  const zone = first<string>(attrs, 'SternaZone');
  const preemptions = first<number>(attrs, 'SternaPreemptions') ?? 0;
  // No on-demand figure while it runs: no savings are claimed for it.
  const lines: CostLine[] = zone
    ? [{ zone, accelerator: first<string>(attrs, 'SternaAccelerator') ?? '', provisioningModel: '', gpus: 0, attempts: 0, preemptions, runningSeconds: 0, gpuSeconds: 0, costUsd: cost, onDemandCostUsd: cost }]
    : [];
  return { namespace, workflowId: execution.workflowId, team: first<string>(attrs, 'SternaTeam') ?? DEFAULT_TEAM, costUsd: cost, onDemandCostUsd: cost, preemptions, lines, source: 'search-attributes' };
}

/** The runs of the client's namespace in the window. */
export async function runCosts(client: Client, window: CostWindow = {}): Promise<RunCost[]> {
  requireEncryption(client);
  const namespace = client.options.namespace;
  try {
    const costs: RunCost[] = [];
    for await (const execution of client.workflow.list({ query: costQuery(window) })) {
      const memo = execution.memo?.[COST_MEMO] as CostMemo | undefined;
      if (memo) costs.push(fromMemo(namespace, execution.workflowId, memo));
      else if (execution.status.name === 'COMPLETED') costs.push(fromResult(namespace, execution, await client.workflow.getHandle(execution.workflowId, execution.runId).result()));
      else costs.push(fromSearchAttributes(namespace, execution));
    }
    return costs;
  } catch (err) {
    throw await explain(client, err, { operation: 'cost' });
  }
}
