/**
 * The team activities: a run's admission request reaches its team workflow by
 * signal-with-start, so the first run of a team starts the team's workflow (a workflow
 * cannot signal-with-start by itself). The team answers the run with a signal. The team's
 * sweep asks which of its running runs are closed: describe reads the server's own record
 * (not the eventually consistent visibility store), and no live run is woken.
 *
 * A run's team is the namespace it executes in, in every tenancy mode (docs/tenancy.md):
 * the activities take the team and the run from the server's record of the caller (its
 * namespace and workflow id), never from their input, so a run cannot charge, read or
 * report for another team. Where one namespace serves runs and fleet (mode `single`: the
 * demo, the dev server) that namespace is the one team. With a namespace per team the
 * ledgers live in the system namespace, and the ledger's own activities (tellRun,
 * closedRuns) act only for a ledger of the system namespace, in the namespace its
 * workflow id names.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { mapLimited } from '../map-limited';
import { NamespaceClients, NOT_ALLOWED } from '../namespaces';
import { admissionOfQuery, admissionRequestSignal, admissionSignal, DEFAULT_TEAM, runEndedSignal, runSpendSignal, type TeamActivities, type TeamInput, type TeamWebhooks, teamOfLedgerId, teamWorkflowId } from '../../workflows/api';

/** Describe calls in flight at once during a sweep. */
const DESCRIBES_IN_FLIGHT = 16;

export interface TeamActivityOptions {
  /** One namespace for runs and ledgers (as before tenancy); `namespaces` wins when both are given. */
  client?: Client;
  namespaces?: NamespaceClients;
  /** The worker's team webhooks (STERNA_NOTIFY_TEAMS): a run learns at admission whether its team has any. */
  teamWebhooks?: TeamWebhooks;
}

export function createTeamActivities(options: TeamActivityOptions): TeamActivities {
  const namespaces = options.namespaces ?? NamespaceClients.single(options.client!);
  const namespaced = namespaces.tenancy.mode === 'namespaces';
  const ledgers = () => namespaces.system;

  /**
   * The calling run's team and workflow id: the team is the caller's namespace (in mode
   * `single`, the one namespace there is), and a run whose spec names another team (its
   * `labels.team`, passed only to be checked) is refused before anything is charged.
   */
  function callerRun(named: string | undefined, what: string): { team: string; runId: string } {
    const info = Context.current().info;
    const runId = info.workflowExecution?.workflowId;
    if (!runId) throw ApplicationFailure.nonRetryable(`${what}: only a run may ask its team`, NOT_ALLOWED);
    const team = namespaces.callerTeam(what);
    if (named !== undefined && named !== team && !isDefaultTeam(named)) {
      const fix = namespaced
        ? `start it in namespace ${named} with that team's credentials, or drop the team label`
        : `this deployment has one namespace, ${team}, and it is the one team: drop the team label (or set it to ${team}); for a team of its own, give it a namespace (STERNA_TEAM_NAMESPACES, docs/tenancy.md)`;
      throw ApplicationFailure.nonRetryable(`${what}: the run names team ${named}, but it executes in namespace ${team}, and a run's team is its namespace (its labels.team is only checked against it); ${fix}`, 'InvalidSpec');
    }
    return { team, runId };
  }

  /** The team namespace of the calling ledger (system namespace, teamLedger, id naming a configured team). */
  function ledgerTeam(what: string): string {
    namespaces.requireSystemCaller(what);
    const info = Context.current().info;
    const team = info.workflowType === 'teamLedger' ? teamOfLedgerId(info.workflowExecution?.workflowId ?? '') : undefined;
    if (!team || !namespaces.isTeam(team)) throw ApplicationFailure.nonRetryable(`${what}: the caller is not the ledger of a configured team namespace`, NOT_ALLOWED);
    return team;
  }

  return {
    async askAdmission({ team: named, request }) {
      const { taskQueue } = Context.current().info;
      const { team, runId } = callerRun(named, 'askAdmission');
      await ledgers().workflow.signalWithStart('teamLedger', {
        workflowId: teamWorkflowId(taskQueue, team),
        taskQueue,
        args: [{ team } satisfies TeamInput],
        signal: admissionRequestSignal,
        // The run and its namespace are the server's record of the caller, not the request's
        // (in mode `single` the ledger shares the run's namespace and signals it itself).
        signalArgs: [namespaced ? { ...request, runId, namespace: team } : { ...request, runId }],
        staticSummary: `team ${team}: budget, GPU quota and queue`,
      });
      return { teamWebhooks: (options.teamWebhooks?.[team]?.length ?? 0) > 0, team };
    },
    async admissionOf({ team: named }) {
      const { taskQueue } = Context.current().info;
      const { team, runId } = callerRun(named, 'admissionOf');
      return ledgers().workflow.getHandle(teamWorkflowId(taskQueue, team)).query(admissionOfQuery, runId);
    },
    async closedRuns({ runIds }) {
      const context = Context.current();
      const runs = namespaced ? namespaces.of(ledgerTeam('closedRuns')) : namespaces.system;
      const closed = await mapLimited(runIds, DESCRIBES_IN_FLIGHT, async (runId) => {
        context.heartbeat();
        try {
          const { status } = await runs.workflow.getHandle(runId).describe();
          return status.name === 'RUNNING' ? undefined : runId;
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) return runId;
          throw err;
        }
      });
      return closed.filter((id): id is string => id !== undefined);
    },
    async tellRun({ runId, decision }) {
      const runs = namespaced ? namespaces.of(ledgerTeam('tellRun')) : namespaces.system;
      try {
        await runs.workflow.getHandle(runId).signal(admissionSignal, decision);
        return 'delivered';
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return 'gone';
        throw err;
      }
    },
    async reportToTeam({ team: named, totalUsd, ended }) {
      const { taskQueue } = Context.current().info;
      const { team, runId } = callerRun(named, 'reportToTeam');
      const ledger = ledgers().workflow.getHandle(teamWorkflowId(taskQueue, team));
      try {
        await (ended ? ledger.signal(runEndedSignal, { runId, totalUsd }) : ledger.signal(runSpendSignal, { runId, totalUsd }));
      } catch (err) {
        // A team that is gone (terminated) has nothing to give back to.
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
    },
  };
}

/** The team a spec without a team label gets (rules.ts DEFAULT_TEAM): it names no team, so it claims none. */
function isDefaultTeam(team: string): boolean {
  return team === DEFAULT_TEAM;
}
