/**
 * How the worker's process is started: by `npm run worker` (workers/start.ts) and by the
 * scale benchmark, whose "default tuning" is this. Measured at 2,000 training runs on one
 * worker (bench/README.md, rows M to P):
 * - a V8 heap limit: with Node's default (about 4 GB here) V8 let some 330 MB of garbage
 *   pile up between collections, at no saving in CPU;
 * - a young generation of 4 MB semi-spaces instead of 16, in each of the worker's two
 *   isolates (main and workflow thread): up to 48 MB less committed for new objects (its
 *   effect on the peak, measured, is within the peak's run-to-run spread);
 * - glibc malloc with two arenas and large blocks mapped on their own: the SDK core's
 *   native memory otherwise spread over eight arenas of 64 MB, mostly free but resident;
 * - each isolate's heap allowed to grow to 1.3 x what the last full collection kept
 *   (V8's own factor when memory is short) rather than V8's dynamic factor of up to 4:
 *   the cached runs are live and long-lived, so the headroom was 1.6 x the live heaps at
 *   2,000 runs (row Q6).
 * A limit is also a crash limit, so the workflow cache is sized from it (workers/worker.ts):
 * past that many cached runs a worker replays instead of growing.
 */

/** The worker's V8 heap limit unless STERNA_WORKER_HEAP_MB says otherwise. */
export const DEFAULT_WORKER_HEAP_MB = 1024;

/** Heap a cached run holds, its share of garbage included (bench/README.md: 0.40 MB measured). */
const CACHED_RUN_HEAP_MB = 0.4;
/** Heap the worker needs besides its cached runs (modules, clients, the observer's memory). */
const BASE_HEAP_MB = 200;

/** V8's young generation: each of its two semi-spaces at most this many MB. */
const SEMI_SPACE_MB = 4;

/** Each isolate's heap grows to (100 + this) % of what survived the last full collection. */
const HEAP_GROWING_PERCENT = 30;

/** glibc malloc settings (the user's own win): two arenas, blocks of 128 KiB and more mapped alone. */
const MALLOC_ENV = { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '131072' } as const;

export interface WorkerProcess {
  nodeFlags: string[];
  env: NodeJS.ProcessEnv;
}

/** Node flags and environment for the worker's process, from the launcher's environment. */
export function workerProcess(env: NodeJS.ProcessEnv): WorkerProcess {
  const raw = env.STERNA_WORKER_HEAP_MB;
  const heapMb = raw === undefined || raw === '' ? DEFAULT_WORKER_HEAP_MB : Number(raw);
  if (!Number.isInteger(heapMb) || heapMb < 256) {
    throw new Error(`STERNA_WORKER_HEAP_MB must be a whole number of MB, at least 256 (got ${JSON.stringify(raw)}); about ${BASE_HEAP_MB} MB plus ${CACHED_RUN_HEAP_MB} MB per run kept in memory`);
  }
  return { nodeFlags: [`--max-old-space-size=${heapMb}`, `--max-semi-space-size=${SEMI_SPACE_MB}`, `--heap-growing-percent=${HEAP_GROWING_PERCENT}`], env: { ...MALLOC_ENV, ...env } };
}

/** Runs a worker with this heap limit keeps cached: what fits beside its base, at least 10. */
export function cachedRunsFor(heapLimitMb: number): number {
  return Math.max(10, Math.floor((heapLimitMb - BASE_HEAP_MB) / CACHED_RUN_HEAP_MB));
}
