/**
 * The team activities: a run's admission request reaches its team workflow by
 * signal-with-start, so the first run of a team starts the team's workflow (a workflow
 * cannot signal-with-start by itself). The team answers the run with a signal. The team's
 * sweep asks which of its running runs are closed: describe reads the server's own record
 * (not the eventually consistent visibility store), and no live run is woken.
 */
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { mapLimited } from '../map-limited';
import { admissionOfQuery, admissionRequestSignal, type TeamActivities, type TeamInput, type TeamWebhooks, teamWorkflowId } from '../../workflows/api';

/** Describe calls in flight at once during a sweep. */
const DESCRIBES_IN_FLIGHT = 16;

export interface TeamActivityOptions {
  client: Client;
  /** The worker's team webhooks (STERNA_NOTIFY_TEAMS): a run learns at admission whether its team has any. */
  teamWebhooks?: TeamWebhooks;
}

export function createTeamActivities(options: TeamActivityOptions): TeamActivities {
  return {
    async askAdmission({ team, request }) {
      const { taskQueue } = Context.current().info;
      await options.client.workflow.signalWithStart('teamLedger', {
        workflowId: teamWorkflowId(taskQueue, team),
        taskQueue,
        args: [{ team } satisfies TeamInput],
        signal: admissionRequestSignal,
        signalArgs: [request],
        staticSummary: `team ${team}: budget, GPU quota and queue`,
      });
      return { teamWebhooks: (options.teamWebhooks?.[team]?.length ?? 0) > 0 };
    },
    async admissionOf({ team, runId }) {
      const { taskQueue } = Context.current().info;
      return options.client.workflow.getHandle(teamWorkflowId(taskQueue, team)).query(admissionOfQuery, runId);
    },
    async closedRuns({ runIds }) {
      const context = Context.current();
      const closed = await mapLimited(runIds, DESCRIBES_IN_FLIGHT, async (runId) => {
        context.heartbeat();
        try {
          const { status } = await options.client.workflow.getHandle(runId).describe();
          return status.name === 'RUNNING' ? undefined : runId;
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) return runId;
          throw err;
        }
      });
      return closed.filter((id): id is string => id !== undefined);
    },
  };
}
