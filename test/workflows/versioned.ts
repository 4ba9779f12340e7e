/**
 * Workflows for the worker-versioning test: pinned to the deployment version they start
 * on; `chain` moves to the current version at its continue-as-new when the server says
 * its target version changed ("upgrade on continue-as-new").
 */
import { condition, defineSignal, makeContinueAsNewFunc, setHandler, setWorkflowOptions, workflowInfo } from '@temporalio/workflow';

export const proceed = defineSignal('proceed');

export interface LinkResult {
  generation: number;
  /** The build the execution's last task ran on. */
  buildId?: string;
}

/** Waits for `proceed`, then ends, or continues as new onto the current version if the target changed. */
export async function chain(generation: number): Promise<LinkResult> {
  let proceeded = false;
  setHandler(proceed, () => void (proceeded = true));
  await condition(() => proceeded);
  const info = workflowInfo();
  if (info.targetWorkerDeploymentVersionChanged) {
    await makeContinueAsNewFunc<typeof chain>({ initialVersioningBehavior: 'AUTO_UPGRADE' })(generation + 1);
  }
  return { generation, buildId: info.currentDeploymentVersion?.buildId };
}
setWorkflowOptions({ versioningBehavior: 'PINNED' }, chain);

/** Waits for `proceed` and ends on the version it was pinned to, whatever is current by then. */
export async function pinned(): Promise<LinkResult> {
  let proceeded = false;
  setHandler(proceed, () => void (proceeded = true));
  await condition(() => proceeded);
  return { generation: 0, buildId: workflowInfo().currentDeploymentVersion?.buildId };
}
setWorkflowOptions({ versioningBehavior: 'PINNED' }, pinned);
