/**
 * The Worker Deployment a fleet's workers are versions of (docs/versions.md): which
 * version is current and which older ones still drain, and making a version current.
 */
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

const Status = temporal.api.enums.v1.WorkerDeploymentVersionStatus;
const Drainage = temporal.api.enums.v1.VersionDrainageStatus;

/** One closed vocabulary for where a version stands, from the server's two enums. */
export type VersionState = 'inactive' | 'current' | 'ramping' | 'draining' | 'drained';

export interface VersionSummary {
  buildId: string;
  state: VersionState;
  /** ISO time the version was created (its first worker polled). */
  createdAt?: string;
}

export interface DeploymentSummary {
  deployment: string;
  current?: string;
  versions: VersionSummary[];
}

const STATES: Record<number, VersionState> = {
  [Status.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE]: 'inactive',
  [Status.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT]: 'current',
  [Status.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING]: 'ramping',
  [Status.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING]: 'draining',
  [Status.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED]: 'drained',
};

function isoOf(t: { seconds?: unknown } | null | undefined): string | undefined {
  return t?.seconds === undefined || t.seconds === null ? undefined : new Date(Number(t.seconds) * 1000).toISOString();
}

/** The deployment's versions, newest first. A version whose drainage the server has not checked yet reads as draining. */
export async function describeDeployment(client: Client, deploymentName: string): Promise<DeploymentSummary> {
  const { workerDeploymentInfo: info } = await client.workflowService.describeWorkerDeployment({ namespace: client.options.namespace, deploymentName });
  const versions = (info?.versionSummaries ?? []).map((v): VersionSummary => {
    const drained = v.drainageInfo?.status === Drainage.VERSION_DRAINAGE_STATUS_DRAINED;
    const state = STATES[v.status ?? 0] ?? 'inactive';
    return { buildId: v.deploymentVersion?.buildId ?? '', state: state === 'draining' && drained ? 'drained' : state, createdAt: isoOf(v.createTime) };
  });
  versions.sort((a, b) => (b.createdAt ?? '').localeCompare(a.createdAt ?? ''));
  const current = info?.routingConfig?.currentDeploymentVersion?.buildId || undefined;
  return { deployment: deploymentName, ...(current ? { current } : {}), versions };
}

/** Makes `buildId` the current version: new runs start on it, and running ones move to it at their next continue-as-new. */
export async function promoteVersion(client: Client, deploymentName: string, buildId: string, identity = 'sterna deploy promote'): Promise<void> {
  await client.workflowService.setWorkerDeploymentCurrentVersion({ namespace: client.options.namespace, deploymentName, buildId, identity });
}
