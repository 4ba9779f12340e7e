/**
 * What a slice of a GPU costs: its share of the node's GPU price. Pure.
 *
 * The share rule:
 *   MIG partition `<c>g.<m>gb`   c / 7 of a GPU (its compute slices out of the GPU's 7)
 *   time-shared by N             1 / N of a GPU (or of a partition, when both)
 *   whole GPUs                   count GPUs
 * and a pod pays that many GPUs' worth of its node: node price x share / node GPUs.
 *
 * Compute slices rather than "1 / partitions per GPU": a 3g.40gb partition is 3/7 of the
 * GPU although only two fit on one (the seventh slice idles), so a run pays for what it
 * uses and two such runs do not pay for the idle slice. A time-shared GPU is billed as if
 * every client slot were taken; a client may get more of the GPU when others are idle.
 */
import { computeSlices, MIG_COMPUTE_SLICES, type GpuSlice } from './gpu-slices';

/** How many whole GPUs `count` devices of this slicing are worth (count for whole GPUs). */
export function gpuEquivalent(count: number, slice: GpuSlice): number {
  const partition = slice.partition ? computeSlices(slice.partition) / MIG_COMPUTE_SLICES : 1;
  const shared = slice.maxSharedClients ? 1 / slice.maxSharedClients : 1;
  return count * partition * shared;
}

/** A pod's share of its node's price: `gpuEquivalent` over the node's physical GPUs. */
export function nodeShare(count: number, slice: GpuSlice, nodeGpus: number): number {
  return nodeGpus > 0 ? gpuEquivalent(count, slice) / nodeGpus : 1;
}
