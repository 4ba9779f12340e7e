/**
 * GKE: training attempts as Kubernetes Jobs on spot (or on-demand) GPU node pools,
 * through the real `@kubernetes/client-node`.
 *
 *   new GkeProvider({ kubeConfig, namespace, prices, ...options })
 *     kubeConfig  a loaded @kubernetes/client-node KubeConfig (the worker's kubeconfig)
 *     namespace   where the Jobs go
 *     prices      the PriceBook (bundled catalog) used when findCapacity is given none
 *
 * Offers come from the cluster's nodes (zone x accelerator x spot label, allocatable
 * `nvidia.com/gpu`), priced from the same price book as GCE's. An attempt is one Job whose
 * single pod runs the Sterna agent; the agent reads its inputs from the environment
 * and reports progress into its own pod's annotations (`sterna/phase`, `sterna/step`,
 * `sterna/checkpoint`, `sterna/exit`), which this provider follows with the Watch API.
 * On real GKE the Job's service account needs `patch` on pods in the namespace (see the
 * Role in the README).
 *
 * Why annotations: on real GKE nothing relays a file out of a container (the kubelet
 * does not), while every pod can reach the API server with its projected service-account
 * token; so the agent (`STERNA_PUBLISH_MODE=k8s`) patches `metadata.annotations` of its
 * own pod with curl. The test bed's stand-in kubelet (kube/node-agent.ts) gives the pod
 * the same API server and a token file, so the same path runs in the tests.
 *
 * Failure translation:
 *   pod unschedulable past pendingTimeout                 -> Stockout for that zone
 *   pod rejected by the node (OutOf<resource>, admission) -> Stockout for that zone
 *   pod scheduled but not started past startupTimeout     -> Stockout (the node never came up)
 *   image that cannot be pulled or container config error -> InvalidSpec
 *   pod condition DisruptionTarget, or its node gone      -> Preempted
 * The Job's `podFailurePolicy` ignores DisruptionTarget failures, so a disrupted pod does
 * not fail the Job; the workflow, which owns retries and zone failover, releases the Job
 * and places the next attempt itself.
 *
 * Flex-start (queued provisioning, Dynamic Workload Scheduler): an attempt is three
 * objects of one name: the Job (created suspended), a PodTemplate with the Job's pod
 * spec, and a ProvisioningRequest (autoscaling.x-k8s.io/v1, class
 * `queued-provisioning.gke.io`, `maxRunDurationSeconds`) for one such pod. The Job is
 * admitted (unsuspended) once the request is Provisioned; its pod consumes the request
 * (annotations), selects the flex-start pool and tolerates its `gke-queued` taint.
 *   request Failed, BookingExpired, or not Provisioned within the wait -> FlexStartWaitExpired
 * Release deletes all three. A flex-start node is never preempted: its pod losing its
 * node is the run duration's end, not a preemption.
 *
 * GPU slices (workflows/gpu-slices.ts): a MIG partition or a time-shared GPU is offered
 * from the node pools whose nodes carry GKE's partition / sharing labels; the pod selects
 * them by those labels and asks for one `nvidia.com/gpu` (each partition or share is one
 * device under GKE's default strategy), and pays its share of the node's GPU price
 * (workflows/pricing-slices.ts). Whole-GPU pods keep off sliced nodes.
 *
 * Gangs (offer.nodes = N > 1; gke-gang.ts): one Indexed Job of N pods and a headless
 * Service for their names, admitted all or nothing; a partial gang is released as a
 * stockout. Offers are priced for all N pods.
 */
import {
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  Watch,
  type V1EnvVar,
  type V1Job,
  type V1NodeSelectorRequirement,
  type V1Pod,
  type V1PodTemplateSpec,
} from '@kubernetes/client-node';
import { FLEX_START_EXPECTED_WAIT_SECONDS } from '../../config/catalog';
import type { PriceBook } from '../../config/price-book';
import type { GkeConfig } from '../../config/worker-config';
import { failure, FailureType } from '../../workflows/failures';
import type { AgentValues } from '../../workflows/fleet/contract';
import { fnv1a, isOwnedBy } from '../../workflows/naming';
import { parseSecretRef, SecretScheme } from '../../workflows/secrets';
import type { AgentSnapshot, Offer, ResourceRef } from '../../workflows/types';
import { regionOf } from '../../workflows/region';
import { agentAttributes, agentScript, parseAgentValues } from '../agent/script';
import { devicesPerGpu, sameSlice, SharingStrategy, sliceKey, SliceLabel, type GpuSlice } from '../../workflows/gpu-slices';
import { gpuEquivalent, nodeShare } from '../../workflows/pricing-slices';
import { gangEnv, gangProgress, gangService, leadPod, podStarted, rankOf } from './gke-gang';
import {
  ownerFromLabels,
  ReleaseOutcome,
  type CapacityFound,
  type CapacityRequest,
  type ComputeProvider,
  type FleetResource,
  type ProvisionRequest,
  type ProvisionResult,
  type ReleaseRequest,
  type ReleaseResult,
  type UnpricedZone,
} from './provider';

export interface GkeProviderOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  prices: PriceBook;
  /** Image for the training container; it must have bash, curl and the trainer's runtime. */
  defaultImage?: string;
  /** A pod that stays unschedulable this long means the zone has no capacity (default 300 s). */
  pendingTimeoutSeconds?: number;
  /** A scheduled pod has this long to start (image pull of a large image; default 900 s). */
  startupTimeoutSeconds?: number;
  /** The pods' service account (bound to the agent Role in the README); default: the namespace's `default`. */
  serviceAccountName?: string;
  /**
   * A spot node gets 30 s of notice, of which GKE's graceful node shutdown gives
   * non-system pods the first 15 s (the rest is for critical system pods); the kubelet
   * cuts a longer grace period short. Default 15: the agent forwards SIGTERM to the
   * trainer, which must write and the agent upload its final checkpoint within it.
   */
  terminationGracePeriodSeconds?: number;
  /**
   * GPU node pools that can scale from zero (the cluster autoscaler adds a node when a
   * pod asks): a pool with no node right now is invisible in the Kubernetes API, so it
   * is declared here (from `gcloud container node-pools list`) to be offered anyway.
   */
  nodePools?: { name: string; zones: string[]; accelerator: string; gpusPerNode: number; spot: boolean; machineType?: string; flexStart?: boolean; partition?: string; maxSharedClients?: number }[];
  pollIntervalMs?: number;
  storageUriForVm?: (uri: string) => string;
}

