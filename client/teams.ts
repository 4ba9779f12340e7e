/**
 * Team budgets and GPU quotas from any service: set them (an update, with start, so the
 * team's workflow need not exist yet) and read them (a query). Changes apply to the
 * team's queued runs at once.
 *
 *   await setTeamLimits(client, 'vision', { budgetUsd: 500, period: 'week', maxGpus: 8 });
 *   const team = await getTeam(client, 'vision');   // spend this period, running, queue
 */
import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import { isLabelValue, LABEL_VALUE_RULE, type LimitsChange, limitsProblem, setTeamLimitsUpdate, type TeamInput, type TeamLedgerWorkflow, teamQuery, type TeamView, teamWorkflowId } from '../workflows/api';
import { requireEncryption } from './encryption';
import { ClientErrorKind, explain, SternaClientError } from './errors';

export type { LimitsChange, TeamView };

export interface TeamOptions {
  /** The task queue whose runs the team's limits govern (`sterna` by default). */
  taskQueue?: string;
  timeoutMs?: number;
}

function checkedTeam(team: string): string {
  if (team.length === 0 || !isLabelValue(team)) {
    throw new SternaClientError(ClientErrorKind.InvalidArgument, `team ${JSON.stringify(team)} is not a valid team name (${LABEL_VALUE_RULE})`, 'use the value runs give as labels.team');
  }
  return team;
}

async function calling<T>(client: Client, operation: string, workflowId: string, timeoutMs: number | undefined, fn: () => Promise<T>): Promise<T> {
  requireEncryption(client);
  try {
    return await (timeoutMs === undefined ? fn() : client.withDeadline(Date.now() + timeoutMs, fn));
  } catch (err) {
    throw await explain(client, err, { operation, workflowId, needsWorker: true, timeoutMs });
  }
}

export async function setTeamLimits(client: Client, team: string, change: LimitsChange, options: TeamOptions = {}): Promise<TeamView> {
  const problem = limitsProblem(change, {});
  // A period alone may be fine for a team that has a budget already: the workflow decides that.
  if (problem && !problem.startsWith('period applies')) throw new SternaClientError(ClientErrorKind.InvalidArgument, `team ${team}: ${problem}`, 'pass a value of that form');
  const taskQueue = options.taskQueue ?? 'sterna';
  const workflowId = teamWorkflowId(taskQueue, checkedTeam(team));
  return calling(client, 'setTeamLimits', workflowId, options.timeoutMs, () =>
    client.workflow.executeUpdateWithStart(setTeamLimitsUpdate, {
      args: [change],
      startWorkflowOperation: new WithStartWorkflowOperation<TeamLedgerWorkflow>('teamLedger', {
        workflowId,
        taskQueue,
        args: [{ team } satisfies TeamInput],
        workflowIdConflictPolicy: 'USE_EXISTING',
        staticSummary: `team ${team}: budget, GPU quota and queue`,
      }),
    }),
  );
}

export async function getTeam(client: Client, team: string, options: TeamOptions = {}): Promise<TeamView> {
  const workflowId = teamWorkflowId(options.taskQueue ?? 'sterna', checkedTeam(team));
  return calling(client, 'team', workflowId, options.timeoutMs, () => client.workflow.getHandle(workflowId).query(teamQuery));
}
