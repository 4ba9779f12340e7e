/**
 * A team member's own worker, for the tenancy tests: a workflow registered under the type
 * `trainingRun` that skips the admission and asks the platform's task queue to provision
 * at once, as a worker of one's own on the team's namespace could (write on a namespace
 * includes polling it). Never part of Sterna.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { ProvisionRequest, ProvisionResult } from '../../workflows/api';

export async function trainingRun(platformTaskQueue: string, request: ProvisionRequest): Promise<ProvisionResult> {
  const { provision } = proxyActivities<{ provision(r: ProvisionRequest): Promise<ProvisionResult> }>({
    taskQueue: platformTaskQueue,
    startToCloseTimeout: '2 minutes',
    retry: { maximumAttempts: 1 },
  });
  return provision(request);
}
