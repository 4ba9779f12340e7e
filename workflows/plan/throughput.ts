/**
 * How fast each accelerator trains, relative to one another: the default is each GPU's
 * peak dense FP16/BF16 tensor throughput from NVIDIA's datasheets (TFLOPS, without
 * sparsity). Peak compute overstates the gap between generations for memory-bound
 * models, so a spec may give its own figures (`time.relativeThroughput`), and a plan
 * says which figure it used. Counts scale linearly (data parallel, one node).
 */
export const PEAK_DENSE_TFLOPS: Readonly<Record<string, number>> = {
  'nvidia-tesla-k80': 8.7, // FP32 only (no tensor cores): the board's two GPUs together
  'nvidia-tesla-p100': 18.7, // FP16, no tensor cores
  'nvidia-tesla-t4': 65,
  'nvidia-l4': 121,
  'nvidia-tesla-v100': 125,
  'nvidia-tesla-a100': 312,
  'nvidia-a100-80gb': 312,
  'nvidia-h100-80gb': 989,
};

export type ThroughputSource = 'spec' | 'datasheet';

/** Throughput of `count` of `accelerator`, and where the figure came from; undefined when none is known. */
export function throughputOf(accelerator: string, count: number, overrides: Readonly<Record<string, number>> = {}): { value: number; source: ThroughputSource } | undefined {
  const own = overrides[accelerator];
  if (own !== undefined) return { value: own * count, source: 'spec' };
  const peak = PEAK_DENSE_TFLOPS[accelerator];
  return peak === undefined ? undefined : { value: peak * count, source: 'datasheet' };
}
