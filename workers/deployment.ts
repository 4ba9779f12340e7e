/**
 * The worker as one version of a Worker Deployment (Temporal Worker Versioning): its build
 * id, and whether it makes itself the deployment's current version. Runs and the fleet
 * workflows are pinned to the version they start on and move to the current one at their
 * next continue-as-new (workflows/versions.ts); docs/versions.md has the deploy.
 */
import { createHash } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { VersioningConfig } from '../config/worker-config';
import { promoteVersion } from '../client/deployments';

const Status = temporal.api.enums.v1.WorkerDeploymentVersionStatus;
const RoutingState = temporal.api.enums.v1.RoutingConfigUpdateState;

export interface WorkerVersion {
  deploymentName: string;
  buildId: string;
}

/**
 * The build id of a workflow bundle: a hash of its code, so workers built from the same
 * code are one version (a restart is not a deploy) and any change of rules is a new one.
 */
export function buildIdOf(bundleCode: string | Buffer): string {
  return `sterna-${createHash('sha256').update(bundleCode).digest('hex').slice(0, 12)}`;
}

export function versionOf(config: VersioningConfig, bundleCode: string | Buffer): WorkerVersion {
  return { deploymentName: config.deploymentName, buildId: config.buildId ?? buildIdOf(bundleCode) };
}

/** What the server says of a version: its status, and whether it was ever current or ramping. */
export interface VersionStanding {
  status: temporal.api.enums.v1.WorkerDeploymentVersionStatus;
  everActive: boolean;
}

/**
 * Whether a starting worker makes its version current. Only a version that was never
 * current or ramping (a new build) does, and only when asked to (`promote: 'new'`): an
 * old version whose worker restarts while it drains must not take the deployment back.
 */
export function shouldPromote(promote: VersioningConfig['promote'], standing: VersionStanding): boolean {
  return promote === 'new' && standing.status === Status.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE && !standing.everActive;
}

export type PromotionOutcome = 'promoted' | 'already-current' | 'left-as-is';

/**
 * The new routing reaches the task queues in the background; only once the deployment says
 * it has does a pinned workflow's next task learn that its target changed. The worker waits
 * for that before it signals the fleet workflows (observer, price book), so the signal that
 * wakes them also moves them.
 */
async function routedTo(client: Client, version: WorkerVersion, deadline: number): Promise<void> {
  const { namespace } = client.options;
  while (Date.now() < deadline) {
    const { workerDeploymentInfo: info } = await client.workflowService.describeWorkerDeployment({ namespace, deploymentName: version.deploymentName });
    const done = info?.routingConfig?.currentDeploymentVersion?.buildId === version.buildId && info.routingConfigUpdateState === RoutingState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED;
    if (done) return;
    await new Promise((r) => setTimeout(r, 300));
  }
}

/**
 * Once the worker polls (the server knows a version only then), makes it current in the
 * client's namespace if `shouldPromote` says so. Tries for `timeoutMs`; a failure is the operator's to see, not
 * the worker's end: its version keeps serving what is pinned to it.
 */
export async function promoteWhenPolling(client: Client, version: WorkerVersion, promote: VersioningConfig['promote'], timeoutMs = 60_000): Promise<PromotionOutcome> {
  const { namespace } = client.options;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const { workerDeploymentVersionInfo: info } = await client.workflowService.describeWorkerDeploymentVersion({ namespace, deploymentVersion: version });
      if (!info) throw new Error('the server described no version');
      if (info.status === Status.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT) return 'already-current';
      const standing = { status: info.status ?? Status.WORKER_DEPLOYMENT_VERSION_STATUS_UNSPECIFIED, everActive: Boolean(info.firstActivationTime ?? info.lastCurrentTime ?? info.currentSinceTime) };
      if (!shouldPromote(promote, standing)) return 'left-as-is';
      await promoteVersion(client, version.deploymentName, version.buildId, `sterna worker ${version.buildId}`);
      await routedTo(client, version, deadline);
      return 'promoted';
    } catch (err) {
      // NotFound until the worker's first poll reaches the server.
      last = err;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`could not make ${version.deploymentName} ${version.buildId} current within ${timeoutMs} ms: ${last instanceof Error ? last.message : String(last)}; make it current with \`sterna deploy promote ${version.buildId}\``);
}
