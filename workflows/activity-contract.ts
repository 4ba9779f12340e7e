/**
 * The contract between the trainingRun workflow and its activities: the activities'
 * signatures and the plain data they exchange. It lives beside the workflow so that
 * dependencies point one way (activities -> workflows); the workflow imports only types.
 */
import type { Owner } from './naming';
import type { PriceStamp } from './pricing-book/contract';
import type { AgentSnapshot, Backend, CheckpointRef, Offer, ProvisioningModel, ResourceRef, RunningWindow, WorkdirRef } from './types';
import type { ZoneMemory } from './zones/memory';
import type { Finding } from './checks';
import type { RunSpec } from './spec';

/** What the agent on the VM (or in the pod) is given: metadata attributes or env vars. */
export interface AgentInputs {
  runId: string;
  attempt: number;
  argv: string[];
  env: Record<string, string>;
  /** Secret references by environment name (workflows/secrets.ts); values are fetched in the VM or pod. */
  secrets?: Record<string, string>;
  datasets: { uri: string; path: string }[];
  /** The packed working directory, unpacked into the work directory before the command runs there. */
  workdir?: WorkdirRef;
  checkpointUri: string;
  resumeFrom?: CheckpointRef;
  pollSeconds: number;
  /** This run's data cache in the attempt's region: staged datasets are kept there and reused. */
  dataCacheUri?: string;
  /** A node of a gang (resources.nodes > 1): its rank and where rank 0 listens (run/gang.ts). */
  gang?: GangInputs;
  /** The spec's setup commands, run once before the command (absent: none). */
  setup?: string[];
}

/** Where a gang's nodes meet: rank 0's internal address (absent on rank 0 itself, which reads its own) and port. */
export interface GangInputs {
  rank: number;
  nodes: number;
  masterAddr?: string;
  masterPort: number;
}

/** What a run needs, from its spec: used to list offers. */
export interface CapacityRequest {
  /** A slice (GKE): `partition` a MIG profile, `sharing` time-sharing (with `maxSharedClients`, exactly that many). */
  accelerators: { type: string; count: number; partition?: string; sharing?: 'time-sharing'; maxSharedClients?: number }[];
  machineType?: string;
  regions?: { allow?: string[]; deny?: string[] };
  zones?: { allow?: string[]; deny?: string[] };
  provisioningModels: ProvisioningModel[];
  /** A gang: offers are for this many nodes at once (priced and quota-checked for all of them); absent means 1. */
  nodes?: number;
}

/** A zone that offers the accelerator but that the price book cannot price: reported, never dropped silently. */
export interface UnpricedZone {
  zone: string;
  accelerator: string;
  machineType: string;
}

/** What findCapacity found: the priced offers, the zones it could not price, and the prices' stamp. */
export interface CapacityFound {
  offers: Offer[];
  unpriced: UnpricedZone[];
  prices: PriceStamp;
  /** The project's zone memory for the run's accelerators, when asked (`zoneMemoryFor`) and readable. */
  zoneMemory?: ZoneMemory;
}

export interface ProvisionRequest {
  name: string;
  offer: Offer;
  /** Who the resource belongs to; only a resource carrying exactly these labels is adopted. */
  owner: Owner;
  /** The owner labels plus the spec's cost-attribution labels. */
  labels: Record<string, string>;
  agent: AgentInputs;
  diskSizeGb: number;
  /** Container image: the Job's on GKE; on GCE the agent runs setup and the command in it. Absent: on the host. */
  image?: string;
  /**
   * ISO time after which the resource stops by itself even if nothing releases it
   * (run/resource-limit.ts); absent: the provider's longest limit.
   */
  releaseBy?: string;
  /** FLEX_START offers only: how long the request may wait for capacity, and how long the VM may then run. */
  flexStart?: FlexStartTerms;
}

export interface FlexStartTerms {
  /** GCE `params.requestValidForDuration` (GKE: how long the ProvisioningRequest may stay unprovisioned). */
  maxWaitSeconds: number;
  /** GCE `scheduling.maxRunDuration` (GKE `maxRunDurationSeconds`), at most 7 days. */
  maxRunDurationSeconds: number;
}

export interface ProvisionResult {
  ref: ResourceRef;
  /** True when a resource with this name already existed and was ours (a retried create). */
  adopted: boolean;
  window: RunningWindow;
  /**
   * True when the worker also asked for the fleet observer of the resource's backend (it
   * watches what was just created): the run need not ask in an activity of its own.
   */
  observerAsked?: boolean;
}