/** A finished Job (and its pod) is deleted this long after it ended, if no release came. */
const FINISHED_JOB_TTL_SECONDS = 3600;
/** No releaseBy: the same longest bound as GCE's (120 days). */
const MAX_ACTIVE_DEADLINE_SECONDS = 120 * 24 * 3600;

/** `activeDeadlineSeconds` for a Job created now (counted from its start): until `releaseBy`, at least 30 s. */
export function activeDeadlineSeconds(releaseBy: string | undefined, nowMs: number): number {
  const wanted = releaseBy === undefined ? Number.NaN : Date.parse(releaseBy);
  if (!Number.isFinite(wanted)) return MAX_ACTIVE_DEADLINE_SECONDS;
  return Math.min(MAX_ACTIVE_DEADLINE_SECONDS, Math.max(30, Math.ceil((wanted - nowMs) / 1000)));
}

/** A watch that connected this long ago has replayed the existing pods (they come first, at once). */
const WATCH_SETTLE_MS = 2000;
/** The environment variable carrying the run's workflow id (agentAttributes' `sterna-run-id`). */
const RUN_ID_ENV = 'STERNA_ATTR_sterna_run_id';
const DISRUPTION_REASONS = new Set(['TerminationByKubelet', 'PreemptionByScheduler', 'DeletionByTaintManager', 'EvictionByEvictionAPI']);
const ZONE_LABEL = 'topology.kubernetes.io/zone';
const ACCELERATOR_LABEL = 'cloud.google.com/gke-accelerator';
const SPOT_LABEL = 'cloud.google.com/gke-spot';
const INSTANCE_TYPE_LABEL = 'node.kubernetes.io/instance-type';
/** GKE's flex-start node label and queued-provisioning taint, and the ProvisioningRequest API. */
const FLEX_START_LABEL = 'cloud.google.com/gke-flex-start';
const QUEUED_TAINT = 'cloud.google.com/gke-queued';
const QUEUED_CLASS = 'queued-provisioning.gke.io';
const CONSUME_ANNOTATION = 'autoscaling.x-k8s.io/consume-provisioning-request';
const CLASS_ANNOTATION = 'autoscaling.x-k8s.io/provisioning-class-name';
/** On the Job: the attempt's ProvisioningRequest and PodTemplate, which release deletes with it. */
const REQUEST_ANNOTATION = 'sterna/provisioning-request';
const PROVISIONING_REQUESTS = { group: 'autoscaling.x-k8s.io', version: 'v1', plural: 'provisioningrequests' } as const;
/** Expected flex-start wait for a GPU type the catalog has no figure for (an assumption). */
const FLEX_START_DEFAULT_WAIT_SECONDS = 1800;

interface ProvisioningRequestObject {
  metadata?: { uid?: string; labels?: Record<string, string> };
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

/** What one node (or one zone of a declared node pool) can hold. */
interface PoolShape extends GpuSlice {
  zone: string;
  accelerator: string;
  /** Physical GPUs (a sliced node advertises `devicesPerGpu` devices for each). */
  gpus: number;
  spot: boolean;
  machineType?: string;
  flexStart?: boolean;
}

/** The slicing a node's labels declare (GKE's MIG and time-sharing node labels). */
function sliceOfNode(labels: Record<string, string>): GpuSlice {
  const partition = labels[SliceLabel.Partition];
  const clients = Number(labels[SliceLabel.MaxSharedClients]);
  const shared = labels[SliceLabel.SharingStrategy] === SharingStrategy.TimeSharing && Number.isInteger(clients) && clients > 1;
  return { ...(partition ? { partition } : {}), ...(shared ? { maxSharedClients: clients } : {}) };
}

/** The slicing of `pool` that `want` accepts, or undefined: whole GPUs only on whole-GPU pools, a slice only on its own. */
function sliceFor(want: CapacityRequest['accelerators'][number], pool: GpuSlice): GpuSlice | undefined {
  const wanted: GpuSlice = {
    ...(want.partition ? { partition: want.partition } : {}),
    ...(want.sharing ? { maxSharedClients: want.maxSharedClients ?? pool.maxSharedClients ?? 0 } : {}),
  };
  return sameSlice(wanted, { partition: pool.partition, maxSharedClients: pool.maxSharedClients }) ? wanted : undefined;
}

function round6(usd: number): number {
  return Math.round(usd * 1e6) / 1e6;
}

function isStatus(err: unknown, code: number): boolean {
  return (err as { code?: number })?.code === code;
}

export function podDisrupted(pod: V1Pod): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'DisruptionTarget' && c.status === 'True' && DISRUPTION_REASONS.has(c.reason ?? ''));
}

/** A flex-start pod (it consumes a ProvisioningRequest): its node is never preempted, only cut at the request's run duration. */
function isFlexPod(pod: V1Pod): boolean {
  return Boolean(pod.metadata?.annotations?.[CONSUME_ANNOTATION]);
}

/**
 * A flex-start pod whose node GKE stopped at the request's maxRunDurationSeconds (the VM
 * under it shuts down; the kubelet's graceful node shutdown disrupts its pods), or whose
 * node is gone; a pod that had succeeded first completed instead.
 */
function flexCut(pod: V1Pod, nodeGone = false): boolean {
  return isFlexPod(pod) && pod.status?.phase !== 'Succeeded' && (podDisrupted(pod) || nodeGone);
}

/** Waiting reasons that no amount of waiting fixes: the spec's image or container is wrong. */
const BAD_CONTAINER_REASONS = new Set(['InvalidImageName', 'ErrImageNeverPull', 'CreateContainerConfigError', 'CreateContainerError']);
/** A pod the node's kubelet refused to admit (GPU device plugin out of devices, affinity race). */
const ADMISSION_FAILURE = /^(OutOf|UnexpectedAdmissionError$|NodeAffinity$|NodeLost$)/;

function epochMs(value: Date | string | undefined): number {
  return value ? new Date(value).getTime() : 0;
}

function scheduled(pod: V1Pod): boolean {
  return Boolean(pod.spec?.nodeName) || (pod.status?.conditions ?? []).some((c) => c.type === 'PodScheduled' && c.status === 'True');
}

function waitingReason(pod: V1Pod): string | undefined {
  return pod.status?.containerStatuses?.[0]?.state?.waiting?.reason;
}

