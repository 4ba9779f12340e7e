/**
 * The emulator's durable state: everything a restart must not lose. Times are real
 * wall-clock epoch milliseconds (as GCE's timestamps are); emulated durations are
 * derived with the time factor (see clock.ts).
 */
import type { ProvisioningModel } from '../workflows/api';
import type { GpuTelemetry } from './gpu-telemetry';
import type { TimeLimit } from './instance-request';
import type { SyntheticGuestRecord } from './synthetic-guest';

export const InstanceStatus = {
  /** A flex-start VM waiting for capacity from the Dynamic Workload Scheduler (GCE's own status for it). */
  Pending: 'PENDING',
  Provisioning: 'PROVISIONING',
  Staging: 'STAGING',
  Running: 'RUNNING',
  Stopping: 'STOPPING',
  Terminated: 'TERMINATED',
} as const;
export type InstanceStatus = (typeof InstanceStatus)[keyof typeof InstanceStatus];

export const OperationStatus = { Pending: 'PENDING', Running: 'RUNNING', Done: 'DONE' } as const;
export type OperationStatus = (typeof OperationStatus)[keyof typeof OperationStatus];

export const OperationType = {
  Insert: 'insert',
  Delete: 'delete',
  Stop: 'stop',
  Preempted: 'compute.instances.preempted',
  SetMetadata: 'setMetadata',
} as const;
export type OperationType = (typeof OperationType)[keyof typeof OperationType];

/** Why an instance is leaving RUNNING. */
export const StopReason = { Preempted: 'preempted', Deleted: 'deleted', Stopped: 'stopped', TimeLimit: 'time-limit' } as const;
export type StopReason = (typeof StopReason)[keyof typeof StopReason];

export interface GpuRequest {
  type: string;
  count: number;
}

/** The local process group that is the VM's guest. */
export interface VmProcess {
  /** The instance's own directory: the startup script's cwd and HOME. */
  dir: string;
  pid?: number;
  /** Process group id (= pid of the detached wrapper). */
  pgid?: number;
  /** The per-VM metadata server's port, kept across emulator restarts. */
  metadataPort?: number;
  startedAtMs?: number;
  /** When the emulator saw the group gone. */
  exitedAtMs?: number;
  /** The startup script's exit status, when it exited on its own (or after SIGTERM). */
  exitCode?: number;
  /** Set when the emulator had to SIGKILL the group. */
  killed?: boolean;
  /** A synthetic guest's state (no process): see synthetic-guest.ts. */
  synthetic?: SyntheticGuestRecord;
}

/** What runs inside a VM: its startup script as a real process group, or a simulated agent. */
export type GuestKind = 'process' | 'synthetic';

export interface InstanceRecord {
  project: string;
  zone: string;
  region: string;
  name: string;
  id: string;
  creationMs: number;
  status: InstanceStatus;
  /** The request body as accepted (fields not modelled are echoed back from here). */
  resource: Record<string, unknown>;
  machineType: string;
  gpus?: GpuRequest;
  /** This VM's own stand-in nvidia-smi reading (admin API), over the emulator's default. */
  gpuTelemetry?: GpuTelemetry;
  provisioningModel: ProvisioningModel;
  /** STOP or DELETE, for spot VMs and time limits (`scheduling.instanceTerminationAction`). */
  terminationAction: 'STOP' | 'DELETE';
  /** `scheduling.maxRunDuration` or `scheduling.terminationTime`, if set. */
  timeLimit?: TimeLimit;
  /** When the time limit ends this RUNNING VM (epoch ms); cleared when it stops. */
  terminationAtMs?: number;
  /** Absent in older state files: a process guest. */
  guest?: GuestKind;
  labels: Record<string, string>;
  metadata: Record<string, string>;
  guestAttributesEnabled: boolean;
  /** namespace -> key -> value */
  guestAttributes: Record<string, Record<string, string>>;
  preempted: boolean;
  /** Scheduled status changes (epoch ms): the next one is re-armed after a restart. */
  stagingAtMs?: number;
  runningAtMs?: number;
  lastStartMs?: number;
  lastStopMs?: number;
  stoppingSinceMs?: number;
  /** When SIGKILL is due for a STOPPING instance. */
  killAtMs?: number;
  stopReason?: StopReason;
  /** A preemption asked for in the future (admin API `afterSeconds`). */
  preemptAtMs?: number;
  insertOperation: string;
  /** FLEX_START: the request's wait for capacity (epoch ms); cleared once capacity is granted. */
  flexStart?: FlexStartRequest;
  /**
   * The regional GPU quota metric this VM's GPUs count against, chosen at insert (a spot VM
   * counts against the standard metric when its region has no preemptible quota, as on
   * GCE). Absent in older state files and on VMs without GPUs: capacity.ts `metricOf`.
   */
  quotaMetric?: string;
  /** Delete operations that finish when the instance is gone. */
  pendingOperations?: string[];
  vm: VmProcess;
}

