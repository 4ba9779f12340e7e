/**
 * GCE: training attempts as Compute Engine VMs, through the real
 * `@google-cloud/compute` client. The same code talks to real GCE and to the local
 * emulator; only the client options differ (see `gceClientOptions`).
 *
 * Errors are translated here, once, into Sterna's failure types:
 *   ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS] -> Stockout (FlexStartWaitExpired for a
 *     flex-start VM: its request waited its whole window for capacity, then GCE failed it)
 *   QUOTA_EXCEEDED                              -> QuotaExceeded
 *   TERMINATED before RUNNING                   -> Preempted
 *   409 on insert, labels not ours              -> ResourceConflict
 *
 * Ownership: a VM is adopted or deleted only when its labels name this run, execution
 * and attempt (workflows/naming.ts). A VM someone else put under our name is left alone.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { LRUCache } from 'lru-cache';
import type { protos } from '@google-cloud/compute';
// The v1 clients alone: the package's index also loads the v1small and v1beta clients and a
// 30 MB generated protos module, about 60 MB of worker heap that no call of ours uses.
import type { AcceleratorTypesClient, InstancesClient, RegionsClient, ZoneOperationsClient, ZonesClient } from '@google-cloud/compute/build/src/v1';
import { computeClients, READ_TIMEOUT_MS, WAIT_TIMEOUT_MS, type ComputeClientOptions } from './gce-clients';
import { FLEX_START_EXPECTED_WAIT_SECONDS } from '../../config/catalog';
import type { PriceBook } from '../../config/price-book';
import { type AgentSnapshot, type AgentValues, DEFAULT_MASTER_PORT, failure, FailureType, gangRelease, gangSize, gangSnapshot, gangStartedAt, isOwnedBy, KEEP_UNTIL_LABEL, namedFailureOf, nodeRefs, nodeRequest, type Offer, type Owner, regionOf, type ResourceRef, type SetAgentInputOutcome } from '../../workflows/api';
import { agentAttributes, agentScript, IMAGE_ATTRIBUTE, MOVE_ATTRIBUTE, parseAgentValues } from '../agent/script';
import { DEFAULT_VM_ACCESS, type VmAccess } from '../../config/vm-access';
import { vmAccessFields } from './gce-vm-access';
import { noteRateLimited, rateLimitedSince } from './rate-limits';
import { isRateLimited, retryTransient, withDeadline } from './transient';
import {
  keepUntilFromLabels,
  ownerFromLabels,
  ReleaseOutcome,
  type CapacityFound,
  type CapacityRequest,
  type ComputeProvider,
  type FleetResource,
  type KeepRequest,
  type KeepResult,
  type MoveAnswer,
  type ProvisionRequest,
  type ProvisionResult,
  type ReleaseRequest,
  type ReleaseResult,
  type UnpricedZone,
} from './provider';

type IInstance = protos.google.cloud.compute.v1.IInstance;
type IOperation = protos.google.cloud.compute.v1.IOperation;
type IQuota = protos.google.cloud.compute.v1.IQuota;

export interface GceProviderOptions {
  project: string;
  prices: PriceBook;
  /** Options for every Compute client: endpoint, auth, transport. */
  clientOptions: ComputeClientOptions;
  /** Boot image for VMs; on real GCE a Deep Learning VM image with CUDA drivers. */
  sourceImage?: string;
  /** Service account the VM uses to read datasets and write checkpoints (when `vmAccess` is not given). */
  serviceAccountEmail?: string;
  /** Service account, scopes, network, external IP, Shielded VM; least privilege by default. */
  vmAccess?: VmAccess;
  /** How often to look while waiting for an operation or a status; 1 s by default. */
  pollIntervalMs?: number;
  /**
   * Deadline of one insert call (90 s by default), sent with it as the `X-Server-Timeout`
   * system parameter: GCE fails an insert it has not processed by then rather than carry
   * it out later. The worker waits a little longer for the answer, so it never sends an
   * insert again while an earlier one may still land; and a release that may race a
   * create watches for the VM as long, so one that lands late is deleted, not leaked.
   */
  insertTimeoutMs?: number;
  /** The port rank 0 of a gang listens on for its peers (STERNA_MASTER_PORT): 29500, torchrun's, by default. */
  gangMasterPort?: number;
  /** Maps storage URIs for the VM (the emulator serves gs:// buckets from a directory). */
  storageUriForVm?: (uri: string) => string;
  /**
   * The agent powers its VM off this long after its trainer exited if no release has
   * come by then (600 s by default): a VM whose run is gone stops paying on its own.
   */
  powerOffAfterSeconds?: number;
  /**
   * How to reach a kept VM (workflows/run/keep.ts), one line: `gcloud compute ssh` by
   * default; the emulator's composition root says where its VM's process group runs.
   */
  reachLine?: (ref: ResourceRef, project: string) => string;
  /** Metadata reads one fleet listing may make for instances older than the description that names their run (default 50). */
  metadataReadsPerListing?: number;
  /**
   * How long one read of where each accelerator is offered (acceleratorTypes.aggregatedList)
   * serves every placement of this worker: 10 minutes by default. GCE adds accelerator
   * zones a few times a year, so this is a topology, not a reading.
   */
  acceleratorZonesTtlMs?: number;
  /**
   * How long one read of a region's quotas (regions.get) serves every placement of this
   * worker: 60 s by default. A stale quota only misjudges `quotaAvailable`; the insert
   * itself is the authority (QUOTA_EXCEEDED is a named failure, and drops the entry).
   */
  regionQuotasTtlMs?: number;
}

const STOCKOUT_CODES = new Set(['ZONE_RESOURCE_POOL_EXHAUSTED', 'ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS', 'RESOURCE_POOL_EXHAUSTED']);
const QUOTA_CODES = new Set(['QUOTA_EXCEEDED']);
// Async iterators page lazily anyway; saying so silences gax's AutopaginateTrueWarning.
const NO_AUTOPAGINATE = { autoPaginate: false };

/** GCE's operation type for a preemption. */
const OPERATION_PREEMPTED = 'compute.instances.preempted';
/** Instances named in one preemption lookup: keeps its filter a couple of KB. */
const PREEMPTION_LOOKUP_NAMES = 40;

/**
 * A zone-operations filter for operations of these types on these instances, in GCE's
 * regular-expression form (`field eq regex`, full match, juxtaposed terms ANDed): one
 * expression matches any of the names, which the comparison form cannot say in one term.
 * Instance names and operation types hold no regex syntax but `.`, which matches itself.
 */
