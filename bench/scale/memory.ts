/**
 * Where the worker's memory is, from the process metrics it exposes (prom-client's
 * defaults on its Sterna metrics port), sampled beside its RSS: the main thread's V8 heap
 * (activities, the cloud clients; used and reserved) and the memory V8 knows of outside it
 * (`external`: buffers), and the workflow threads' V8 heaps (where the cached runs live,
 * sdk-typescript #1843; `sterna_thread_heap_*`, activities/metrics/thread-heaps.ts). The
 * rest of RSS is the Temporal SDK core, malloc's own, and code. Beside them, the main
 * thread's time in V8's garbage collector by kind (prom-client's `nodejs_gc_duration_seconds`).
 */
import { ExpositionSampler } from './exposition';

export interface WorkerMemory {
  /** The main thread's largest V8 heap in use (MB) in one sample. */
  heapUsedMaxMb: number;
  /** The largest V8 heap reserved (MB). */
  heapTotalMaxMb: number;
  /** The largest external memory (MB). */
  externalMaxMb: number;
  /** The workflow threads' V8 heap in use (MB), summed over the threads, at most in one sample. */
  threadsHeapUsedMaxMb: number;
  /** The sample with the largest RSS, split: the main thread's heap reserved, external, the workflow threads' heaps reserved, and the rest (core, malloc, code) (MB). */
  atPeakRss: { rssMb: number; heapTotalMb: number; externalMb: number; threadsHeapTotalMb: number; otherMb: number };
  /** The main thread's seconds in V8's garbage collector over the measurement, by kind (major, minor, incremental, weakcb). */
  gcSeconds: Record<string, number>;
  samples: number;
}

/** The cumulative GC seconds by kind at the first and the latest reading. */
type Folded = Omit<WorkerMemory, 'gcSeconds'> & { gcFirst: Record<string, number>; gcLast: Record<string, number> };

const MB = 2 ** 20;
const NUMBER = String.raw`\d+(?:\.\d+)?(?:e\+?\d+)?`;

/** One reading of the process metrics in an exposition text; undefined without them. */
export function memoryOf(text: string): { rssMb: number; heapUsedMb: number; heapTotalMb: number; externalMb: number; threadsHeapUsedMb: number; threadsHeapTotalMb: number; gcSeconds: Record<string, number> } | undefined {
  const value = (name: string) => {
    const m = new RegExp(`^${name} (${NUMBER})$`, 'm').exec(text);
    return m ? Number(m[1]) / MB : undefined;
  };
  // Summed over the threads (`{thread="N"}`); none when the worker has no workflow thread yet.
  const sum = (name: string) => [...text.matchAll(new RegExp(`^${name}\\{[^}]*\\} (${NUMBER})$`, 'gm'))].reduce((total, m) => total + Number(m[1]) / MB, 0);
  const rssMb = value('process_resident_memory_bytes');
  const heapUsedMb = value('nodejs_heap_size_used_bytes');
  const heapTotalMb = value('nodejs_heap_size_total_bytes');
  const externalMb = value('nodejs_external_memory_bytes');
  if (rssMb === undefined || heapUsedMb === undefined || heapTotalMb === undefined || externalMb === undefined) return undefined;
  const gcSeconds = Object.fromEntries([...text.matchAll(new RegExp(`^nodejs_gc_duration_seconds_sum\\{kind="(\\w+)"\\} (${NUMBER})$`, 'gm'))].map((m) => [m[1], Number(m[2])]));
  return { rssMb, heapUsedMb, heapTotalMb, externalMb, threadsHeapUsedMb: sum('sterna_thread_heap_used_bytes'), threadsHeapTotalMb: sum('sterna_thread_heap_total_bytes'), gcSeconds };
}

type Reading = NonNullable<ReturnType<typeof memoryOf>>;

function foldMemory(f: Folded | undefined, m: Reading): Folded {
  const atPeakRss = !f || m.rssMb > f.atPeakRss.rssMb ? { rssMb: m.rssMb, heapTotalMb: m.heapTotalMb, externalMb: m.externalMb, threadsHeapTotalMb: m.threadsHeapTotalMb, otherMb: m.rssMb - m.heapTotalMb - m.externalMb - m.threadsHeapTotalMb } : f.atPeakRss;
  return {
    heapUsedMaxMb: Math.max(f?.heapUsedMaxMb ?? 0, m.heapUsedMb),
    heapTotalMaxMb: Math.max(f?.heapTotalMaxMb ?? 0, m.heapTotalMb),
    externalMaxMb: Math.max(f?.externalMaxMb ?? 0, m.externalMb),
    threadsHeapUsedMaxMb: Math.max(f?.threadsHeapUsedMaxMb ?? 0, m.threadsHeapUsedMb),
    atPeakRss,
    gcFirst: f?.gcFirst ?? m.gcSeconds,
    gcLast: m.gcSeconds,
    samples: (f?.samples ?? 0) + 1,
  };
}

/** The worker's memory split, sampled every 5 s from its Sterna metrics port; figures in whole MB. */
export class MemorySampler extends ExpositionSampler<Reading, Folded> {
  constructor(metricsPort: number, everyMs = 5000) {
    super(metricsPort, memoryOf, foldMemory, everyMs);
  }

  measured(): WorkerMemory | undefined {
    const f = this.figures();
    if (!f) return undefined;
    const r = (x: number) => Math.round(x);
    const p = f.atPeakRss;
    return {
      heapUsedMaxMb: r(f.heapUsedMaxMb),
      heapTotalMaxMb: r(f.heapTotalMaxMb),
      externalMaxMb: r(f.externalMaxMb),
      threadsHeapUsedMaxMb: r(f.threadsHeapUsedMaxMb),
      atPeakRss: { rssMb: r(p.rssMb), heapTotalMb: r(p.heapTotalMb), externalMb: r(p.externalMb), threadsHeapTotalMb: r(p.threadsHeapTotalMb), otherMb: r(p.otherMb) },
      gcSeconds: Object.fromEntries(Object.entries(f.gcLast).map(([kind, s]) => [kind, Math.round((s - (f.gcFirst[kind] ?? 0)) * 10) / 10])),
      samples: f.samples,
    };
  }
}
