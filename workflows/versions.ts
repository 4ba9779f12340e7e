/**
 * Versions instead of patches (docs/versions.md). Workers are versions of a Worker
 * Deployment and every workflow is pinned to the version it started on, so an execution
 * runs wholly on one version's rules. A long-lived workflow continues as new onto the
 * deployment's current version: as it always does (its history budget), and soon after the
 * server says its target changed.
 */
import { makeContinueAsNewFunc, workflowInfo, type Workflow } from '@temporalio/workflow';

/** Whether a newer version of this deployment is current: the execution should continue as new soon. */
export function newVersionCurrent(): boolean {
  return workflowInfo().targetWorkerDeploymentVersionChanged === true;
}

/**
 * Continues as new on the deployment's current version (a pinned execution's continuation
 * would otherwise inherit its pin). An unversioned worker's workflows continue as they are.
 */
export function continueOnCurrentVersion<F extends Workflow>(...args: Parameters<F>): Promise<never> {
  return makeContinueAsNewFunc<F>({ initialVersioningBehavior: 'AUTO_UPGRADE' })(...args);
}