export function operationsOn(names: readonly string[], types: readonly string[]): string {
  return `operationType eq "${types.join('|')}" targetLink eq ".*/instances/(${names.join('|')})"`;
}

/**
 * How long the worker waits for an insert's answer: its server deadline and a margin for
 * the answer's way back (and for clocks). No insert it sent lands later than this after
 * it was sent, and none is still unanswered when the worker sends another; so a release
 * that begins while a create may be in flight has watched long enough once this has passed.
 */
export function insertAnswerWithinMs(insertTimeoutMs: number): number {
  return insertTimeoutMs + INSERT_ANSWER_MARGIN_MS;
}
const INSERT_ANSWER_MARGIN_MS = 5_000;

/**
 * An insert's call options: the `X-Server-Timeout` system parameter (whole seconds), so GCE
 * fails the request rather than process it later, and the client's own deadline for its
 * answer (gce-clients.ts `callConfig` says why google-gax must be given it).
 */
function insertCallOptions(insertTimeoutMs: number) {
  return { timeout: insertAnswerWithinMs(insertTimeoutMs), otherArgs: { headers: { 'X-Server-Timeout': String(Math.ceil(insertTimeoutMs / 1000)) } } };
}

/** Every Sterna resource carries the run label (workflows/naming.ts). */
const FLEET_FILTER = 'labels.sterna-run:*';
/** The metadata attribute holding the run's workflow id (activities/agent/script.ts). */
const RUN_ID_ATTRIBUTE = 'sterna-run-id';
/**
 * An instance's description names its run's workflow id too, so the fleet listing can leave
 * out the metadata: that holds the agent's 22 KB startup script, and listing it for every
 * instance every interval was about 50 MB of JSON a look at 2,000 runs.
 */
const RUN_DESCRIPTION_PREFIX = 'Sterna training run ';
/** What the fleet listing reads of each instance: a partial response (`X-Goog-FieldMask`). */
const FLEET_FIELDS = [
  'nextPageToken',
  'items/*/instances(id,name,description,labels,status,lastStartTimestamp,lastStopTimestamp,creationTimestamp,guestAccelerators/acceleratorType,scheduling/provisioningModel)',
].join(',');
const fieldMask = (fields: string) => ({ otherArgs: { headers: { 'X-Goog-FieldMask': fields } } });
/** Metadata reads one listing may make for instances older than the description (the rest wait for later listings). */
const DEFAULT_METADATA_READS_PER_LISTING = 50;
export function workflowIdOfDescription(description: string | null | undefined): string | undefined {
  return description?.startsWith(RUN_DESCRIPTION_PREFIX) ? description.slice(RUN_DESCRIPTION_PREFIX.length) || undefined : undefined;
}
/** GCE's bounds on `scheduling.terminationTime`, ahead of now: 30 s (40, for the request's way) to 120 days. */
const MIN_TIME_LIMIT_MS = 40_000;
const MAX_TIME_LIMIT_MS = 120 * 24 * 3600 * 1000;
const DEFAULT_POWER_OFF_AFTER_SECONDS = 600;
/** Expected flex-start wait for a GPU type the catalog has no figure for (an assumption). */
const FLEX_START_DEFAULT_WAIT_SECONDS = 1800;
/** Reads and writes of a VM's metadata before a lost fingerprint race is reported. */
const METADATA_WRITE_ATTEMPTS = 5;
const DEFAULT_IMAGE = 'projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11-py310';

/**
 * A Compute error is `http` (REST, what GCE answered) or `grpc` (the code gax maps it to).
 * google-gax 6 sets `code` to the gRPC code and keeps the HTTP status as `httpStatusCode`;
 * gax 5 left the status in `code`. GCE's REST errors name no gRPC status, so the mapping is
 * the generic one (409 is ABORTED, not ALREADY_EXISTS): the HTTP status says more.
 */
function isApiError(err: unknown, http: number, grpc: number): boolean {
  const e = err as { code?: unknown; httpStatusCode?: unknown } | undefined;
  return e?.httpStatusCode === http || e?.code === http || e?.code === grpc;
}

export function isNotFound(err: unknown): boolean {
  return isApiError(err, 404, 5) || /was not found|notFound/i.test((err as Error)?.message ?? '');
}

/** setMetadata's answer when the metadata changed since its fingerprint was read (HTTP 412, conditionNotMet). */
function isStaleFingerprint(err: unknown): boolean {
  return isApiError(err, 412, 9) || /conditionNotMet|fingerprint/i.test((err as Error)?.message ?? '');
}

function isInvalidArgument(err: unknown): boolean {
  return isApiError(err, 400, 3);
}

/** gax puts GCE's JSON error body in the message; its `error.message` is the readable part. */
function errorMessage(err: unknown): string {
  const message = (err as Error)?.message ?? String(err);
  try {
    return (JSON.parse(message) as { error?: { message?: string } }).error?.message ?? message;
  } catch {
    return message;
  }
}

/** GCE's answer to a write with a stale fingerprint: 412 conditionNotMet (gRPC FAILED_PRECONDITION). */
function isConditionNotMet(err: unknown): boolean {
  return isApiError(err, 412, 9) || /conditionNotMet|fingerprint/i.test((err as Error)?.message ?? '');
}

function isAlreadyExists(err: unknown): boolean {
  return isApiError(err, 409, 6) || /already exists|alreadyExists/i.test((err as Error)?.message ?? '');
}

/** GCE's instance status as Sterna's lifecycle (REPAIRING and unknown states count as pending). */
export function gceLifecycle(status: string | null | undefined): FleetResource['lifecycle'] {
  switch (status) {
    case 'RUNNING':
      return 'running';
    case 'STOPPING':
    case 'SUSPENDING':
      return 'stopping';
    case 'TERMINATED':
    case 'SUSPENDED':
      return 'terminated';
    default:
      return 'pending';
  }
}

function within(value: string, rule?: { allow?: string[]; deny?: string[] }): boolean {
  if (!rule) return true;
  if (rule.deny?.includes(value)) return false;
  return !rule.allow || rule.allow.includes(value);
}

