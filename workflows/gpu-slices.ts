/**
 * Fractions of a GPU on GKE: a multi-instance GPU (MIG) partition, or a time-shared GPU.
 * Pure: the spec checks, the offer's description and the stand-in kubelet's allocatable
 * all read these tables.
 *
 * How GKE exposes them (cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi and
 * .../timesharing-gpus): a node pool is created with a partition size or a sharing
 * strategy; its nodes carry the labels below, and the device plugin advertises every
 * partition (or every share of a time-shared GPU) as one `nvidia.com/gpu` (GKE's default
 * "single" strategy: never `nvidia.com/mig-<profile>`). A pod selects the pool with the
 * labels and asks for `nvidia.com/gpu: 1`; a time-shared container may ask for at most
 * one (more is refused at admission with UnexpectedAdmissionError).
 */

/** GKE's node labels for GPU partitions and GPU sharing. */
export const SliceLabel = {
  Partition: 'cloud.google.com/gke-gpu-partition-size',
  SharingStrategy: 'cloud.google.com/gke-gpu-sharing-strategy',
  MaxSharedClients: 'cloud.google.com/gke-max-shared-clients-per-gpu',
} as const;

/** The sharing strategies a spec may name (GKE's label value). */
export const SharingStrategy = { TimeSharing: 'time-sharing' } as const;
export type SharingStrategy = (typeof SharingStrategy)[keyof typeof SharingStrategy];

/** GKE's bounds on `maxSharedClientsPerGpu`. */
export const MAX_SHARED_CLIENTS = { min: 2, max: 48 } as const;

/**
 * The MIG profiles of each MIG-capable GPU, and how many of each fit on one GPU
 * (NVIDIA MIG user guide, "Supported MIG profiles"). A profile `<c>g.<m>gb` takes c of
 * the GPU's 7 compute slices.
 */
const MIG_PROFILES: Record<string, Record<string, number>> = {
  'nvidia-tesla-a100': { '1g.5gb': 7, '2g.10gb': 3, '3g.20gb': 2, '4g.20gb': 1, '7g.40gb': 1 },
  'nvidia-a100-80gb': { '1g.10gb': 7, '2g.20gb': 3, '3g.40gb': 2, '4g.40gb': 1, '7g.80gb': 1 },
  'nvidia-h100-80gb': { '1g.10gb': 7, '1g.20gb': 4, '2g.20gb': 3, '3g.40gb': 2, '4g.40gb': 1, '7g.80gb': 1 },
  'nvidia-h100-mega-80gb': { '1g.10gb': 7, '1g.20gb': 4, '2g.20gb': 3, '3g.40gb': 2, '4g.40gb': 1, '7g.80gb': 1 },
  'nvidia-h200-141gb': { '1g.18gb': 7, '1g.35gb': 4, '2g.35gb': 3, '3g.71gb': 2, '4g.71gb': 1, '7g.141gb': 1 },
};

/** Compute slices in a whole MIG-capable GPU. */
export const MIG_COMPUTE_SLICES = 7;

/** What a spec's accelerator, an offer or a node says about slicing (all absent: whole GPUs). */
export interface GpuSlice {
  /** A MIG profile such as `1g.10gb`. */
  partition?: string;
  /** Present for a time-shared GPU: how many containers share each GPU (or each partition). */
  maxSharedClients?: number;
}

export function isMigCapable(accelerator: string): boolean {
  return Object.hasOwn(MIG_PROFILES, accelerator);
}

/** The profiles `accelerator` can be partitioned into (empty when it cannot). */
export function migProfiles(accelerator: string): string[] {
  return isMigCapable(accelerator) ? Object.keys(MIG_PROFILES[accelerator]) : [];
}

/** How many partitions of `partition` one GPU of `accelerator` holds; undefined when not a profile of it. */
export function partitionsPerGpu(accelerator: string, partition: string): number | undefined {
  return isMigCapable(accelerator) && Object.hasOwn(MIG_PROFILES[accelerator], partition) ? MIG_PROFILES[accelerator][partition] : undefined;
}

