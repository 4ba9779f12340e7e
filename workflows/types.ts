/**
 * Plain data shared by the workflow and the activities. Everything here is JSON-plain
 * (no Map, Set, Date or class) because it crosses Temporal's payload boundary and is
 * carried through continue-as-new.
 */

/**
 * How a VM is bought: spot (cheap, preemptible), on demand (dear, certain), or flex-start
 * (Dynamic Workload Scheduler: discounted, waits for capacity, never preempted, runs at
 * most 7 days).
 */
export const ProvisioningModel = { Spot: 'SPOT', OnDemand: 'STANDARD', FlexStart: 'FLEX_START' } as const;
export type ProvisioningModel = (typeof ProvisioningModel)[keyof typeof ProvisioningModel];

export const Backend = { Gce: 'gce', Gke: 'gke' } as const;
export type Backend = (typeof Backend)[keyof typeof Backend];

/** One place a run could go: a zone, a machine shape, a pricing model, and its price. */
export interface Offer {
  backend: Backend;
  zone: string;
  region: string;
  /** GCE accelerator type name, e.g. `nvidia-l4`. */
  accelerator: string;
  acceleratorCount: number;
  machineType: string;
  provisioningModel: ProvisioningModel;
  /** Whole-instance price in USD per hour; for a gang, of all its nodes together. */
  pricePerHour: number;
  /** The on-demand price of the same shape in the same zone, for the savings ledger. */
  onDemandPricePerHour: number;
  /** False when the region's quota cannot fit the request; kept so the status can say why. */
  quotaAvailable: boolean;
  /** When the prices were read (the price book's date); absent in runs from before the price book. */
  pricesAsOf?: string;
  /** `billing` (Cloud Billing Catalog) or `catalog` (bundled, config/catalog.ts). */
  priceSource?: 'billing' | 'catalog';
  /** FLEX_START only: how long the request is expected to wait for capacity (seconds; an estimate). */
  expectedWaitSeconds?: number;
  /** A gang of this many nodes (run/gang.ts); absent means one. Prices and quota count every node. */
  nodes?: number;
  /** GKE: a MIG partition of the GPU (e.g. `1g.10gb`); the price is the slice's share (workflows/pricing-slices.ts). */
  partition?: string;
  /** GKE: a time-shared GPU, shared by this many pods; the price is the slice's share. */
  maxSharedClients?: number;
}

/** Where a created resource lives; enough to observe and release it. */
export interface ResourceRef {
  backend: Backend;
  /** Idempotent name: derived from the workflow id and attempt number. */
  name: string;
  zone: string;
  /** GKE only: the namespace of the Job. */
  namespace?: string;
  /** A gang of this many nodes, named `<name>-n<rank>` (run/gang.ts); absent means one resource called `name`. */
  nodes?: number;
}

/** What the VM-side agent and the provider say about a running attempt. */
export interface AgentSnapshot {
  /** The resource's lifecycle as the provider sees it. */
  lifecycle: 'pending' | 'running' | 'stopping' | 'terminated' | 'gone';
  /** The provider reclaimed the capacity (GCE `instance/preempted`, GKE DisruptionTarget). */
  preempted: boolean;
  /** The agent's `sterna/phase`: starting, staging, pulling (an image, GCE), setup, training, uploading, exited, failed. */
  phase?: string;
  stagedBytes?: number;
  /** Bytes copied from the run's data cache in the region instead of from the source. */
  reusedBytes?: number;
  totalBytes?: number;
  step?: number;
  /** The trainer's own report of the steps it will run (`<step>/<total>` in its progress file). */
  totalSteps?: number;
  /** The GPUs' last reading (nvidia-smi on the VM), when it has any. */
  gpu?: GpuReading;
  /** The last complete checkpoint the agent uploaded. */
  checkpoint?: CheckpointRef;
  /** Milliseconds the agent took to upload that checkpoint (its measured cost). */
  checkpointMs?: number;
  /** The checkpoint interval (seconds) the agent last handed the trainer. */
  checkpointInterval?: number;
  /** The trainer's exit code, once it exited and the agent finished uploading. */
  exitCode?: number;
  /** The agent stopped the trainer because the run asked it to move (`sterna/moving`, run/flex-cut.ts). */
  moving?: boolean;
  /** The provider ended the resource at its run duration (GKE: its flex-start node was shut down or is gone). */
  cut?: boolean;
  /** Phase `setup`: the setup command running (or the one that failed), 1-based, of how many. */
  setupStep?: { step: number; of: number };
  /** A setup command's own exit code, when it failed (the agent's exit is then 71, SetupFailed). */
  setupExitCode?: number;
}

/** What the agent read from nvidia-smi: the mean over the VM's GPUs, memory summed. */
export interface GpuReading {
  /** Mean utilisation of the VM's GPUs, percent (0-100). */
  utilisation: number;
  memoryUsedMiB: number;
  memoryTotalMiB: number;
  gpus: number;
}

export interface CheckpointRef {
  uri: string;
  sha256: string;
  step: number;
}

/** A packed working directory in the run's bucket (client/workdir): what the agent unpacks on every attempt. */
export interface WorkdirRef {
  /** gs://<bucket>/<prefix>/workdirs/<sha256>.tar.gz */
  uri: string;
  /** Of the .tar.gz's bytes: the agent checks it before unpacking. */
  sha256: string;
}

/** When a resource started and stopped running, for the cost ledger (ISO 8601 times). */
export interface RunningWindow {
  startedAt?: string;
  stoppedAt?: string;
}
