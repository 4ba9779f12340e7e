/**
 * Where the worker's memory is, from the process metrics it exposes (prom-client's
 * defaults on its Sterna metrics port), sampled beside its RSS: the main thread's V8 heap
 * (activities, the cloud clients; used and reserved) and the memory V8 knows of outside it
 * (`external`: buffers). The rest of RSS is what the main thread's heap statistics cannot
 * see: the workflow thread's own V8 heap (where the cached runs live, sdk-typescript
 * #1843), the Temporal SDK core, and malloc's own.
 */
import { ExpositionSampler } from './exposition';

export interface WorkerMemory {
  /** The main thread's largest V8 heap in use (MB) in one sample. */
  heapUsedMaxMb: number;
  /** The largest V8 heap reserved (MB). */
  heapTotalMaxMb: number;
  /** The largest external memory (MB). */
  externalMaxMb: number;
  /** The sample with the largest RSS, split: the main thread's heap reserved, external, and the rest (the workflow thread's heap, core, malloc) (MB). */
  atPeakRss: { rssMb: number; heapTotalMb: number; externalMb: number; otherMb: number };
  samples: number;
}

const MB = 2 ** 20;

/** One reading of the process metrics in an exposition text; undefined without them. */
export function memoryOf(text: string): { rssMb: number; heapUsedMb: number; heapTotalMb: number; externalMb: number } | undefined {
  const value = (name: string) => {
    const m = new RegExp(`^${name} (\\d+(?:\\.\\d+)?(?:e\\+?\\d+)?)$`, 'm').exec(text);
    return m ? Number(m[1]) / MB : undefined;
  };
  const rssMb = value('process_resident_memory_bytes');
  const heapUsedMb = value('nodejs_heap_size_used_bytes');
  const heapTotalMb = value('nodejs_heap_size_total_bytes');
  const externalMb = value('nodejs_external_memory_bytes');
  if (rssMb === undefined || heapUsedMb === undefined || heapTotalMb === undefined || externalMb === undefined) return undefined;
  return { rssMb, heapUsedMb, heapTotalMb, externalMb };
}

type Reading = NonNullable<ReturnType<typeof memoryOf>>;

function foldMemory(f: WorkerMemory | undefined, m: Reading): WorkerMemory {
  const atPeakRss = !f || m.rssMb > f.atPeakRss.rssMb ? { rssMb: m.rssMb, heapTotalMb: m.heapTotalMb, externalMb: m.externalMb, otherMb: m.rssMb - m.heapTotalMb - m.externalMb } : f.atPeakRss;
  return {
    heapUsedMaxMb: Math.max(f?.heapUsedMaxMb ?? 0, m.heapUsedMb),
    heapTotalMaxMb: Math.max(f?.heapTotalMaxMb ?? 0, m.heapTotalMb),
    externalMaxMb: Math.max(f?.externalMaxMb ?? 0, m.externalMb),
    atPeakRss,
    samples: (f?.samples ?? 0) + 1,
  };
}

/** The worker's memory split, sampled every 5 s from its Sterna metrics port; figures in whole MB. */
export class MemorySampler extends ExpositionSampler<Reading, WorkerMemory> {
  constructor(metricsPort: number, everyMs = 5000) {
    super(metricsPort, memoryOf, foldMemory, everyMs);
  }

  override figures(): WorkerMemory | undefined {
    const f = super.figures();
    if (!f) return undefined;
    const r = (x: number) => Math.round(x);
    return { heapUsedMaxMb: r(f.heapUsedMaxMb), heapTotalMaxMb: r(f.heapTotalMaxMb), externalMaxMb: r(f.externalMaxMb), atPeakRss: { rssMb: r(f.atPeakRss.rssMb), heapTotalMb: r(f.atPeakRss.heapTotalMb), externalMb: r(f.atPeakRss.externalMb), otherMb: r(f.atPeakRss.otherMb) }, samples: f.samples };
  }
}
