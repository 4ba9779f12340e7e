/**
 * Sterna's own Prometheus metrics (prom-client), kept by the worker: its activities and
 * providers feed them (metered-provider.ts), Temporal visibility feeds the per-run and
 * per-phase gauges at scrape time (visibility.ts), and other worker-side code may feed
 * the team queue gauge (`setTeamQueueLength`). Never fed from workflow code: a workflow
 * replays, and its metrics would count twice.
 *
 * One registry per worker process (`sternaMetrics()`); tests may build their own.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ThreadHeaps } from './thread-heaps';

/** Provisioning waits for RUNNING: seconds to many minutes. */
const PROVISION_BUCKETS = [1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800];
/** From a preempted resource's stop to its run releasing it. */
const DETECTION_BUCKETS = [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];

export class SternaMetrics {
  readonly registry = new Registry();

  /** Runs by SternaPhase, from visibility (every run the namespace holds, open or closed). */
  readonly runs = new Gauge({ name: 'sterna_runs', help: 'Training runs by phase (SternaPhase), from Temporal visibility', labelNames: ['phase'], registers: [this.registry] });
  readonly runCost = new Gauge({ name: 'sterna_run_cost_usd', help: 'Cost so far of each open run (SternaCostUsd), USD', labelNames: ['run', 'team'], registers: [this.registry] });
  readonly runGpuMean = new Gauge({ name: 'sterna_run_gpu_utilisation_mean_percent', help: "Each open run's GPU utilisation averaged over its training (SternaGpuUtil), percent", labelNames: ['run'], registers: [this.registry] });

  readonly attempts = new Counter({ name: 'sterna_attempts_total', help: 'Attempts provisioned (resources running), by zone, provisioning model and accelerator', labelNames: ['zone', 'model', 'accelerator'], registers: [this.registry] });
  readonly provisionFailures = new Counter({ name: 'sterna_provision_failures_total', help: 'Provisions that ended with a named failure (Stockout, QuotaExceeded...)', labelNames: ['zone', 'model', 'accelerator', 'failure'], registers: [this.registry] });
  readonly preemptions = new Counter({ name: 'sterna_preemptions_total', help: 'Resources seen preempted (once each), by zone, provisioning model and accelerator', labelNames: ['zone', 'model', 'accelerator'], registers: [this.registry] });
  readonly cost = new Counter({ name: 'sterna_cost_usd_total', help: 'Cost of released attempts at their offer price, USD', labelNames: ['zone', 'model', 'accelerator'], registers: [this.registry] });
  readonly gpuHours = new Counter({ name: 'sterna_gpu_hours_total', help: 'GPU-hours of released attempts (running time x GPUs)', labelNames: ['zone', 'model', 'accelerator'], registers: [this.registry] });
  readonly provisionSeconds = new Histogram({ name: 'sterna_provision_seconds', help: 'Provisioning latency: from the create to the resource running (or the named failure)', labelNames: ['zone', 'model', 'outcome'], buckets: PROVISION_BUCKETS, registers: [this.registry] });
  readonly detectionSeconds = new Histogram({ name: 'sterna_preemption_detection_seconds', help: 'From the provider stopping a preempted resource to its run releasing it', labelNames: ['zone'], buckets: DETECTION_BUCKETS, registers: [this.registry] });
  readonly gpuUtilisation = new Gauge({ name: 'sterna_gpu_utilisation_percent', help: "Each live attempt's GPU utilisation at its agent's last reading (nvidia-smi), percent", labelNames: ['run', 'zone'], registers: [this.registry] });
  readonly gpuMemoryUsed = new Gauge({ name: 'sterna_gpu_memory_used_mib', help: "Each live attempt's GPU memory in use at its agent's last reading, MiB (summed over its GPUs)", labelNames: ['run', 'zone'], registers: [this.registry] });
  readonly teamQueue = new Gauge({ name: 'sterna_team_queue_length', help: 'Runs waiting in each team queue for admission', labelNames: ['team'], registers: [this.registry] });
  /** Which Node.js the worker runs on (1 for its version): what a deployment, and the tests, check it by. */
  readonly node = new Gauge({ name: 'sterna_node_info', help: "The Node.js version of the worker's process", labelNames: ['version', 'major'], registers: [this.registry] });

  constructor() {
    this.node.set({ version: process.version, major: process.versions.node.split('.')[0] }, 1);
  }

  /** How many runs of `team` wait for admission now: for the team queues to call as they change. */
  setTeamQueueLength(team: string, length: number): void {
    this.teamQueue.set({ team }, length);
  }

  /** The exposition text, as `/metrics` serves it. */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}

let shared: SternaMetrics | undefined;

/**
 * The worker process's registry, with prom-client's process and Node.js metrics beside
 * Sterna's: the V8 heap (`nodejs_heap_size_used_bytes`, by space), memory outside it
 * (`nodejs_external_memory_bytes`), GC pauses and event loop lag. A worker's footprint is
 * bound by its heap limit and its cache of runs (docs/workers.md): these say which part grows,
 * with the workflow threads' heaps (thread-heaps.ts), where the cached runs live.
 */
export function sternaMetrics(): SternaMetrics {
  if (!shared) {
    shared = new SternaMetrics();
    collectDefaultMetrics({ register: shared.registry });
    registerThreadHeaps(shared.registry);
  }
  return shared;
}

/**
 * `sterna_thread_heap_used_bytes` and `sterna_thread_heap_total_bytes` by `thread`: the V8
 * heap of each of the process's worker threads (the SDK's workflow threads), read at scrape.
 */
export function registerThreadHeaps(registry: Registry, heaps = new ThreadHeaps()): void {
  let reading: Promise<Awaited<ReturnType<ThreadHeaps['read']>>> | undefined;
  // prom-client collects a scrape's metrics at once: one question to the threads serves both gauges.
  const read = () =>
    (reading ??= heaps.read().finally(() => {
      reading = undefined;
    }));
  const gauge = (name: string, help: string, pick: (h: { usedBytes: number; totalBytes: number }) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['thread'],
      registers: [registry],
      async collect() {
        const threads = await read();
        this.reset();
        for (const t of threads) this.set({ thread: t.threadId }, pick(t));
      },
    });
  gauge('sterna_thread_heap_used_bytes', "V8 heap in use in each of the worker's threads (the workflow threads, where the cached runs live; nodejs_heap_* is the main thread's)", (h) => h.usedBytes);
  gauge('sterna_thread_heap_total_bytes', "V8 heap reserved by each of the worker's threads", (h) => h.totalBytes);
}