/**
 * Each k8s:// secret as STERNA_SECRET_<NAME> from a secretKeyRef: the agent takes it out
 * of its own environment at start and gives it to the trainer alone, under NAME.
 */
export function secretEnv(secrets: Record<string, string> | undefined): V1EnvVar[] {
  return Object.entries(secrets ?? {}).flatMap(([name, ref]) => {
    const parsed = parseSecretRef(ref);
    return parsed?.scheme === SecretScheme.Kubernetes ? [{ name: `STERNA_SECRET_${name}`, valueFrom: { secretKeyRef: { name: parsed.name, key: parsed.key } } }] : [];
  });
}

export class GkeProvider implements ComputeProvider {
  readonly backend = 'gke' as const;
  private readonly core: CoreV1Api;
  private readonly batch: BatchV1Api;
  private readonly custom: CustomObjectsApi;
  /** The newest state of every Sterna pod, fed by one watch. */
  private readonly pods = new Map<string, V1Pod>();
  private watching?: Promise<unknown>;
  private watchRequest?: { abort(): void };
  /** When the current watch connected; its first events replay every existing pod. */
  private watchConnectedAtMs?: number;
  private closed = false;
  private readonly pollMs: number;

  constructor(private readonly options: GkeProviderOptions) {
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.batch = options.kubeConfig.makeApiClient(BatchV1Api);
    this.custom = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.pollMs = options.pollIntervalMs ?? 1000;
  }

  private get namespace(): string {
    return this.options.namespace;
  }

  /**
   * Starts (once) the watch on Sterna's pods; when the server ends it, the next look
   * starts a new one. A new watch begins with ADDED events for every current pod, so the
   * cache is emptied when a watch ends (a pod deleted in the gap must not linger) and
   * looks fall back to a list until the new watch has caught up.
   */
  private ensureWatch(): void {
    if (this.watching || this.closed) return;
    const watch = new Watch(this.options.kubeConfig);
    const ended = () => {
      this.watching = undefined;
      this.watchRequest = undefined;
      this.watchConnectedAtMs = undefined;
      this.pods.clear();
    };
    this.watching = watch
      .watch(
        `/api/v1/namespaces/${this.namespace}/pods`,
        { labelSelector: 'sterna-run' },
        (type: string, pod: V1Pod) => {
          if (type === 'ERROR' || type === 'BOOKMARK') return;
          const job = pod.metadata?.labels?.['job-name'];
          if (!job) return;
          if (type === 'DELETED') this.pods.delete(pod.metadata!.uid!);
          else this.pods.set(pod.metadata!.uid!, pod);
        },
        ended,
      )
      .then((request) => {
        if (this.closed) request.abort();
        else {
          this.watchRequest = request;
          this.watchConnectedAtMs = Date.now();
        }
      })
      .catch(ended);
  }

  /** Stops the pod watch (the worker calls this on shutdown, so no request outlives it). */
  close(): void {
    this.closed = true;
    this.watchRequest?.abort();
    this.watchRequest = undefined;
    this.pods.clear();
  }

  /** The pods of a Job, oldest first, from the watch (or one list while it starts). */
  private async podsOf(job: string): Promise<V1Pod[]> {
    this.ensureWatch();
    let pods = [...this.pods.values()].filter((p) => p.metadata?.labels?.['job-name'] === job);
    if (pods.length === 0) {
      pods = (await this.core.listNamespacedPod({ namespace: this.namespace, labelSelector: `job-name=${job}` })).items;
    }
    // Watch events are plain JSON (timestamps are strings); listed pods carry Dates.
    return pods.sort((a, b) => epochMs(a.metadata?.creationTimestamp) - epochMs(b.metadata?.creationTimestamp));
  }

  /**
   * One offer per zone x accelerator x GPU count x pricing model that a node (or a
   * declared node pool) can hold. A pod pays for its share of the node: the node's
   * machine type (`node.kubernetes.io/instance-type`) priced from the price book, times
   * the GPUs it asks for over the node's GPUs; the catalog's shape when unlabelled.
   */
  async findOffers(request: CapacityRequest): Promise<Offer[]> {
    return (await this.findCapacity(request)).offers;
  }

  /** As findOffers, priced from `prices` (the worker's price book: the same as GCE's). */
  async findCapacity(request: CapacityRequest, prices: PriceBook = this.options.prices): Promise<CapacityFound> {
    const { items } = await this.core.listNode({});
    const pools: PoolShape[] = [];
    for (const node of items) {
      const labels = node.metadata?.labels ?? {};
      const zone = labels[ZONE_LABEL];
      const accelerator = labels[ACCELERATOR_LABEL];
      // A flex-start node belongs to the request that brought it: it is not capacity to offer.
      if (!zone || !accelerator || node.spec?.unschedulable || labels[FLEX_START_LABEL] === 'true') continue;
      // A sliced node advertises each partition (or each share) as one nvidia.com/gpu.
      const slice = sliceOfNode(labels);
      const gpus = Number(node.status?.allocatable?.['nvidia.com/gpu'] ?? 0) / devicesPerGpu(accelerator, slice);
      pools.push({ zone, accelerator, gpus, spot: labels[SPOT_LABEL] === 'true', machineType: labels[INSTANCE_TYPE_LABEL], ...slice });
    }
    for (const pool of this.options.nodePools ?? []) {
      const slice = { ...(pool.partition ? { partition: pool.partition } : {}), ...(pool.maxSharedClients ? { maxSharedClients: pool.maxSharedClients } : {}) };
      for (const zone of pool.zones) pools.push({ zone, accelerator: pool.accelerator, gpus: pool.gpusPerNode, spot: pool.spot, machineType: pool.machineType, flexStart: pool.flexStart, ...slice });
    }
    const nodes = request.nodes ?? 1;
    const best = new Map<string, Offer>();
    const unpriced = new Map<string, UnpricedZone>();
    const stamp = { pricesAsOf: prices.stamp.asOf, priceSource: prices.stamp.source };
    for (const pool of pools) {
      const { zone, accelerator, spot } = pool;
      const model = pool.flexStart ? 'FLEX_START' : spot ? 'SPOT' : 'STANDARD';
      const region = regionOf(zone);
      if (!request.provisioningModels.includes(model)) continue;
      if (request.zones?.deny?.includes(zone) || (request.zones?.allow && !request.zones.allow.includes(zone))) continue;
      if (request.regions?.deny?.includes(region) || (request.regions?.allow && !request.regions.allow.includes(region))) continue;
      for (const want of request.accelerators) {
        const slice = sliceFor(want, pool);
        if (want.type !== accelerator || !slice || pool.gpus * devicesPerGpu(accelerator, slice) < want.count) continue;
        if (request.machineType && pool.machineType && request.machineType !== pool.machineType) continue;
        const priced = this.priceShare(prices, request.machineType, pool, region, want.count, slice, nodes);
        const key = `${zone}/${accelerator}/${want.count}/${model}${sliceKey(slice)}`;
        if (!priced) {
          const machineType = pool.machineType ?? request.machineType ?? prices.machineTypeFor(accelerator, want.count);
          if (machineType) unpriced.set(key, { zone, accelerator, machineType });
          continue;
        }
        const known = best.get(key);
        if (known && known.pricePerHour <= priced.pricePerHour) continue;
        const wait = pool.flexStart ? { expectedWaitSeconds: FLEX_START_EXPECTED_WAIT_SECONDS[accelerator] ?? FLEX_START_DEFAULT_WAIT_SECONDS } : {};
        const shape = { ...slice, ...(nodes > 1 ? { nodes } : {}) };
        best.set(key, { backend: 'gke', zone, region, accelerator, acceleratorCount: want.count, provisioningModel: model, quotaAvailable: true, ...priced, ...stamp, ...wait, ...shape });
      }
    }
    for (const key of best.keys()) unpriced.delete(key);
    return { offers: [...best.values()], unpriced: [...unpriced.values()], prices: prices.stamp };
  }