export class GceProvider implements ComputeProvider {
  readonly backend = 'gce' as const;
  private readonly instances: InstancesClient;
  private readonly operations: ZoneOperationsClient;
  private readonly regions: RegionsClient;
  private readonly zones: ZonesClient;
  private readonly acceleratorTypes: AcceleratorTypesClient;
  private readonly pollMs: number;
  private readonly insertTimeoutMs: number;
  /**
   * Placement reads shared by every run of this worker. Without them each placement cost
   * one aggregatedList plus one regions.get per region, so reads grew with the fleet
   * (2,000 runs: 14,000 placement reads). `fetch` coalesces concurrent misses into one
   * call, and a failed refresh serves the last good answer (a GET outage does not stop
   * placement; the insert still decides).
   */
  private readonly acceleratorZones: LRUCache<string, Map<string, string[]>>;
  /**
   * Why the last read of the accelerator zones failed. A failed read with no earlier
   * answer to fall back on leaves the cache nothing to give (lru-cache's `fetch` then
   * resolves to undefined, for the caller that started the read and every one that
   * joined it); placement throws this rather than read "no zone offers it".
   */
  private acceleratorZonesError: unknown;
  private readonly regionQuotas: LRUCache<string, IQuota[]>;
  private readonly metadataRunIds = new LRUCache<string, { id: string | undefined }>({ max: 20_000 });

  constructor(private readonly options: GceProviderOptions) {
    ({ instances: this.instances, operations: this.operations, regions: this.regions, zones: this.zones, acceleratorTypes: this.acceleratorTypes } = computeClients(options.clientOptions));
    this.pollMs = options.pollIntervalMs ?? 1000;
    this.insertTimeoutMs = options.insertTimeoutMs ?? 90_000;
    this.acceleratorZones = new LRUCache({
      max: 1,
      ttl: options.acceleratorZonesTtlMs ?? 10 * 60_000,
      allowStaleOnFetchRejection: true,
      fetchMethod: () =>
        this.listAcceleratorZones().catch((err: unknown) => {
          this.acceleratorZonesError = err;
          throw err;
        }),
    });
    this.regionQuotas = new LRUCache({
      max: 256,
      ttl: options.regionQuotasTtlMs ?? 60_000,
      allowStaleOnFetchRejection: true,
      fetchMethod: async (region) => (await this.regions.get({ project: options.project, region }))[0].quotas ?? [],
    });
  }

  /** One API call with a client-side deadline, its transient errors retried with backoff. */
  private api<T>(what: string, call: () => Promise<T>, timeoutMs = READ_TIMEOUT_MS, signal?: AbortSignal): Promise<T> {
    const note = (err: unknown) => isRateLimited(err) && noteRateLimited(this.options.project);
    return retryTransient(() => withDeadline(call(), timeoutMs, what), { signal, onRetry: note }).catch((err: unknown) => {
      note(err);
      throw err;
    });
  }

  rateLimitedSince(sinceMs: number): boolean {
    return rateLimitedSince(this.options.project, sinceMs);
  }

  async findOffers(request: CapacityRequest): Promise<Offer[]> {
    return (await this.findCapacity(request)).offers;
  }

  async findCapacity(request: CapacityRequest, prices: PriceBook = this.options.prices): Promise<CapacityFound> {
    return this.api('listing offers', () => this.listOffers(request, prices), 2 * WAIT_TIMEOUT_MS);
  }

