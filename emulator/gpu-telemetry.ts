/**
 * The GPUs a VM's guest sees, as NVIDIA's `nvidia-smi` reports them. An emulated VM has
 * no GPU, so it gets a stand-in `nvidia-smi` on its PATH (the same way the stand-in
 * kubelet imitates GKE) that prints what the emulator was told through the admin API:
 * a default for every VM, or one instance's own reading. The agent's parsing of the
 * output (activities/agent/sterna-agent.sh) is the production path.
 */
import { z } from 'zod';
import type { GpuRequest } from './types';

export const GpuTelemetrySchema = z.strictObject({
  /** utilization.gpu of every GPU of the VM, percent. */
  utilisation: z.number().int().min(0).max(100),
  /** memory.used as a share of memory.total (default 0.5). */
  memoryUsedFraction: z.number().min(0).max(1).optional(),
});
export type GpuTelemetry = z.infer<typeof GpuTelemetrySchema>;

/** What a VM reports until told otherwise: a busy GPU, as most training keeps it. */
export const DEFAULT_GPU_TELEMETRY: GpuTelemetry = { utilisation: 90, memoryUsedFraction: 0.5 };

/** memory.total (MiB) as nvidia-smi prints it for each GCE accelerator type. */
const MEMORY_MIB: Record<string, number> = {
  'nvidia-l4': 23034,
  'nvidia-tesla-t4': 15360,
  'nvidia-tesla-v100': 16384,
  'nvidia-tesla-p100': 16384,
  'nvidia-tesla-p4': 7680,
  'nvidia-tesla-a100': 40960,
  'nvidia-a100-80gb': 81920,
  'nvidia-h100-80gb': 81559,
  'nvidia-h100-mega-80gb': 81559,
};

/** One `utilization.gpu, memory.used, memory.total` line per GPU (csv, noheader, nounits). */
export function nvidiaSmiCsv(gpus: GpuRequest, reading: GpuTelemetry): string {
  const total = MEMORY_MIB[gpus.type] ?? 16384;
  const used = Math.round(total * (reading.memoryUsedFraction ?? DEFAULT_GPU_TELEMETRY.memoryUsedFraction!));
  return Array.from({ length: gpus.count }, () => `${reading.utilisation}, ${used}, ${total}\n`).join('');
}

/** The query the agent runs; the stand-in answers that one and refuses anything else. */
export const NVIDIA_SMI_QUERY = ['--query-gpu=utilization.gpu,memory.used,memory.total', '--format=csv,noheader,nounits'] as const;

/** The stand-in: asks the VM's host (its metadata server's private endpoint) for the reading. */
export const NVIDIA_SMI_SOURCE = `#!/bin/bash
# Written by the Sterna GCE emulator: a stand-in for NVIDIA's nvidia-smi that reports
# what the emulator's admin API was told (POST /emulator/v1/gpu-telemetry).
query=0 format=0
for arg in "$@"; do
  case "$arg" in
    ${NVIDIA_SMI_QUERY[0]}) query=1 ;;
    ${NVIDIA_SMI_QUERY[1]}) format=1 ;;
    *) echo "nvidia-smi (Sterna emulator stand-in): only ${NVIDIA_SMI_QUERY.join(' ')} is supported" >&2; exit 2 ;;
  esac
done
[ "$query$format" = 11 ] || { echo "nvidia-smi (Sterna emulator stand-in): give ${NVIDIA_SMI_QUERY.join(' ')}" >&2; exit 2; }
exec curl -sf -H 'Metadata-Flavor: Google' "http://\${GCE_METADATA_HOST}/emulator/v1/guest/nvidia-smi"
`;