  /**
   * What `nodes` pods of `count` devices (of this slicing) pay: each its share of its
   * node (workflows/pricing-slices.ts), times the gang's nodes.
   */
  private priceShare(
    prices: PriceBook,
    wanted: string | undefined,
    pool: PoolShape,
    region: string,
    count: number,
    slice: GpuSlice,
    nodes: number,
  ): Pick<Offer, 'machineType' | 'pricePerHour' | 'onDemandPricePerHour'> | undefined {
    const { accelerator, spot } = pool;
    const flexStart = pool.flexStart ? { flexStart: true } : {};
    if (pool.machineType && (!wanted || wanted === pool.machineType)) {
      const query = { region, machineType: pool.machineType, accelerator, count: pool.gpus };
      const price = prices.pricePerHour({ ...query, spot, ...flexStart });
      const onDemand = prices.pricePerHour({ ...query, spot: false });
      if (price !== undefined && onDemand !== undefined) {
        const share = nodeShare(count, slice, pool.gpus) * nodes;
        return { machineType: pool.machineType, pricePerHour: round6(price * share), onDemandPricePerHour: round6(onDemand * share) };
      }
    }
    if (wanted && pool.machineType && wanted !== pool.machineType) return undefined;
    const machineType = wanted ?? prices.machineTypeFor(accelerator, count);
    if (!machineType) return undefined;
    const price = prices.pricePerHour({ region, machineType, accelerator, count, spot, ...flexStart });
    const onDemand = prices.pricePerHour({ region, machineType, accelerator, count, spot: false });
    if (price === undefined || onDemand === undefined) return undefined;
    // The catalog's shape holds `count` whole GPUs; a slice pays its share of them.
    const share = (gpuEquivalent(count, slice) / count) * nodes;
    return share === 1 ? { machineType, pricePerHour: price, onDemandPricePerHour: onDemand } : { machineType, pricePerHour: round6(price * share), onDemandPricePerHour: round6(onDemand * share) };
  }

