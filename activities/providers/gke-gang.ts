/**
 * A GKE gang: N pods of one attempt that start together or not at all.
 *
 * One Indexed Job (`completionMode: Indexed`, `completions = parallelism = N`) whose pods
 * get the hostnames `<job>-<index>`, and a headless Service of the Job's name that gives
 * them stable DNS names (`<job>-<index>.<job>.<namespace>.svc`). Each pod learns its place
 * from the variables `torchrun` and friends read:
 *   STERNA_NODE_RANK     the pod's completion index (0 .. N-1), from its own annotation
 *   STERNA_NUM_NODES     N
 *   STERNA_MASTER_ADDR   rank 0's DNS name through the Service
 *   STERNA_MASTER_PORT   the rendezvous port rank 0 listens on
 *
 * Admission is all or nothing: the attempt runs once every rank has a pod that started;
 * a gang of which some ranks stay unscheduled past the pending timeout is a partial gang,
 * released whole and counted a stockout of its zone (with flex-start, one
 * ProvisioningRequest for N pods admits the gang at once).
 *
 * The Service carries the attempt's labels and an owner reference to its Job, so the
 * garbage collector removes it with the Job even if a release never comes; release
 * deletes it itself as well.
 */
import type { V1EnvVar, V1Pod, V1Service } from '@kubernetes/client-node';

/** The annotation (and, since Kubernetes 1.28, label) the Job controller gives each pod of an Indexed Job. */
export const COMPLETION_INDEX = 'batch.kubernetes.io/job-completion-index';
/** torch.distributed's default rendezvous port. */
export const GANG_MASTER_PORT = 29500;

/** The DNS name rank 0 has through the gang's headless Service. */
export function masterAddress(name: string, namespace: string): string {
  return `${name}-0.${name}.${namespace}.svc`;
}

/** The gang variables of every pod; the rank is read from the pod's own completion index. */
export function gangEnv(name: string, namespace: string, nodes: number): V1EnvVar[] {
  return [
    { name: 'STERNA_NODE_RANK', valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${COMPLETION_INDEX}']` } } },
    { name: 'STERNA_NUM_NODES', value: String(nodes) },
    { name: 'STERNA_MASTER_ADDR', value: masterAddress(name, namespace) },
    { name: 'STERNA_MASTER_PORT', value: String(GANG_MASTER_PORT) },
  ];
}

/** The headless Service that names the gang's pods, owned by its Job. */
export function gangService(name: string, namespace: string, labels: Record<string, string>, job: { uid: string }): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name,
      namespace,
      labels,
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name, uid: job.uid, blockOwnerDeletion: false }],
    },
    spec: {
      clusterIP: 'None',
      selector: { 'job-name': name },
      // Peers must resolve each other while they start, before any readiness.
      publishNotReadyAddresses: true,
      ports: [{ name: 'rendezvous', port: GANG_MASTER_PORT, targetPort: GANG_MASTER_PORT }],
    },
  };
}

/** The rank of a gang's pod, or undefined for a pod of a single-pod Job. */
export function rankOf(pod: V1Pod): number | undefined {
  const value = pod.metadata?.annotations?.[COMPLETION_INDEX];
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;
}

/** The pod whose agent speaks for the attempt: rank 0 (the oldest, if the Job replaced it), or the oldest pod of a single-pod Job. */
export function leadPod(podsOldestFirst: V1Pod[]): V1Pod | undefined {
  return podsOldestFirst.find((p) => (rankOf(p) ?? 0) === 0) ?? podsOldestFirst[0];
}

/** Whether a pod's container started (it runs, or ran and ended). */
export function podStarted(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return phase === 'Running' || phase === 'Succeeded' || (phase === 'Failed' && Boolean(pod.status?.startTime));
}

export interface GangProgress {
  /** Ranks with a pod bound to a node. */
  scheduled: number;
  /** Ranks with a pod whose container started. */
  started: number;
  /** When the first rank started (ISO), once one has. */
  firstStartedAt?: string;
}

/** How far the gang's N ranks got: each rank counts once, whichever of its pods got there. */
export function gangProgress(pods: V1Pod[], nodes: number, isScheduled: (pod: V1Pod) => boolean): GangProgress {
  const scheduled = new Set<number>();
  const started = new Set<number>();
  let first: number | undefined;
  for (const pod of pods) {
    const rank = rankOf(pod);
    if (rank === undefined || rank >= nodes) continue;
    if (isScheduled(pod)) scheduled.add(rank);
    if (podStarted(pod)) {
      started.add(rank);
      const at = pod.status?.startTime ? new Date(pod.status.startTime).getTime() : undefined;
      if (at !== undefined && (first === undefined || at < first)) first = at;
    }
  }
  return { scheduled: scheduled.size, started: started.size, ...(first !== undefined ? { firstStartedAt: new Date(first).toISOString() } : {}) };
}