  /** Every zone each accelerator is offered in, from one acceleratorTypes.aggregatedList. */
  private async listAcceleratorZones(): Promise<Map<string, string[]>> {
    const zonesByAccelerator = new Map<string, string[]>();
    for await (const [scope, list] of this.acceleratorTypes.aggregatedListAsync({ project: this.options.project }, NO_AUTOPAGINATE)) {
      const zone = scope.replace(/^zones\//, '');
      for (const type of list.acceleratorTypes ?? []) {
        if (!type.name) continue;
        zonesByAccelerator.set(type.name, [...(zonesByAccelerator.get(type.name) ?? []), zone]);
      }
    }
    return zonesByAccelerator;
  }

  /** Every zone offering a requested accelerator, priced from `prices`. */
  private async listOffers(request: CapacityRequest, prices: PriceBook): Promise<CapacityFound> {
    const zonesByAccelerator = await this.acceleratorZones.fetch('zones');
    // No answer, not an empty one: the run would fail NoCapacity ("no zone offers it")
    // on a 503. Thrown, a transient error is retried here (api) and by the activity.
    if (!zonesByAccelerator) throw this.acceleratorZonesError ?? new Error('listing where accelerators are offered (acceleratorTypes.aggregatedList) failed');
    const quotasOf = async (region: string) => (await this.regionQuotas.fetch(region)) ?? [];
    const offers: Offer[] = [];
    const unpriced: UnpricedZone[] = [];
    const stamp = { pricesAsOf: prices.stamp.asOf, priceSource: prices.stamp.source };
    // A gang's offer is for all its nodes: its price and its quota are every node's.
    const nodes = gangSize(request);
    const gang = nodes > 1 ? { nodes } : {};
    for (const { type, count } of request.accelerators) {
      const machineType = request.machineType ?? prices.machineTypeFor(type, count);
      if (!machineType) continue;
      for (const zone of zonesByAccelerator.get(type) ?? []) {
        const region = regionOf(zone);
        if (!within(zone, request.zones) || !within(region, request.regions)) continue;
        const onDemand = prices.pricePerHour({ region, machineType, accelerator: type, count, spot: false });
        let priced = false;
        for (const model of request.provisioningModels) {
          const spot = model === 'SPOT';
          const flexStart = model === 'FLEX_START';
          // Flex-start is priced only where it is sold (accelerator-optimized machine types).
          const price = prices.pricePerHour({ region, machineType, accelerator: type, count, spot, ...(flexStart ? { flexStart } : {}) });
          if (price === undefined || onDemand === undefined) continue;
          if (!flexStart) priced = true;
          const metric = prices.quotaMetric(type);
          // Flex-start VMs consume preemptible quota, as spot VMs do.
          const quota = metric ? (await quotasOf(region)).find((q) => q.metric === (spot || flexStart ? `PREEMPTIBLE_${metric}` : metric)) : undefined;
          const quotaAvailable = !quota || (quota.limit ?? 0) - (quota.usage ?? 0) >= count * nodes;
          const wait = flexStart ? { expectedWaitSeconds: FLEX_START_EXPECTED_WAIT_SECONDS[type] ?? FLEX_START_DEFAULT_WAIT_SECONDS } : {};
          offers.push({ backend: 'gce', zone, region, accelerator: type, acceleratorCount: count, machineType, provisioningModel: model, pricePerHour: price * nodes, onDemandPricePerHour: onDemand * nodes, quotaAvailable, ...stamp, ...wait, ...gang });
        }
        if (!priced) unpriced.push({ zone, accelerator: type, machineType });
      }
    }
    return { offers, unpriced, prices: prices.stamp };
  }

  private instanceResource(request: ProvisionRequest): IInstance {
    const { offer } = request;
    const mapUri = this.options.storageUriForVm ?? ((uri: string) => uri);
    const agent = {
      ...request.agent,
      datasets: request.agent.datasets.map((d) => ({ ...d, uri: mapUri(d.uri) })),
      checkpointUri: mapUri(request.agent.checkpointUri),
      resumeFrom: request.agent.resumeFrom && { ...request.agent.resumeFrom, uri: mapUri(request.agent.resumeFrom.uri) },
      workdir: request.agent.workdir && { ...request.agent.workdir, uri: mapUri(request.agent.workdir.uri) },
      dataCacheUri: request.agent.dataCacheUri && mapUri(request.agent.dataCacheUri),
    };
    // Guest attributes are how the agent reports; GCE enables them per instance.
    const metadata = {
      'startup-script': agentScript(),
      'enable-guest-attributes': 'TRUE',
      ...agentAttributes(agent),
      // The agent runs setup and the command in this image with the VM's container runtime.
      ...(request.image ? { [IMAGE_ATTRIBUTE]: request.image } : {}),
      'sterna-poweroff-after-seconds': String(powerOffAfterSeconds(this.options.powerOffAfterSeconds ?? DEFAULT_POWER_OFF_AFTER_SECONDS, request.keepOnFailureSeconds)),
    };
    const spot = offer.provisioningModel === 'SPOT';
    const limit = { terminationTime: terminationTime(request.releaseBy, Date.now()) };
    return {
      ...(offer.provisioningModel === 'FLEX_START' ? flexStartFields(request) : {}),
      name: request.name,
      description: `${RUN_DESCRIPTION_PREFIX}${request.agent.runId}`,
      machineType: `zones/${offer.zone}/machineTypes/${offer.machineType}`,
      labels: request.labels,
      metadata: { items: Object.entries(metadata).map(([key, value]) => ({ key, value })) },
      // GPUs cannot live-migrate: GCE rejects GPU VMs without onHostMaintenance TERMINATE.
      // The time limit stops paying for a VM nothing released. One instanceTerminationAction
      // serves both preemption and the time limit: spot VMs STOP (the ledger reads a
      // preempted VM's lastStopTimestamp; a stopped VM bills only its disk, which the
      // reaper deletes), on-demand VMs are DELETEd at their limit.
      scheduling:
        offer.provisioningModel === 'FLEX_START'
          ? flexStartScheduling(request)
          : spot
            ? { provisioningModel: 'SPOT', instanceTerminationAction: 'STOP', onHostMaintenance: 'TERMINATE', automaticRestart: false, ...limit }
            : { provisioningModel: 'STANDARD', instanceTerminationAction: 'DELETE', onHostMaintenance: 'TERMINATE', automaticRestart: false, ...limit },
      guestAccelerators: this.options.prices.hasBuiltInAccelerators(offer.machineType)
        ? []
        : [{ acceleratorType: `zones/${offer.zone}/acceleratorTypes/${offer.accelerator}`, acceleratorCount: offer.acceleratorCount }],
      disks: [
        {
          boot: true,
          autoDelete: true,
          initializeParams: { sourceImage: this.options.sourceImage ?? DEFAULT_IMAGE, diskSizeGb: String(request.diskSizeGb) },
        },
      ],
      // Service account, scopes, network, external IP, Shielded VM: least privilege (gce-vm-access.ts).
      ...vmAccessFields(this.options.vmAccess ?? { ...DEFAULT_VM_ACCESS, serviceAccountEmail: this.options.serviceAccountEmail }, offer.region, request.agent),
    };
  }

  async provision(request: ProvisionRequest, onProgress: (status: string) => void, signal?: AbortSignal): Promise<ProvisionResult> {
    const nodes = gangSize(request.offer);
    return nodes > 1 ? this.provisionGang(request, nodes, onProgress, signal) : this.provisionNode(request, onProgress, signal);
  }

  /**
   * A gang: rank 0 first, since its internal address (GCE assigns it at insert) is every
   * other node's STERNA_MASTER_ADDR; then all the others at once. Every insert is let
   * settle before the gang's answer, so none is still in flight: a node that could not
   * be created (stockout, quota) fails the gang with its failure, and the run's release
   * then deletes every node that was (run/gang.ts names them all).
   */
  private async provisionGang(request: ProvisionRequest, nodes: number, onProgress: (status: string) => void, signal?: AbortSignal): Promise<ProvisionResult> {
    const masterPort = this.options.gangMasterPort ?? DEFAULT_MASTER_PORT;
    const progress = (rank: number) => (status: string) => onProgress(`n${rank}: ${status}`);
    const lead = nodeRequest(request, 0, nodes, { masterPort });
    const leading = this.provisionNode(lead, progress(0), signal);
    const settled: Promise<PromiseSettledResult<ProvisionResult>>[] = [settle(leading)];
    try {
      const masterAddr = await this.internalAddress({ backend: 'gce', name: lead.name, zone: request.offer.zone }, leading);
      for (let rank = 1; rank < nodes; rank++) settled.push(settle(this.provisionNode(nodeRequest(request, rank, nodes, { masterAddr, masterPort }), progress(rank), signal)));
    } catch (err) {
      await settled[0];
      throw err;
    }
    const results = await Promise.all(settled);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const created = results.map((r) => (r as PromiseFulfilledResult<ProvisionResult>).value);
    return {
      ref: { backend: 'gce', name: request.name, zone: request.offer.zone, nodes },
      adopted: created.some((c) => c.adopted),
      window: { startedAt: gangStartedAt(created.map((c) => c.window.startedAt)) },
    };
  }

  /** A new instance's internal address (networkInterfaces[0].networkIP), as soon as GCE shows it; its create's failure if it fails first. */
  private async internalAddress(ref: ResourceRef, creating: Promise<ProvisionResult>): Promise<string> {
    let outcome: { ran: true } | { ran: false; error: unknown } | undefined;
    const finished = creating.then(
      () => void (outcome = { ran: true }),
      (error: unknown) => void (outcome = { ran: false, error }),
    );
    for (;;) {
      const instance = await this.getInstance(ref);
      const address = instance?.networkInterfaces?.[0]?.networkIP;
      if (address) return address;
      // The create's own failure (stockout, quota...) ends the wait with that failure.
      if (outcome && !outcome.ran) throw outcome.error;
      if (outcome) throw new Error(`instance ${ref.name} in ${ref.zone} runs without an internal address`);
      await Promise.race([finished, sleep(this.pollMs)]);
    }
  }

  private async provisionNode(request: ProvisionRequest, onProgress: (status: string) => void, signal?: AbortSignal): Promise<ProvisionResult> {
    const { project } = this.options;
    const { zone } = request.offer;
    const ref: ResourceRef = { backend: 'gce', name: request.name, zone };
    let adopted = false;
    abortIfAsked(signal);
    try {
      // Not abortable on purpose: once sent, the call is awaited (bounded by its timeout),
      // so a cancelled provision ends only when nothing it sent can still land.
      const instanceResource = this.instanceResource(request);
      // A retried insert of a create that did land answers 409, and is adopted below.
      const callOptions = insertCallOptions(this.insertTimeoutMs);
      const [op] = await this.api(`insert ${request.name}`, () => this.instances.insert({ project, zone, instanceResource }, callOptions), callOptions.timeout, signal);
      onProgress('inserting');
      abortIfAsked(signal);
      await this.waitForOperation(zone, operationName(op), onProgress, signal, request.offer.provisioningModel === 'FLEX_START');
    } catch (err) {
      if (signal?.aborted) throw err;
      // The region's cached quotas said there was room; the next placement reads them again.
      if (namedFailureOf(err)?.type === FailureType.QuotaExceeded) this.regionQuotas.delete(request.offer.region);
      // A 400 means the request itself is wrong (machine type, image, accelerator):
      // no retry can fix it, so fail the attempt with GCE's own words.
      if (isInvalidArgument(err)) throw failure(FailureType.InvalidSpec, `GCE rejected instance ${request.name}: ${errorMessage(err)}`);
      if (!isAlreadyExists(err)) throw err;
      // A retried create (the worker died after the insert): adopt our own VM, only ours.
      const existing = await this.getInstance(ref);
      if (!existing || !isOwnedBy(existing.labels, request.owner)) {
        throw failure(FailureType.ResourceConflict, `instance ${request.name} in ${zone} exists but is not this run's attempt ${request.owner.attempt}; it is left alone`);
      }
      adopted = true;
    }
    for (;;) {
      abortIfAsked(signal);
      const instance = await this.getInstance(ref);
      if (!instance) throw failure(FailureType.Preempted, `instance ${request.name} disappeared in ${zone} before it ran`);
      onProgress(instance.status ?? 'unknown');
      if (instance.status === 'RUNNING') return { ref, adopted, window: { startedAt: instance.lastStartTimestamp ?? undefined } };
      if (instance.status === 'TERMINATED' || instance.status === 'STOPPING' || instance.status === 'SUSPENDED') {
        throw failure(FailureType.Preempted, `instance ${request.name} in ${zone} stopped (${instance.status}) before it ran`);
      }
      await sleep(this.pollMs);
    }
  }

  /** Waits for a zone operation and throws its error, translated, if it failed. */
  private async waitForOperation(zone: string, operation: string, onProgress: (status: string) => void, signal?: AbortSignal, flexStart = false): Promise<IOperation> {
    const { project } = this.options;
    for (;;) {
      abortIfAsked(signal);
      // `wait` returns when the operation is DONE or after a bounded time, whichever first.
      const [op] = await this.api(`wait ${operation}`, () => this.operations.wait({ project, zone, operation }), WAIT_TIMEOUT_MS);
      onProgress(`operation ${String(op.status)}`);
      if (op.status === 'DONE') {
        const errors = op.error?.errors ?? [];
        if (errors.length > 0) throw translateOperationErrors(zone, errors, flexStart);
        return op;
      }
    }
  }

  private async getInstance(ref: ResourceRef): Promise<IInstance | undefined> {
    try {
      const [instance] = await this.api(`get ${ref.name}`, () => this.instances.get({ project: this.options.project, zone: ref.zone, instance: ref.name }));
      return instance;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async observe(ref: ResourceRef): Promise<AgentSnapshot> {
    // A gang is looked at whole: every node, then the gang's one verdict (run/gang.ts).
    if (gangSize(ref) > 1) return gangSnapshot(await Promise.all(nodeRefs(ref).map((node) => this.observeNode(node))));
    return this.observeNode(ref);
  }

  private async observeNode(ref: ResourceRef): Promise<AgentSnapshot> {
    const instance = await this.getInstance(ref);
    if (!instance) return { lifecycle: 'gone', preempted: false };
    const status = instance.status ?? '';
    const lifecycle =
      status === 'RUNNING' ? 'running' : status === 'STOPPING' || status === 'SUSPENDING' ? 'stopping' : status === 'TERMINATED' || status === 'SUSPENDED' ? 'terminated' : 'pending';
    const { noticed, ...agent } = parseAgentValues(lifecycle === 'pending' ? {} : await this.guestAttributes(ref));
    // The agent relays GCE's own notice from the metadata server; once the VM stops, the
    // preempted operation says so too (it may be recorded only at the end of the stop).
    const preempted = noticed === true || ((lifecycle === 'stopping' || lifecycle === 'terminated') && (await this.wasPreempted(ref, instance)));
    return { lifecycle, preempted, ...agent };
  }

  /**
   * Asks the agent for a final checkpoint and a stop before the flex-start cut: the
   * `sterna-move` attribute, set with setMetadata under the metadata's current fingerprint
   * (read again when another write came between). A VM that no longer runs cannot be asked.
   */
  async askMove(ref: ResourceRef): Promise<MoveAnswer> {
    for (let tries = 0; tries < 3; tries++) {
      const instance = await this.getInstance(ref);
      if (instance?.status !== 'RUNNING') return { delivered: false, detail: `${ref.name} is ${instance?.status ?? 'gone'}` };
      const current = instance.metadata?.items ?? [];
      if (current.some((item) => item.key === MOVE_ATTRIBUTE && item.value === 'TRUE')) return { delivered: true };
      try {
        const items = [...current.filter((item) => item.key !== MOVE_ATTRIBUTE), { key: MOVE_ATTRIBUTE, value: 'TRUE' }];
        const metadataResource = { fingerprint: instance.metadata?.fingerprint, items };
        const [op] = await this.api(`ask ${ref.name} to move`, () => this.instances.setMetadata({ project: this.options.project, zone: ref.zone, instance: ref.name, metadataResource }));
        await this.waitForOperation(ref.zone, operationName(op), () => undefined);
        return { delivered: true };
      } catch (err) {
        if (isNotFound(err)) return { delivered: false, detail: `${ref.name} is gone` };
        if (!isStaleFingerprint(err)) throw err;
      }
    }
    return { delivered: false, detail: `the metadata of ${ref.name} kept changing under the ask` };
  }

  private async guestAttributes(ref: ResourceRef): Promise<Record<string, string>> {
    try {
      const [attrs] = await this.api(`guest attributes of ${ref.name}`, () =>
        this.instances.getGuestAttributes({ project: this.options.project, zone: ref.zone, instance: ref.name, queryPath: 'sterna/' }),
      );
      const values: Record<string, string> = {};
      for (const item of attrs.queryValue?.items ?? []) if (item.key) values[item.key] = item.value ?? '';
      return values;
    } catch (err) {
      // GCE answers 404 while the guest has written nothing under the path yet.
      if (isNotFound(err)) return {};
      throw err;
    }
  }

  private async wasPreempted(ref: ResourceRef, instance: IInstance): Promise<boolean> {
    const target = instance.selfLink ?? `projects/${this.options.project}/zones/${ref.zone}/instances/${ref.name}`;
    const [ops] = await this.api(`preempted operations of ${ref.name}`, () =>
      this.operations.list({
        project: this.options.project,
        zone: ref.zone,
        filter: `(operationType = "compute.instances.preempted") AND (targetLink = "${target}")`,
      }),
    );
    return ops.length > 0;
  }

  async release(request: ReleaseRequest, onProgress: (status: string) => void = () => undefined): Promise<ReleaseResult> {
    if (gangSize(request.ref) === 1) return this.releaseNode(request, onProgress);
    // Every node at once, each deleted only if it is ours: a gang is released whole.
    const nodes = nodeRefs(request.ref);
    return gangRelease(await Promise.all(nodes.map((ref, rank) => this.releaseNode({ ...request, ref }, (status) => onProgress(`n${rank}: ${status}`)))));
  }

  private async releaseNode({ ref, owner, createMayBeInFlight, startedAt }: ReleaseRequest, onProgress: (status: string) => void): Promise<ReleaseResult> {
    const began = Date.now();
    let instance = await this.getInstance(ref);
    const foundAtOnce = instance !== undefined;
    // A create whose outcome is unknown may still land: watch for it until no insert can.
    const settledBy = createMayBeInFlight ? began + insertAnswerWithinMs(this.insertTimeoutMs) + this.pollMs : 0;
    while (!instance && Date.now() < settledBy) {
      onProgress(`waiting until ${new Date(settledBy).toISOString()} for a create that may still land`);
      await sleep(this.pollMs);
      instance = await this.getInstance(ref);
    }
    const until = new Date(settledBy).toISOString();
    if (!instance) {
      const watch: Pick<ReleaseResult, 'createWatch'> = createMayBeInFlight ? { createWatch: { outcome: 'deadline-passed', until } } : {};
      return { outcome: ReleaseOutcome.Absent, stoppedAt: startedAt ? await this.stoppedSince(ref, startedAt) : undefined, ...watch };
    }
    // Found only while watching (not at the first look): the create landed after the run gave up on it.
    const late: Pick<ReleaseResult, 'createWatch'> = foundAtOnce ? {} : { createWatch: { outcome: 'landed-late', until, afterSeconds: Math.round((Date.now() - began) / 1000) } };
    if (!isOwnedBy(instance.labels, owner)) return { outcome: ReleaseOutcome.NotOurs, ...late };
    const window: ReleaseResult = { outcome: ReleaseOutcome.Deleted, startedAt: instance.lastStartTimestamp ?? undefined, ...late };
    const alreadyStopped = instance.status === 'TERMINATED' || instance.status === 'SUSPENDED';
    try {
      const [op] = await this.api(`delete ${ref.name}`, () => this.instances.delete({ project: this.options.project, zone: ref.zone, instance: ref.name }));
      const done = await this.waitForOperation(ref.zone, operationName(op), onProgress);
      window.stoppedAt = alreadyStopped ? (instance.lastStopTimestamp ?? done.endTime ?? undefined) : (done.endTime ?? new Date().toISOString());
    } catch (err) {
      if (!isNotFound(err)) throw err;
      window.stoppedAt = instance.lastStopTimestamp ?? new Date().toISOString();
    }
    return window;
  }

  /**
   * When an instance that ran from `startedAt` stopped, by GCE's own record: the end of
   * the first stop, preemption or delete operation on it since then (undefined if none).
   * A release retried after its delete landed reads this instead of calling it `now`.
   */
  private async stoppedSince(ref: ResourceRef, startedAt: string): Promise<string | undefined> {
    const { project } = this.options;
    const since = Date.parse(startedAt);
    const filter = operationsOn([ref.name], ['delete', 'stop', OPERATION_PREEMPTED]);
    return this.api(`operations on ${ref.name}`, async () => {
      let first: number | undefined;
      for await (const op of this.operations.listAsync({ project, zone: ref.zone, filter }, NO_AUTOPAGINATE)) {
        const end = Date.parse(op.endTime ?? '');
        if (!op.targetLink?.endsWith(`/instances/${ref.name}`) || op.status !== 'DONE' || op.error || !(end >= since)) continue;
        first = Math.min(first ?? end, end);
      }
      return first === undefined ? undefined : new Date(first).toISOString();
    });
  }

  /**
   * Keeps a failed attempt's VM (every node of a gang) for inspection: the label
   * `sterna-keep-until=<epoch seconds>`, set with setLabels under the labels' fingerprint,
   * on the owner's VM only. The keep ends at the VM's own time limit where that comes
   * first (a running VM's limit cannot be moved: setScheduling wants it stopped).
   */
  async keep({ ref, owner, until }: KeepRequest): Promise<KeepResult> {
    const nodes = gangSize(ref) > 1 ? nodeRefs(ref) : [ref];
    const results = await Promise.all(nodes.map((node) => this.keepNode(node, owner, Date.parse(until))));
    if (results.some((r) => r.outcome === 'not-ours')) return { outcome: 'not-ours' };
    const kept = results.filter((r) => r.outcome === 'kept');
    if (kept.length === 0) return { outcome: 'absent' };
    const untilMs = Math.min(...kept.map((r) => Date.parse(r.until!)));
    return { outcome: 'kept', until: new Date(untilMs).toISOString(), reach: kept.flatMap((r) => r.reach ?? []) };
  }

  private async keepNode(ref: ResourceRef, owner: Owner, untilMs: number): Promise<KeepResult> {
    const { project } = this.options;
    for (let attempt = 1; ; attempt++) {
      const instance = await this.getInstance(ref);
      if (!instance) return { outcome: 'absent' };
      if (!isOwnedBy(instance.labels, owner)) return { outcome: 'not-ours' };
      const limit = timeLimitMs(instance);
      const seconds = Math.floor(Math.min(untilMs, limit ?? untilMs) / 1000);
      const labels = { ...(instance.labels ?? {}), [KEEP_UNTIL_LABEL]: String(seconds) };
      try {
        const [op] = await this.api(`keep ${ref.name}`, () =>
          this.instances.setLabels({ project, zone: ref.zone, instance: ref.name, instancesSetLabelsRequestResource: { labelFingerprint: instance.labelFingerprint, labels } }),
        );
        await this.waitForOperation(ref.zone, operationName(op), () => undefined);
        const reach = this.options.reachLine?.(ref, project) ?? `gcloud compute ssh ${ref.name} --zone ${ref.zone} --project ${project}`;
        return { outcome: 'kept', until: new Date(seconds * 1000).toISOString(), reach: [reach] };
      } catch (err) {
        if (isNotFound(err)) return { outcome: 'absent' };
        if (!isConditionNotMet(err) || attempt >= METADATA_WRITE_ATTEMPTS) throw err;
      }
    }
  }

  async listRunResources(runId: string): Promise<ResourceRef[]> {
    const { project } = this.options;
    const refs: ResourceRef[] = [];
    for await (const zone of this.zones.listAsync({ project }, NO_AUTOPAGINATE)) {
      if (!zone.name) continue;
      for await (const instance of this.instances.listAsync({ project, zone: zone.name, filter: `labels.sterna-run = "${runId}"` }, NO_AUTOPAGINATE)) {
        if (instance.name) refs.push({ backend: 'gce', name: instance.name, zone: zone.name });
      }
    }
    return refs;
  }

  fleetScope(): string {
    return this.options.project;
  }

  /**
   * One aggregatedList over every zone, filtered on Sterna's label: every status change
   * in the project in one request (GCE pages at 500 instances), read as a partial response.
   * The run's workflow id comes from the description; an instance created before the
   * description carried it is read once for its metadata, then remembered. At most
   * `metadataReadsPerListing` such reads per listing, so a fleet of older instances costs a
   * few listings rather than a burst of reads; until its read, an instance is `runUnread`.
   */
  async listFleet(): Promise<FleetResource[]> {
    const { project } = this.options;
    return this.api('fleet listing', async () => {
      const resources: FleetResource[] = [];
      let metadataReads = this.options.metadataReadsPerListing ?? DEFAULT_METADATA_READS_PER_LISTING;
      for await (const [scope, list] of this.instances.aggregatedListAsync({ project, filter: FLEET_FILTER, maxResults: 500 }, { ...NO_AUTOPAGINATE, ...fieldMask(FLEET_FIELDS) })) {
        const zone = scope.replace(/^zones\//, '');
        for (const instance of list.instances ?? []) {
          const owner = ownerFromLabels(instance.labels);
          if (!instance.name || !owner) continue;
          const run = await this.runOf(zone, instance, () => metadataReads-- > 0);
          if (run === 'gone') continue; // deleted since the listing
          resources.push({
            ref: { backend: 'gce', name: instance.name, zone },
            owner,
            ...run,
            lifecycle: gceLifecycle(instance.status),
            lastStartAt: instance.lastStartTimestamp ?? undefined,
            lastStopAt: instance.lastStopTimestamp ?? undefined,
            createdAt: instance.creationTimestamp ?? undefined,
            ...keepOf(instance.labels),
            accelerator: instance.guestAccelerators?.[0]?.acceleratorType?.split('/').pop() ?? undefined,
            provisioningModel: instance.scheduling?.provisioningModel === 'SPOT' ? 'SPOT' : instance.scheduling?.provisioningModel === 'STANDARD' ? 'STANDARD' : undefined,
          });
        }
      }
      return resources;
    });
  }

  /**
   * Which run a listed instance names: its description, or else (an instance older than
   * that) its metadata, read once when `mayRead` allows and remembered; unread until then.
   */
  private async runOf(zone: string, instance: IInstance, mayRead: () => boolean): Promise<Pick<FleetResource, 'workflowId' | 'runUnread'> | 'gone'> {
    const described = workflowIdOfDescription(instance.description);
    if (described !== undefined) return { workflowId: described };
    const key = `${zone}/${instance.name}/${String(instance.id ?? '')}`;
    const known = this.metadataRunIds.get(key);
    if (known) return { workflowId: known.id };
    if (!mayRead()) return { runUnread: true };
    try {
      const [read] = await this.instances.get({ project: this.options.project, zone, instance: instance.name! }, fieldMask('metadata/items'));
      const id = read.metadata?.items?.find((item) => item.key === RUN_ID_ATTRIBUTE)?.value ?? undefined;
      this.metadataRunIds.set(key, { id });
      return { workflowId: id };
    } catch (err) {
      if (isNotFound(err)) return 'gone';
      if (isRateLimited(err)) noteRateLimited(this.options.project);
      return { runUnread: true }; // read again at a later listing
    }
  }

  async readAgent(ref: ResourceRef): Promise<AgentValues> {
    return parseAgentValues(await this.guestAttributes(ref));
  }

  /**
   * setMetadata replaces every item and takes the fingerprint of the metadata it
   * replaces: read, change one item, write; a write that lost a race (412
   * conditionNotMet: someone changed the metadata in between) reads again.
   */
  async setAgentInput(ref: ResourceRef, owner: Owner, key: string, value: string): Promise<SetAgentInputOutcome> {
    for (let attempt = 1; ; attempt++) {
      const instance = await this.getInstance(ref);
      if (!instance) return 'absent';
      if (!isOwnedBy(instance.labels, owner)) return 'not-ours';
      const items = (instance.metadata?.items ?? []).filter((item) => item.key !== key);
      try {
        const [op] = await this.api(`set ${key} on ${ref.name}`, () =>
          this.instances.setMetadata({ project: this.options.project, zone: ref.zone, instance: ref.name, metadataResource: { fingerprint: instance.metadata?.fingerprint, items: [...items, { key, value }] } }),
        );
        await this.waitForOperation(ref.zone, operationName(op), () => undefined);
        return 'set';
      } catch (err) {
        if (isNotFound(err)) return 'absent';
        if (!isConditionNotMet(err) || attempt >= METADATA_WRITE_ATTEMPTS) throw err;
      }
    }
  }

  /**
   * GCE records a preemption as a `compute.instances.preempted` operation on the
   * instance. One list per zone among `refs` (per PREEMPTION_LOOKUP_NAMES of them),
   * filtered on that type and on the instances' own target links, so the answer holds
   * only their operations: GCE keeps a zone's operations for about two weeks, and a
   * busy project's preemptions would otherwise be read again at every look.
   */
  async preemptedAmong(refs: ResourceRef[]): Promise<ResourceRef[]> {
    const { project } = this.options;
    const preemptedTargets = new Set<string>();
    const lookups = [...groupBy(refs, (r) => r.zone)].flatMap(([zone, inZone]) => chunks(inZone, PREEMPTION_LOOKUP_NAMES).map((some) => ({ zone, names: some.map((r) => r.name) })));
    await Promise.all(
      lookups.map(({ zone, names }) =>
        this.api(`preempted operations in ${zone}`, async () => {
          for await (const op of this.operations.listAsync({ project, zone, filter: operationsOn(names, [OPERATION_PREEMPTED]) }, NO_AUTOPAGINATE)) {
            const name = op.targetLink?.slice(op.targetLink.lastIndexOf('/') + 1);
            if (name) preemptedTargets.add(`${zone}/${name}`);
          }
        }),
      ),
    );
    return refs.filter((r) => preemptedTargets.has(`${r.zone}/${r.name}`));
  }
}

/**
 * How long the agent waits after its trainer exited for a release before it powers the VM
 * off. A run that keeps a failed attempt for `keepSeconds` (workflows/run/keep.ts) makes
 * it wait at least that long, so the kept VM stays up for inspection, and no longer: the
 * timer starts at the exit, before the run heard of it, so a kept VM stops paying for
 * compute by its keep-until at the latest even when neither the run nor the reaper acts.
 */
export function powerOffAfterSeconds(graceSeconds: number, keepSeconds: number | undefined): number {
  return Math.max(graceSeconds, keepSeconds ?? 0);
}

/**
 * When a VM's own time limit stops it, as its scheduling says (the v1 API has no
 * `resourceStatus.scheduling.terminationTimestamp`): its `terminationTime`, or a
 * flex-start VM's `maxRunDuration` counted from its last start.
 */
export function timeLimitMs(instance: Pick<IInstance, 'scheduling' | 'lastStartTimestamp'>): number | undefined {
  const at = Date.parse(instance.scheduling?.terminationTime ?? '');
  if (Number.isFinite(at)) return at;
  const seconds = Number(instance.scheduling?.maxRunDuration?.seconds ?? Number.NaN);
  const started = Date.parse(instance.lastStartTimestamp ?? '');
  return Number.isFinite(seconds) && Number.isFinite(started) ? started + seconds * 1000 : undefined;
}

/** The `sterna-keep-until` label, when a VM carries a well-formed one. */
function keepOf(labels: Record<string, string> | null | undefined): Pick<FleetResource, 'keepUntil'> {
  const keepUntil = keepUntilFromLabels(labels);
  return keepUntil === undefined ? {} : { keepUntil };
}

/**
 * `scheduling.terminationTime` for a VM created now: the run's `releaseBy`, within what
 * GCE accepts (a retried create may come after it; the VM then lives 40 s).
 */
export function terminationTime(releaseBy: string | undefined, nowMs: number): string {
  const wanted = releaseBy === undefined ? Number.NaN : Date.parse(releaseBy);
  const at = Number.isFinite(wanted) ? Math.min(Math.max(wanted, nowMs + MIN_TIME_LIMIT_MS), nowMs + MAX_TIME_LIMIT_MS) : nowMs + MAX_TIME_LIMIT_MS;
  return new Date(at).toISOString();
}

/**
 * The flex-start VM's scheduling: GCE stops it (STOP, so the ledger reads its
 * lastStopTimestamp, as for spot) at `maxRunDuration`, which counts from when it starts
 * running; `maxRunDuration` and `terminationTime` exclude each other, and the run
 * duration is already bounded by the run's VM-side limit (run/flex-start.ts).
 */
function flexStartScheduling(request: ProvisionRequest): NonNullable<IInstance['scheduling']> {
  const terms = request.flexStart;
  if (!terms) throw new Error(`flex-start offer for ${request.name} without flex-start terms`);
  return {
    provisioningModel: 'FLEX_START',
    instanceTerminationAction: 'STOP',
    onHostMaintenance: 'TERMINATE',
    automaticRestart: false,
    maxRunDuration: { seconds: String(terms.maxRunDurationSeconds) },
  };
}

/** How long the request may wait for capacity, and no reservation: flex-start capacity comes from DWS. */
function flexStartFields(request: ProvisionRequest): Pick<IInstance, 'params' | 'reservationAffinity'> {
  const terms = request.flexStart;
  if (!terms) throw new Error(`flex-start offer for ${request.name} without flex-start terms`);
  return { params: { requestValidForDuration: { seconds: String(terms.maxWaitSeconds) } }, reservationAffinity: { consumeReservationType: 'NO_RESERVATION' } };
}

/** A promise's outcome, never a rejection: every create of a gang is let settle before the gang answers. */
function settle<T>(promise: Promise<T>): Promise<PromiseSettledResult<T>> {
  return promise.then(
    (value) => ({ status: 'fulfilled', value }),
    (reason: unknown) => ({ status: 'rejected', reason }),
  );
}

function abortIfAsked(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new Error('provision cancelled');
}

function operationName(op: unknown): string {
  const name = (op as { latestResponse?: { name?: string }; name?: string }).latestResponse?.name ?? (op as { name?: string }).name;
  if (!name) throw new Error('GCE returned an operation without a name');
  return name;
}

function translateOperationErrors(zone: string, errors: { code?: string | null; message?: string | null }[], flexStart: boolean): Error {
  const codes = errors.map((e) => e.code ?? '');
  const message = errors.map((e) => `${e.code}: ${e.message}`).join('; ');
  // A flex-start insert stays open while its request waits; a capacity error ends the wait.
  if (flexStart && codes.some((c) => STOCKOUT_CODES.has(c))) {
    return failure(FailureType.FlexStartWaitExpired, `no flex-start (DWS) capacity in ${zone} within the request's wait: ${message}`, { zone, codes });
  }
  if (codes.some((c) => STOCKOUT_CODES.has(c))) return failure(FailureType.Stockout, `no capacity in ${zone}: ${message}`, { zone, codes });
  if (codes.some((c) => QUOTA_CODES.has(c))) return failure(FailureType.QuotaExceeded, `quota exceeded for ${zone}: ${message}`, { zone, codes });
  return new Error(`GCE operation failed in ${zone}: ${message}`);
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  return Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));
}