  /** The Job for one attempt; exported through `jobManifest` so tests can validate it. */
  jobManifest(request: ProvisionRequest): V1Job {
    const { offer } = request;
    const mapUri = this.options.storageUriForVm ?? ((uri: string) => uri);
    const attributes = agentAttributes({
      ...request.agent,
      datasets: request.agent.datasets.map((d) => ({ ...d, uri: mapUri(d.uri) })),
      checkpointUri: mapUri(request.agent.checkpointUri),
      resumeFrom: request.agent.resumeFrom && { ...request.agent.resumeFrom, uri: mapUri(request.agent.resumeFrom.uri) },
      workdir: request.agent.workdir && { ...request.agent.workdir, uri: mapUri(request.agent.workdir.uri) },
      dataCacheUri: request.agent.dataCacheUri && mapUri(request.agent.dataCacheUri),
    });
    const spot = offer.provisioningModel === 'SPOT';
    const flex = offer.provisioningModel === 'FLEX_START';
    const gpus = String(offer.acceleratorCount);
    const nodeSelector: Record<string, string> = { [ACCELERATOR_LABEL]: offer.accelerator, [ZONE_LABEL]: offer.zone };
    if (spot) nodeSelector[SPOT_LABEL] = 'true';
    if (flex) nodeSelector[FLEX_START_LABEL] = 'true';
    if (offer.partition) nodeSelector[SliceLabel.Partition] = offer.partition;
    if (offer.maxSharedClients !== undefined) {
      nodeSelector[SliceLabel.SharingStrategy] = SharingStrategy.TimeSharing;
      nodeSelector[SliceLabel.MaxSharedClients] = String(offer.maxSharedClients);
    }
    // Anything but the other model's nodes (spot pods must not land on standard nodes), and
    // a whole GPU never on a sliced node (its nvidia.com/gpu is a partition or a share).
    const unlike: V1NodeSelectorRequirement[] = [SPOT_LABEL, SliceLabel.Partition, SliceLabel.SharingStrategy]
      .filter((key) => !(key in nodeSelector))
      .map((key) => ({ key, operator: 'DoesNotExist' }));
    const nodes = offer.nodes ?? 1;
    const gang = nodes > 1;
    const labels = { ...request.labels, 'sterna-managed': 'true' };
    return {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: request.name, namespace: this.namespace, labels, ...(flex ? { annotations: { [REQUEST_ANNOTATION]: request.name } } : {}) },
      spec: {
        // A flex-start Job waits, suspended, until its ProvisioningRequest is Provisioned.
        ...(flex ? { suspend: true } : {}),
        // The workflow owns retries and zone failover; the Job runs its pod once.
        backoffLimit: 0,
        // A gang: one pod per rank, all at once, each named `<job>-<rank>` (gke-gang.ts).
        ...(gang ? { completionMode: 'Indexed', completions: nodes, parallelism: nodes } : {}),
        // Bounded even if nothing releases it: the Job controller stops its pod at the
        // run's limit, and a finished Job goes (long after the run has read how it ended).
        activeDeadlineSeconds: activeDeadlineSeconds(request.releaseBy, Date.now()),
        ttlSecondsAfterFinished: FINISHED_JOB_TTL_SECONDS,
        podFailurePolicy: { rules: [{ action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] }] },
        template: {
          metadata: { labels, ...(flex ? { annotations: { [CONSUME_ANNOTATION]: request.name, [CLASS_ANNOTATION]: QUEUED_CLASS } } : {}) },
          spec: {
            restartPolicy: 'Never',
            ...(this.options.serviceAccountName ? { serviceAccountName: this.options.serviceAccountName } : {}),
            terminationGracePeriodSeconds: this.options.terminationGracePeriodSeconds ?? 15,
            nodeSelector,
            ...(gang ? { subdomain: request.name } : {}),
            affinity: unlike.length === 0 ? undefined : { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: unlike }] } } },
            tolerations: [
              { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' },
              ...(spot ? [{ key: SPOT_LABEL, operator: 'Equal', value: 'true', effect: 'NoSchedule' }] : []),
              ...(flex ? [{ key: QUEUED_TAINT, operator: 'Exists', effect: 'NoSchedule' }] : []),
            ],
            containers: [
              {
                name: 'trainer',
                image: request.image ?? this.options.defaultImage ?? 'us-docker.pkg.dev/deeplearning-platform-release/gcr.io/base-cu124.py310',
                command: ['/bin/bash', '-c', agentScript(), 'sterna-agent'],
                env: [
                  { name: 'STERNA_PUBLISH_MODE', value: 'k8s' },
                  { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                  { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                  ...Object.entries(attributes).map(([key, value]) => ({ name: `STERNA_ATTR_${key.replace(/-/g, '_')}`, value })),
                  // By reference only: the kubelet reads the Secret; the Job holds its name and key.
                  ...secretEnv(request.agent.secrets),
                  ...(gang ? gangEnv(request.name, this.namespace, nodes) : []),
                ],
                resources: { limits: { 'nvidia.com/gpu': gpus }, requests: { 'nvidia.com/gpu': gpus } },
              },
            ],
          },
        },
      },
    };
  }

  async provision(request: ProvisionRequest, onProgress: (status: string) => void): Promise<ProvisionResult> {
    const nodes = request.offer.nodes ?? 1;
    // A gang's ref says so (the run checks it against its offer); one pod's is as it was.
    const ref: ResourceRef = { backend: 'gke', name: request.name, zone: request.offer.zone, namespace: this.namespace, ...(nodes > 1 ? { nodes } : {}) };
    let adopted = false;
    let job: V1Job;
    try {
      job = await this.batch.createNamespacedJob({ namespace: this.namespace, body: this.jobManifest(request) });
    } catch (err) {
      if (!isStatus(err, 409)) throw err;
      const existing = await this.batch.readNamespacedJob({ name: request.name, namespace: this.namespace });
      if (!isOwnedBy(existing.metadata?.labels, request.owner)) {
        throw failure(FailureType.ResourceConflict, `Job ${request.name} exists but is not this run's attempt ${request.owner.attempt}; it is left alone`);
      }
      job = existing;
      adopted = true;
    }
    const pendingSeconds = this.options.pendingTimeoutSeconds ?? 300;
    const startupSeconds = this.options.startupTimeoutSeconds ?? 900;
    const giveUp = async (type: FailureType, message: string): Promise<never> => {
      // Clean up now: the workflow moves on to the next offer (or fails the run).
      await this.release({ ref, owner: request.owner, createMayBeInFlight: false });
      throw failure(type, message);
    };
    if (nodes > 1) await this.ensureGangService(request, job, giveUp);
    const flex = request.offer.provisioningModel === 'FLEX_START';
    if (flex) await this.awaitProvisioned(request, onProgress, giveUp);
    if (nodes > 1) return this.awaitGang(request, ref, adopted, nodes, onProgress, giveUp);
    const started = Date.now();
    let scheduledAt: number | undefined;
    for (;;) {
      if (flex) await this.checkBooking(request, giveUp);
      const [pod] = await this.podsOf(request.name);
      const phase = pod?.status?.phase;
      const waiting = pod && waitingReason(pod);
      onProgress(waiting ?? phase ?? 'no pod yet');
      if (pod && podDisrupted(pod)) throw failure(FailureType.Preempted, `pod of ${request.name} was disrupted before it ran`);
      if (phase === 'Running' || phase === 'Succeeded') {
        return { ref, adopted, window: { startedAt: toIso(pod!.status!.startTime) } };
      }
      if (phase === 'Failed') {
        const reason = pod!.status?.reason ?? '';
        if (ADMISSION_FAILURE.test(reason)) await giveUp(FailureType.Stockout, `the node in ${request.offer.zone} refused the pod of ${request.name}: ${reason} ${pod!.status?.message ?? ''}`.trim());
        // It ran and ended before we saw it running: monitoring reads how it ended.
        return { ref, adopted, window: { startedAt: toIso(pod!.status?.startTime) } };
      }
      if (waiting && BAD_CONTAINER_REASONS.has(waiting)) {
        await giveUp(FailureType.InvalidSpec, `the container of ${request.name} cannot start: ${waiting}`);
      }
      if (pod && scheduled(pod)) {
        scheduledAt ??= Date.now();
        if (pod.spec?.nodeName && !(await this.nodeExists(pod.spec.nodeName))) {
          await giveUp(FailureType.Preempted, `the node of ${request.name} went away before the pod started`);
        }
        if (Date.now() - scheduledAt > startupSeconds * 1000) {
          await giveUp(
            waiting === 'ImagePullBackOff' || waiting === 'ErrImagePull' ? FailureType.InvalidSpec : FailureType.Stockout,
            `pod of ${request.name} was scheduled in ${request.offer.zone} but did not start within ${startupSeconds} s${waiting ? ` (${waiting})` : ''}`,
          );
        }
      } else if (Date.now() - started > pendingSeconds * 1000) {
        // Unschedulable for too long (on GKE: the autoscaler found no node either).
        await giveUp(FailureType.Stockout, `pod of ${request.name} stayed unschedulable in ${request.offer.zone} for ${pendingSeconds} s`);
      }
      await new Promise((r) => setTimeout(r, this.pollMs));
    }
  }

  /** The gang's headless Service (idempotent), owned by its Job; one of another owner is a conflict, left alone. */
  private async ensureGangService(request: ProvisionRequest, job: V1Job, giveUp: (type: FailureType, message: string) => Promise<never>): Promise<void> {
    const body = gangService(request.name, this.namespace, job.metadata!.labels!, { uid: job.metadata!.uid! });
    try {
      await this.core.createNamespacedService({ namespace: this.namespace, body });
    } catch (err) {
      if (!isStatus(err, 409)) throw err;
      const existing = await this.core.readNamespacedService({ name: request.name, namespace: this.namespace });
      if (!isOwnedBy(existing.metadata?.labels, request.owner)) {
        await giveUp(FailureType.ResourceConflict, `Service ${request.name} exists but is not this run's attempt ${request.owner.attempt}; it is left alone`);
      }
    }
  }

  /**
   * All or nothing: returns once every rank's pod has started. Ranks still unscheduled
   * past the pending timeout make a partial gang, released whole as a stockout of the
   * zone; any rank disrupted, refused by its node or losing its node ends the attempt
   * as a single pod's would.
   */
  private async awaitGang(
    request: ProvisionRequest,
    ref: ResourceRef,
    adopted: boolean,
    nodes: number,
    onProgress: (status: string) => void,
    giveUp: (type: FailureType, message: string) => Promise<never>,
  ): Promise<ProvisionResult> {
    const pendingSeconds = this.options.pendingTimeoutSeconds ?? 300;
    const startupSeconds = this.options.startupTimeoutSeconds ?? 900;
    const flex = request.offer.provisioningModel === 'FLEX_START';
    const { zone } = request.offer;
    const started = Date.now();
    let allScheduledAt: number | undefined;
    for (;;) {
      if (flex) await this.checkBooking(request, giveUp);
      const pods = await this.podsOf(request.name);
      const progress = gangProgress(pods, nodes, scheduled);
      onProgress(`gang of ${nodes}: ${progress.scheduled} scheduled, ${progress.started} started`);
      if (pods.some(podDisrupted)) throw failure(FailureType.Preempted, `a pod of the gang ${request.name} was disrupted before the gang ran`);
      const refused = pods.find((p) => p.status?.phase === 'Failed' && ADMISSION_FAILURE.test(p.status?.reason ?? ''));
      if (refused) await giveUp(FailureType.Stockout, `the node in ${zone} refused rank ${rankOf(refused)} of ${request.name}: ${refused.status?.reason ?? ''}; the gang is released`);
      const bad = pods.map(waitingReason).find((reason) => reason !== undefined && BAD_CONTAINER_REASONS.has(reason));
      if (bad) await giveUp(FailureType.InvalidSpec, `the container of ${request.name} cannot start: ${bad}`);
      if (progress.started === nodes) return { ref, adopted, window: { startedAt: progress.firstStartedAt } };
      for (const pod of pods) {
        if (pod.spec?.nodeName && !podStarted(pod) && !(await this.nodeExists(pod.spec.nodeName))) {
          await giveUp(FailureType.Preempted, `the node of rank ${rankOf(pod)} of ${request.name} went away before the gang started`);
        }
      }
      if (progress.scheduled === nodes) {
        allScheduledAt ??= Date.now();
        if (Date.now() - allScheduledAt > startupSeconds * 1000) {
          await giveUp(FailureType.Stockout, `the gang ${request.name} was scheduled in ${zone} but not all of its ${nodes} pods started within ${startupSeconds} s`);
        }
      } else if (Date.now() - started > pendingSeconds * 1000) {
        // A partial gang holds GPUs it cannot use: all of it goes, and the zone counts as stocked out.
        await giveUp(FailureType.Stockout, `only ${progress.scheduled} of the ${nodes} pods of the gang ${request.name} could be scheduled in ${zone} within ${pendingSeconds} s; the partial gang is released`);
      }
      await new Promise((r) => setTimeout(r, this.pollMs));
    }
  }

  /** The PodTemplate and ProvisioningRequest of a flex-start attempt (idempotent), then its Job admitted once Provisioned. */
  private async awaitProvisioned(request: ProvisionRequest, onProgress: (status: string) => void, giveUp: (type: FailureType, message: string) => Promise<never>): Promise<void> {
    const terms = request.flexStart;
    if (!terms) throw new Error(`flex-start offer for ${request.name} without flex-start terms`);
    const job = this.jobManifest(request);
    const labels = job.metadata!.labels!;
    const template: V1PodTemplateSpec = job.spec!.template;
    await this.core.createNamespacedPodTemplate({ namespace: this.namespace, body: { metadata: { name: request.name, labels }, template } }).catch(ignoreStatus(409));
    const body = {
      apiVersion: `${PROVISIONING_REQUESTS.group}/${PROVISIONING_REQUESTS.version}`,
      kind: 'ProvisioningRequest',
      metadata: { name: request.name, labels },
      spec: {
        provisioningClassName: QUEUED_CLASS,
        parameters: { maxRunDurationSeconds: String(terms.maxRunDurationSeconds) },
        // A gang's N pods are one request: provisioned together or not at all.
        podSets: [{ count: request.offer.nodes ?? 1, podTemplateRef: { name: request.name } }],
      },
    };
    await this.custom.createNamespacedCustomObject({ ...PROVISIONING_REQUESTS, namespace: this.namespace, body }).catch(ignoreStatus(409));
    const waitUntil = Date.now() + terms.maxWaitSeconds * 1000;
    for (;;) {
      const conditions = await this.checkBooking(request, giveUp);
      if (conditions.some((c) => c.type === 'Provisioned' && c.status === 'True')) break;
      onProgress(conditions.some((c) => c.type === 'Accepted' && c.status === 'True') ? 'waiting for DWS capacity (Accepted)' : 'waiting for DWS capacity');
      if (Date.now() > waitUntil) await giveUp(FailureType.FlexStartWaitExpired, `ProvisioningRequest ${request.name} was not Provisioned in ${request.offer.zone} within ${terms.maxWaitSeconds} s`);
      await new Promise((r) => setTimeout(r, this.pollMs));
    }
    const current = await this.batch.readNamespacedJob({ name: request.name, namespace: this.namespace });
    if (current.spec?.suspend) {
      current.spec.suspend = false;
      await this.batch.replaceNamespacedJob({ name: request.name, namespace: this.namespace, body: current });
    }
    onProgress('admitted: ProvisioningRequest Provisioned');
  }

  /** The request's conditions; a Failed request or an expired booking ends the attempt, named. */
  private async checkBooking(request: ProvisionRequest, giveUp: (type: FailureType, message: string) => Promise<never>): Promise<{ type: string; status: string; reason?: string; message?: string }[]> {
    const pr = (await this.custom.getNamespacedCustomObject({ ...PROVISIONING_REQUESTS, namespace: this.namespace, name: request.name })) as ProvisioningRequestObject;
    const conditions = pr.status?.conditions ?? [];
    const ended = conditions.find((c) => (c.type === 'Failed' || c.type === 'BookingExpired') && c.status === 'True');
    if (ended) await giveUp(FailureType.FlexStartWaitExpired, `ProvisioningRequest ${request.name} in ${request.offer.zone}: ${ended.type} (${ended.reason ?? ''}: ${ended.message ?? ''})`);
    return conditions;
  }

  async observe(ref: ResourceRef): Promise<AgentSnapshot> {
    const pods = await this.podsOf(ref.name);
    // A gang speaks through rank 0's agent; a single-pod Job through its first pod.
    const pod = leadPod(pods);
    if (!pod) {
      const job = await this.batch.readNamespacedJob({ name: ref.name, namespace: this.namespace }).catch((err: unknown) => (isStatus(err, 404) ? undefined : Promise.reject(err)));
      return { lifecycle: job ? 'pending' : 'gone', preempted: false };
    }
    const values: Record<string, string> = {};
    for (const [key, value] of Object.entries(pod.metadata?.annotations ?? {})) if (key.startsWith('sterna/')) values[key.slice('sterna/'.length)] = value;
    // A gang is only as alive as its weakest rank: any rank disrupted or off its node preempts it all.
    const members = rankOf(pod) === undefined ? [pod] : pods;
    // A flex-start node is never preempted: when it goes, its run duration is over.
    const nodeGone = pod.spec?.nodeName ? !(await this.nodeExists(pod.spec.nodeName)) : false;
    const flex = isFlexPod(pod);
    const preempted = !flex && (await this.anyLost(members));
    // A flex gang is cut when its lead's node is: every node of the request has the same run duration.
    const cut = flexCut(pod, nodeGone);
    const phase = pod.status?.phase;
    // A cut pod whose node is gone runs nowhere, whatever its last reported phase.
    const lifecycle =
      phase === 'Running' ? (cut && nodeGone ? 'terminated' : preempted || cut ? 'stopping' : 'running') : phase === 'Succeeded' || phase === 'Failed' ? 'terminated' : preempted ? 'terminated' : 'pending';
    const { noticed: _gceOnly, ...agent } = parseAgentValues(values);
    return { lifecycle, preempted, ...agent, ...(cut ? { cut } : {}) };
  }

  /** Whether any of these pods was disrupted, or lost its node before it succeeded (one node read per such pod). */
  private async anyLost(pods: V1Pod[]): Promise<boolean> {
    for (const pod of pods) {
      if (podDisrupted(pod)) return true;
      if (pod.spec?.nodeName && pod.status?.phase !== 'Succeeded' && !(await this.nodeExists(pod.spec.nodeName))) return true;
    }
    return false;
  }

  private async nodeExists(name: string): Promise<boolean> {
    try {
      await this.core.readNode({ name });
      return true;
    } catch (err) {
      if (isStatus(err, 404)) return false;
      throw err;
    }
  }

  async release({ ref, owner }: ReleaseRequest): Promise<ReleaseResult> {
    // A Job create is one synchronous API call: once it has returned or failed, nothing
    // of it can land later, so there is no in-flight window to wait out here.
    const job = await this.batch.readNamespacedJob({ name: ref.name, namespace: this.namespace }).catch((err: unknown) => (isStatus(err, 404) ? undefined : Promise.reject(err)));
    if (!job) {
      // The garbage collector removes a gang's Service once its Job is gone; it may not have yet.
      await this.releaseGangService(ref.name, owner);
      return { outcome: ReleaseOutcome.Absent };
    }
    if (!isOwnedBy(job.metadata?.labels, owner)) return { outcome: ReleaseOutcome.NotOurs };
    const pod = leadPod(await this.podsOf(ref.name).catch(() => [] as V1Pod[]));
    const terminated = pod?.status?.containerStatuses?.[0]?.state?.terminated;
    const result: ReleaseResult = { outcome: ReleaseOutcome.Deleted, startedAt: toIso(pod?.status?.startTime) };
    try {
      // The uid precondition deletes exactly the Job whose labels were checked.
      await this.batch.deleteNamespacedJob({ name: ref.name, namespace: this.namespace, propagationPolicy: 'Background', body: { propagationPolicy: 'Background', preconditions: { uid: job.metadata?.uid } } });
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
    if (result.startedAt) result.stoppedAt = toIso(terminated?.finishedAt) ?? new Date().toISOString();
    const flexRequest = job.metadata?.annotations?.[REQUEST_ANNOTATION];
    if (flexRequest) await this.releaseBooking(flexRequest, owner);
    if (job.spec?.completionMode === 'Indexed') await this.releaseGangService(ref.name, owner);
    return result;
  }

  /** Deletes a gang's headless Service, only if ours. */
  private async releaseGangService(name: string, owner: ReleaseRequest['owner']): Promise<void> {
    const service = await this.core.readNamespacedService({ name, namespace: this.namespace }).catch(ignoreStatus(404));
    if (service && isOwnedBy(service.metadata?.labels, owner)) await this.core.deleteNamespacedService({ name, namespace: this.namespace }).catch(ignoreStatus(404));
  }

  /** Deletes a flex-start attempt's ProvisioningRequest and PodTemplate, each only if ours. */
  private async releaseBooking(name: string, owner: ReleaseRequest['owner']): Promise<void> {
    const where = { ...PROVISIONING_REQUESTS, namespace: this.namespace, name };
    const pr = (await this.custom.getNamespacedCustomObject(where).catch(ignoreStatus(404))) as ProvisioningRequestObject | undefined;
    if (pr && isOwnedBy(pr.metadata?.labels, owner)) await this.custom.deleteNamespacedCustomObject(where).catch(ignoreStatus(404));
    const template = await this.core.readNamespacedPodTemplate({ name, namespace: this.namespace }).catch(ignoreStatus(404));
    if (template && isOwnedBy(template.metadata?.labels, owner)) await this.core.deleteNamespacedPodTemplate({ name, namespace: this.namespace }).catch(ignoreStatus(404));
  }

  async listRunResources(runId: string): Promise<ResourceRef[]> {
    const { items } = await this.batch.listNamespacedJob({ namespace: this.namespace, labelSelector: `sterna-run=${runId}` });
    return items.map((job) => ({ backend: 'gke' as const, name: job.metadata!.name!, zone: job.spec?.template.spec?.nodeSelector?.[ZONE_LABEL] ?? '', namespace: this.namespace }));
  }

  fleetScope(): string {
    const server = this.options.kubeConfig.getCurrentCluster()?.server ?? '';
    return `${this.namespace}-${fnv1a(server)}`;
  }

  /**
   * Every Sterna pod from the watch cache: no API request. While a (re)started watch may
   * still be replaying the existing pods, one list instead, so a look never misses a pod.
   */
  async listFleet(): Promise<FleetResource[]> {
    this.ensureWatch();
    const settled = this.watchConnectedAtMs !== undefined && Date.now() - this.watchConnectedAtMs >= WATCH_SETTLE_MS;
    const pods = settled ? [...this.pods.values()] : (await this.core.listNamespacedPod({ namespace: this.namespace, labelSelector: 'sterna-run' })).items;
    // A Job may have made a second pod after a disruption; the attempt is its first (a
    // gang's: rank 0's first), as in observe. A gang is disrupted when any rank is.
    const podsByJob = new Map<string, V1Pod[]>();
    for (const pod of pods) {
      const job = pod.metadata?.labels?.['job-name'];
      if (job) podsByJob.set(job, [...(podsByJob.get(job) ?? []), pod]);
    }
    const resources: FleetResource[] = [];
    for (const [job, all] of podsByJob) {
      const pod = leadPod(all.sort((a, b) => epochMs(a.metadata?.creationTimestamp) - epochMs(b.metadata?.creationTimestamp)))!;
      const owner = ownerFromLabels(pod.metadata?.labels);
      if (!owner) continue;
      const preempted = !isFlexPod(pod) && (rankOf(pod) === undefined ? [pod] : all).some(podDisrupted);
      resources.push({
        ref: { backend: 'gke', name: job, zone: pod.spec?.nodeSelector?.[ZONE_LABEL] ?? '', namespace: this.namespace },
        owner,
        workflowId: pod.spec?.containers?.[0]?.env?.find((e) => e.name === RUN_ID_ENV)?.value,
        lifecycle: podLifecycle(pod, preempted),
        preempted,
        agent: { ...parseAgentValues(agentAnnotations(pod)), ...(flexCut(pod) ? { cut: true } : {}) },
        lastStartAt: toIso(pod.status?.startTime),
        lastStopAt: toIso(pod.status?.containerStatuses?.[0]?.state?.terminated?.finishedAt),
        // The pod comes seconds after its Job; both are the attempt's.
        createdAt: toIso(pod.metadata?.creationTimestamp),
        accelerator: pod.spec?.nodeSelector?.[ACCELERATOR_LABEL],
        provisioningModel: pod.spec?.nodeSelector?.[SPOT_LABEL] === 'true' ? 'SPOT' : 'STANDARD',
      });
    }
    return resources;
  }

  async readAgent(ref: ResourceRef): Promise<AgentValues> {
    const pod = leadPod(await this.podsOf(ref.name));
    if (!pod) return {};
    return { ...parseAgentValues(agentAnnotations(pod)), ...(flexCut(pod) ? { cut: true } : {}) };
  }

  /** Disrupted pods, and pods whose node is gone (one node read per stopped pod, as observe does). */
  async preemptedAmong(refs: ResourceRef[]): Promise<ResourceRef[]> {
    const preempted: ResourceRef[] = [];
    for (const ref of refs) {
      const pods = await this.podsOf(ref.name);
      const lead = leadPod(pods);
      // A flex-start pod is never preempted: losing its node is its run duration's end.
      if (!lead || isFlexPod(lead)) continue;
      // A gang is preempted when any rank is; a single-pod Job by its first pod.
      if (await this.anyLost(rankOf(lead) === undefined ? [lead] : pods)) preempted.push(ref);
    }
    return preempted;
  }
}