export interface ReleaseRequest {
  ref: ResourceRef;
  /** Only a resource labelled with exactly this owner is ever deleted. */
  owner: Owner;
  /**
   * True when the create may not have settled (cancelled or failed mid-call, worker lost):
   * a resource that is absent now may still appear, so release watches for it until no
   * create of it can land any more (GCE: its inserts' server deadline has passed) before
   * it reports the resource absent, and deletes it if it appears meanwhile.
   */
  createMayBeInFlight: boolean;
  /**
   * When the run last saw the resource start. A release retried after its delete landed
   * finds nothing; it then reads when the resource stopped from the provider's own
   * record (GCE's operations since this time), so the ledger ends where billing did.
   */
  startedAt?: string;
}

/** What release found: deleted ours, found nothing, or found a resource that is not ours (left alone). */
export const ReleaseOutcome = { Deleted: 'deleted', Absent: 'absent', NotOurs: 'not-ours' } as const;
export type ReleaseOutcome = (typeof ReleaseOutcome)[keyof typeof ReleaseOutcome];

export interface ReleaseResult extends RunningWindow {
  outcome: ReleaseOutcome;
  /** How a create that may have been in flight was settled (absent when it was not). */
  createWatch?: CreateWatch;
}

/**
 * A release that watched for a create that may still land: `landed-late`, the resource
 * appeared while it watched (and was then released like any other); `deadline-passed`,
 * nothing appeared by `until`, after which no create of it can land.
 */
export interface CreateWatch {
  outcome: 'landed-late' | 'deadline-passed';
  /** ISO time after which no create of the resource can land. */
  until: string;
  /** landed-late: how long after the release began the resource appeared, in seconds. */
  afterSeconds?: number;
}

export interface SternaActivities {
  /** Histories from before the price book hold a bare Offer[] here; the driver reads both. */
  /** With `zoneMemoryFor` (accelerator types) it also reads the zone memory: one activity where runs used two. */
  findCapacity(input: { backend: Backend; request: CapacityRequest; zoneMemoryFor?: string[] }): Promise<CapacityFound>;
  provision(input: ProvisionRequest): Promise<ProvisionResult>;
  release(input: ReleaseRequest): Promise<ReleaseResult>;
  /** One direct look at a resource and its agent: the run's fallback when the fleet observer is silent. */
  observe(input: { ref: ResourceRef }): Promise<AgentSnapshot>;
  /** Asks the resource's agent for a final checkpoint and a stop, so the run moves before a flex-start cut. */
  askMove(input: { ref: ResourceRef }): Promise<MoveAnswer>;
  /** Hands a training attempt's agent a new checkpoint interval (workflows/run/live-interval.ts). */
  setCheckpointInterval(input: SetCheckpointIntervalRequest): Promise<{ outcome: SetAgentInputOutcome }>;
}

/** Whether the ask reached the agent's resource; `detail` says why not (the cut's stop grace is then the fallback). */
export interface MoveAnswer {
  delivered: boolean;
  detail?: string;
}

export interface SetCheckpointIntervalRequest {
  ref: ResourceRef;
  /** Only a resource labelled with exactly this owner is changed. */
  owner: Owner;
  seconds: number;
}

/** The resource's input was set; the resource is gone; it is not ours; the backend cannot change a running agent's inputs. */
export type SetAgentInputOutcome = 'set' | 'absent' | 'not-ours' | 'unsupported';

/** One bucket as the storage activity answers: its location, or why it has none. */
export interface BucketAnswer {
  bucket: string;
  location?: string;
  problem?: string;
}

/**
 * One dataset URI as the check answers: `exists` true or false when the storage said so
 * (`problem` then says what is missing), absent when it could not tell (`problem` says why).
 */
export interface DatasetAnswer {
  uri: string;
  exists?: boolean;
  problem?: string;
}

/** The storage API's word on the buckets of a run's datasets (activities/storage). */
export interface StorageActivities {
  /** Each bucket's location (GCS `buckets.get`), or why it is unknown; never throws for one bucket's error. */
  locateBuckets(input: { buckets: string[] }): Promise<BucketAnswer[]>;
  /** Whether each dataset URI names an object or a prefix the VMs can stage (activities/storage/datasets.ts); never throws for one URI's error. */
  checkDatasets(input: { uris: string[] }): Promise<DatasetAnswer[]>;
}

/** The checks before a run (activities/check): one finding per thing checked (workflows/checks.ts). */
export interface CheckActivities {
  /** Undefined: this worker checks nothing (it was given nothing to check with). */
  checkBeforeRun(input: { spec: RunSpec }): Promise<Finding[] | undefined>;
}

/** The last lines an attempt's agent shipped to the run's log (activities/logs). */
export interface LogTailRequest {
  /** The spec's `checkpoint.uri`: the run's log lives under it. */
  checkpointUri: string;
  workflowId: string;
  attempt: number;
  lines: number;
}

export interface LogActivities {
  /** `stream text` lines, oldest first; none when the attempt shipped none or the log cannot be read. */
  attemptLogTail(input: LogTailRequest): Promise<string[]>;
}