/** The compute slices (of 7) a profile takes: the `<c>` of `<c>g.<m>gb`. */
export function computeSlices(partition: string): number {
  return Number(/^(\d)g\./.exec(partition)?.[1] ?? MIG_COMPUTE_SLICES);
}

/** How many `nvidia.com/gpu` one physical GPU advertises under this slicing (1 for a whole GPU). */
export function devicesPerGpu(accelerator: string, slice: GpuSlice): number {
  const partitions = slice.partition ? (partitionsPerGpu(accelerator, slice.partition) ?? 1) : 1;
  return partitions * (slice.maxSharedClients ?? 1);
}

export function isSliced(slice: GpuSlice): boolean {
  return slice.partition !== undefined || slice.maxSharedClients !== undefined;
}

/** Two slicings are the same pool shape (both whole GPUs, or the same partition and sharing). */
export function sameSlice(a: GpuSlice, b: GpuSlice): boolean {
  return a.partition === b.partition && a.maxSharedClients === b.maxSharedClients;
}

/** The slice's part of an offer's key: empty for whole GPUs. */
export function sliceKey(slice: GpuSlice): string {
  return `${slice.partition ? `/mig-${slice.partition}` : ''}${slice.maxSharedClients !== undefined ? `/shared-${slice.maxSharedClients}` : ''}`;
}

/** A slice in words, for the ledger and messages: `MIG 1g.10gb`, `time-shared by 4`; empty for whole GPUs. */
export function describeSlice(slice: GpuSlice): string {
  const parts: string[] = [];
  if (slice.partition) parts.push(`MIG ${slice.partition}`);
  if (slice.maxSharedClients !== undefined) parts.push(`time-shared by ${slice.maxSharedClients}`);
  return parts.join(', ');
}

/** What a spec asks of one accelerator entry (the spec's own field names). */
export interface SliceRequest {
  type: string;
  count: number;
  partition?: string;
  sharing?: SharingStrategy;
  maxSharedClients?: number;
}

/**
 * Why this accelerator entry cannot be asked of `backend`, each with the field it names,
 * or nothing. GCE attaches whole GPUs only; a slice is one device per container.
 */
export function sliceProblems(entry: SliceRequest, backend: string): { field: string; message: string }[] {
  const problems: { field: string; message: string }[] = [];
  const sliced = entry.partition !== undefined || entry.sharing !== undefined;
  if (sliced && backend !== 'gke') {
    const field = entry.partition !== undefined ? 'partition' : 'sharing';
    problems.push({ field, message: `GPU slices (MIG partitions, time-sharing) exist on backend gke only; backend ${backend} attaches whole GPUs: drop ${field}, or use backend "gke"` });
    return problems;
  }
  if (entry.partition !== undefined) {
    const profiles = migProfiles(entry.type);
    if (profiles.length === 0) {
      problems.push({ field: 'partition', message: `${entry.type} cannot be partitioned (MIG); partitions exist on ${Object.keys(MIG_PROFILES).join(', ')}` });
    } else if (!profiles.includes(entry.partition)) {
      problems.push({ field: 'partition', message: `${entry.partition} is not a MIG profile of ${entry.type}; use one of ${profiles.join(', ')}` });
    }
  }
  if (entry.maxSharedClients !== undefined && entry.sharing === undefined) {
    problems.push({ field: 'maxSharedClients', message: `maxSharedClients applies to a time-shared GPU; add "sharing": "${SharingStrategy.TimeSharing}"` });
  }
  if (sliced && entry.count !== 1) {
    problems.push({ field: 'count', message: `a GPU slice is one device per pod (GKE admits at most one shared nvidia.com/gpu per container); use count 1` });
  }
  return problems;
}

/** An offer's accelerators for the ledger: `nvidia-l4 x1`, `nvidia-a100-80gb x1 (MIG 1g.10gb)`. */
export function describeShape(offer: GpuSlice & { accelerator: string; acceleratorCount: number }): string {
  const slice = describeSlice(offer);
  return `${offer.accelerator} x${offer.acceleratorCount}${slice ? ` (${slice})` : ''}`;
}