/** The pod's lifecycle as observe reads it, without the node lookup (`preemptedAmong` does that). */
function podLifecycle(pod: V1Pod, preempted: boolean): FleetResource['lifecycle'] {
  const phase = pod.status?.phase;
  if (phase === 'Running') return preempted || pod.metadata?.deletionTimestamp ? 'stopping' : 'running';
  if (phase === 'Succeeded' || phase === 'Failed') return 'terminated';
  return preempted ? 'terminated' : 'pending';
}

/** The agent's `sterna/<key>` annotations, keyed without the prefix. */
function agentAnnotations(pod: V1Pod): Record<string, string> {
  const values: Record<string, string> = {};
  for (const [key, value] of Object.entries(pod.metadata?.annotations ?? {})) if (key.startsWith('sterna/')) values[key.slice('sterna/'.length)] = value;
  return values;
}

/** A catch handler that turns one HTTP status into `undefined` and rethrows anything else. */
function ignoreStatus(code: number): (err: unknown) => undefined {
  return (err) => {
    if (isStatus(err, code)) return undefined;
    throw err;
  };
}

function toIso(value: Date | string | undefined): string | undefined {
  if (!value) return undefined;
  return new Date(value).toISOString();
}

/** From the worker's configuration: a kubeconfig file (or the default loading rules). */
export async function createGkeProviderFromConfig(config: GkeConfig, prices: PriceBook): Promise<GkeProvider> {
  const kubeConfig = new KubeConfig();
  if (config.kubeconfig) kubeConfig.loadFromFile(config.kubeconfig);
  else kubeConfig.loadFromDefault();
  return new GkeProvider({ kubeConfig, prices, ...gkeProviderSettings(config) });
}

/** The provider's settings from the worker's configuration (config/worker-config.ts). */
export function gkeProviderSettings(config: GkeConfig): Omit<GkeProviderOptions, 'kubeConfig' | 'prices'> {
  return {
    namespace: config.namespace,
    nodePools: config.nodePools,
    serviceAccountName: config.serviceAccountName,
    defaultImage: config.image,
    pendingTimeoutSeconds: config.pendingTimeoutSeconds,
    startupTimeoutSeconds: config.startupTimeoutSeconds,
    terminationGracePeriodSeconds: config.terminationGracePeriodSeconds,
  };
}
