/**
 * The team workflow's identity, messages and activity: what runs, clients and the CLI
 * share. One team workflow per task queue and team, started by the first run that asks
 * (signal-with-start) or by `sterna team set`.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { AdmissionDecision, AdmissionRequest, LimitsChange, TeamState, TeamView } from './rules';

export function teamWorkflowId(taskQueue: string, team: string): string {
  return `sterna-team/${taskQueue}/${team}`;
}

/** The team a ledger's workflow id names (after the last `/`: a namespace name has none); undefined for any other id. */
export function teamOfLedgerId(workflowId: string): string | undefined {
  if (!workflowId.startsWith('sterna-team/')) return undefined;
  const team = workflowId.slice(workflowId.lastIndexOf('/') + 1);
  return team && workflowId.length > 'sterna-team/'.length + team.length + 1 ? team : undefined;
}

export interface TeamInput {
  team: string;
  /** How often the team checks that its running runs still exist (default 15 minutes); carried through continue-as-new. */
  sweepSeconds?: number;
  /** Carried through continue-as-new. */
  state?: TeamState;
}

/** The teamLedger workflow as clients start it (a plain type: test/stack/client.test.ts checks it against the workflow). */
export type TeamLedgerWorkflow = (input: TeamInput) => Promise<void>;

/** A run asks to start (run -> team, through the askAdmission activity's signal-with-start). */
export const admissionRequestSignal = defineSignal<[request: AdmissionRequest]>('admissionRequest');
/** A run's ledger total so far (run -> team), sent as its attempts are billed. */
export const runSpendSignal = defineSignal<[spend: { runId: string; totalUsd: number }]>('runSpend');
/** A run ended, however it ended: its GPUs return to the team (run -> team, from its finally). */
export const runEndedSignal = defineSignal<[ended: { runId: string; totalUsd: number }]>('runEnded');
/** The team's answer (team -> run). */
export const admissionSignal = defineSignal<[decision: AdmissionDecision]>('admission');

/** Set budget, period or GPU quota; applies to queued runs at once. Answers the team as it now stands. */
export const setTeamLimitsUpdate = defineUpdate<TeamView, [change: LimitsChange]>('setTeamLimits');
export const teamQuery = defineQuery<TeamView>('team');
/** The ledger's standing answer about one run (rules.ts `admissionOf`); null when it has never heard of it. */
export const admissionOfQuery = defineQuery<AdmissionDecision | null, [runId: string]>('admissionOf');

/** What the worker that carried the ask knows of the team (absent from runs recorded before it said). */
export interface AdmissionAsked {
  /** Whether the worker has webhooks for this team (STERNA_NOTIFY_TEAMS): without them a run with none of its own sends nothing. */
  teamWebhooks: boolean;
  /**
   * The team the ledger charges: the run's namespace, in every tenancy mode (absent from
   * runs recorded before it said). What the run shows and reports as its team.
   */
  team?: string;
}

export interface TeamActivities {
  /**
   * Signal-with-start of the team workflow with the run's request. The team is the
   * caller's namespace; `team` is what the run's spec names (its label, or the default
   * team), only checked: a run naming another team is refused (InvalidSpec).
   */
  askAdmission(input: { team: string; request: AdmissionRequest }): Promise<AdmissionAsked | void>;
  /**
   * The team ledger's standing answer about the calling run (a query, so no message to the
   * run can stand in for it); null when it has none. The team and the run are the caller's
   * (its namespace and workflow id); the input's are checked or ignored.
   */
  admissionOf(input: { team?: string; runId: string }): Promise<AdmissionDecision | null>;
  /** Of these runs (workflow ids), the ones whose newest execution is closed or that do not exist. */
  closedRuns(input: { runIds: string[] }): Promise<string[]>;
  /**
   * The ledger's answer to one of its runs, when they live in another namespace (the team's):
   * a workflow cannot signal across namespaces. The namespace is the ledger's team, read
   * from the calling ledger's own workflow id; 'gone' when the run does not exist there.
   */
  tellRun(input: { runId: string; decision: AdmissionDecision }): Promise<'delivered' | 'gone'>;
  /**
   * A run's ledger total so far (runSpendSignal), or its end (runEndedSignal, `ended`), to
   * its team's ledger. The run and the team are the caller's own (its workflow id and
   * namespace), never the input's: `team`, when given, must be the caller's namespace.
   */
  reportToTeam(input: { team?: string; totalUsd: number; ended: boolean }): Promise<void>;
}
