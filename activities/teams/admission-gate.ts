/**
 * The platform's last word before it spends, with a namespace per team: the create
 * activity runs only for a run its team's ledger has admitted, for no more GPUs than it
 * was admitted with, and under the caller's own name.
 *
 * Why here and not only in the run: write on a namespace includes polling its task
 * queues, so a team member's own worker can complete some of the team's workflow tasks
 * as it likes, skipping the admission, and schedule `provision` on the platform's task
 * queue, which the platform's worker then carries out with its cloud credentials. What
 * the activity may trust is the server's record of its caller (namespace, workflow type
 * and id: activities/namespaces.ts) and the ledger, which lives in the system namespace
 * where no team can write; so it asks the ledger about the caller, not about its input.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import { admissionOfQuery, runKey, teamWorkflowId, type AdmissionDecision, type ProvisionRequest } from '../../workflows/api';
import { type NamespaceClients, NOT_ALLOWED } from '../namespaces';

/** GPUs a provision request creates: every accelerator of every node. */
export function gpusOf(request: Pick<ProvisionRequest, 'offer'>): number {
  return request.offer.acceleratorCount * (request.offer.nodes ?? 1);
}

/** Throws (not retried) unless the calling run may create what `request` asks for. */
export type AdmissionGate = (request: ProvisionRequest) => Promise<void>;

export function createAdmissionGate(namespaces: NamespaceClients): AdmissionGate {
  return async (request) => {
    const info = Context.current().info;
    const refuse = (why: string) => ApplicationFailure.nonRetryable(`provision refused: ${why}`, NOT_ALLOWED);
    const workflowId = info.workflowExecution?.workflowId;
    if (!workflowId) throw refuse('only a training run provisions, and this call has no workflow');
    if (info.workflowType !== 'trainingRun') throw refuse(`only a training run provisions, and the caller is a ${info.workflowType}`);
    if (request.owner.run !== runKey(workflowId)) throw refuse(`the resource would be labelled as run ${request.owner.run}, and the caller is run ${runKey(workflowId)} (${workflowId})`);
    const team = namespaces.callerTeam('provision');
    const decision = await namespaces.system.workflow
      .getHandle(teamWorkflowId(info.taskQueue, team))
      .query(admissionOfQuery, workflowId)
      .catch((err: unknown) => {
        if (err instanceof WorkflowNotFoundError) return null;
        throw err;
      });
    if (decision?.outcome !== 'admitted') {
      throw refuse(`run ${workflowId} in namespace ${team} is not admitted by its team's ledger (${describe(decision)}); a run creates nothing before its team admits it`);
    }
    const asked = gpusOf(request);
    if (decision.gpus !== undefined && asked > decision.gpus) {
      throw refuse(`run ${workflowId} was admitted for ${decision.gpus} GPU(s), and ${request.name} would hold ${asked}`);
    }
  };
}

function describe(decision: AdmissionDecision | null): string {
  if (!decision) return 'the ledger has never heard of it';
  return decision.outcome === 'queued' ? `queued at position ${decision.position}` : `${decision.outcome}: ${'message' in decision ? decision.message : ''}`;
}