export interface FlexStartRequest {
  requestedAtMs: number;
  /** The end of the wait window (`params.requestValidForDuration`): the insert fails then. */
  expiresAtMs: number;
  /** When the flex-start model would grant it, if the zone's flex pool has room then. */
  grantAtMs: number;
}

/** The flex-start wait model (admin API `POST flex-start`): how long each request waits for the pool. */
export interface FlexStartSettings {
  seed: number;
  /** Emulated seconds a request waits before the pool can grant it: exactly this (`fixed`) or exponential with this mean. */
  meanWaitSeconds: number;
  distribution: 'fixed' | 'exponential';
  /** Draws made so far: the next wait comes from the seed and this count, so a restart continues the sequence. */
  draws: number;
}

export interface OperationErrorItem {
  code: string;
  message: string;
  errorDetails?: unknown[];
}

export interface OperationRecord {
  id: string;
  name: string;
  project: string;
  zone: string;
  operationType: OperationType;
  targetLink: string;
  targetId: string;
  status: OperationStatus;
  progress: number;
  insertMs: number;
  startMs?: number;
  endMs?: number;
  statusMessage?: string;
  user: string;
  error?: OperationErrorItem[];
  httpErrorStatusCode?: number;
  httpErrorMessage?: string;
  /** An operation that fails on its own schedule (stockout, quota) completes at this time. */
  failAtMs?: number;
}

export interface BillingSegment {
  startMs: number;
  endMs?: number;
  /** Whole-instance USD/hour in force during the segment. */
  pricePerHour: number;
  /** The time factor in force (emulated seconds = real seconds x factor). */
  timeFactor: number;
}

export interface BillingRecord {
  project: string;
  zone: string;
  name: string;
  instanceId: string;
  labels: Record<string, string>;
  machineType: string;
  accelerator?: string;
  acceleratorCount: number;
  provisioningModel: ProvisioningModel;
  segments: BillingSegment[];
}

export interface CapacityOverride {
  spot?: number;
  onDemand?: number;
  /** The zone's flex-start (DWS) pool, GPUs. */
  flexStart?: number;
}

export interface EmulatorState {
  version: 1;
  createdMs: number;
  /** Real time at which emulated time (and trace tick 0) began. */
  epochMs: number;
  instances: InstanceRecord[];
  operations: OperationRecord[];
  billing: BillingRecord[];
  /** zone -> accelerator -> GPUs allocatable (admin overrides of the catalog default). */
  capacity: Record<string, Record<string, CapacityOverride>>;
  /** project -> region -> metric -> limit (admin overrides of the catalog default). */
  quotas: Record<string, Record<string, Record<string, number>>>;
  /** project -> metric -> limit: project-wide quotas (GPUS_ALL_REGIONS) set through the admin API, over the emulator's default. */
  projectQuotas?: Record<string, Record<string, number>>;
  /** Random spot model: zones currently without spot capacity. */
  spotDownZones: string[];
  /** What every VM's stand-in nvidia-smi reports unless told otherwise (absent: the default). */
  gpuTelemetry?: GpuTelemetry;
  /** The flex-start wait model; absent: the defaults (flex-model.ts). */
  flexStart?: FlexStartSettings;
  /** Buckets declared through the admin API or the `buckets` option, by name (storage-api.ts). */
  buckets?: Record<string, BucketSettings>;
}

/** A local bucket's metadata as the storage API serves it (storage-api.ts). */
export interface BucketSettings {
  /** A GCS location: a region (ASIA-SOUTHEAST1), a dual-region (NAM4) or a multi-region (US). */
  location?: string;
  /** The caller may not read the bucket's metadata (403), nor anything in it. */
  forbidden?: boolean;
  /** The caller may read the bucket's objects but not create or delete any (testIamPermissions grants get and list only). */
  readOnly?: boolean;
}
