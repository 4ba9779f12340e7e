/**
 * A provider that feeds Sterna's metrics from what its activities see, and otherwise is
 * the provider itself: provisions (attempts, failures, latency), observations and fleet
 * reads (GPU readings, preemptions), releases (cost, GPU-hours, detection latency).
 *
 * What a resource is (its run, zone, model, accelerator and price) is learnt when this
 * worker provisions it, or from a fleet listing (the run only); a resource another worker
 * provisioned is counted with accelerator "unknown" and no cost.
 */
import { type AgentSnapshot, type AgentValues, gangSize, namedFailureOf, type ResourceRef } from '../../workflows/api';
import type { Providers } from '../index';
import type { ComputeProvider } from '../providers/provider';
import type { SternaMetrics } from './registry';

interface Known {
  run?: string;
  zone: string;
  model?: string;
  accelerator?: string;
  gpus?: number;
  pricePerHour?: number;
  counted?: boolean;
  preempted?: boolean;
}

/** Resources remembered at most; the oldest are forgotten first. */
const MEMORY_LIMIT = 20_000;

export class ResourceMemory {
  private readonly known = new Map<string, Known>();

  get(ref: ResourceRef): Known {
    const key = `${ref.zone}/${ref.name}`;
    let entry = this.known.get(key);
    if (!entry) {
      entry = { zone: ref.zone };
      this.known.set(key, entry);
      if (this.known.size > MEMORY_LIMIT) this.known.delete(this.known.keys().next().value!);
    }
    return entry;
  }

  forget(ref: ResourceRef): void {
    this.known.delete(`${ref.zone}/${ref.name}`);
  }
}

function labels(k: Known) {
  return { zone: k.zone, model: k.model ?? 'unknown', accelerator: k.accelerator ?? 'unknown' };
}

export function meteredProvider<P extends ComputeProvider>(provider: P, metrics: SternaMetrics, memory = new ResourceMemory()): P {
  const gpuSeen = (ref: ResourceRef, values: Pick<AgentValues, 'gpu'>) => {
    if (!values.gpu) return;
    const k = memory.get(ref);
    const where = { run: k.run ?? ref.name, zone: ref.zone };
    metrics.gpuUtilisation.set(where, values.gpu.utilisation);
    metrics.gpuMemoryUsed.set(where, values.gpu.memoryUsedMiB);
  };
  const preemptionSeen = (ref: ResourceRef) => {
    const k = memory.get(ref);
    if (k.preempted) return;
    k.preempted = true;
    metrics.preemptions.inc(labels(k));
  };
  const hooks: Partial<ComputeProvider> = {
    async provision(request, onProgress, signal) {
      const k = memory.get({ backend: request.offer.backend, name: request.name, zone: request.offer.zone });
      Object.assign(k, { run: request.agent.runId, model: request.offer.provisioningModel, accelerator: request.offer.accelerator, gpus: request.offer.acceleratorCount * gangSize(request.offer), pricePerHour: request.offer.pricePerHour });
      const started = Date.now();
      try {
        const result = await provider.provision(request, onProgress, signal);
        metrics.provisionSeconds.observe({ zone: k.zone, model: k.model!, outcome: 'running' }, (Date.now() - started) / 1000);
        // A retried create that adopts its own resource is the same attempt.
        if (!k.counted) metrics.attempts.inc(labels(k));
        k.counted = true;
        return result;
      } catch (err) {
        const named = namedFailureOf(err);
        if (named) {
          metrics.provisionSeconds.observe({ zone: k.zone, model: k.model!, outcome: named.type }, (Date.now() - started) / 1000);
          metrics.provisionFailures.inc({ ...labels(k), failure: named.type });
        }
        throw err;
      }
    },
    async observe(ref): Promise<AgentSnapshot> {
      const snapshot = await provider.observe(ref);
      gpuSeen(ref, snapshot);
      if (snapshot.preempted) preemptionSeen(ref);
      return snapshot;
    },
    async readAgent(ref) {
      const values = await provider.readAgent(ref);
      gpuSeen(ref, values);
      return values;
    },
    async preemptedAmong(refs) {
      const preempted = await provider.preemptedAmong(refs);
      for (const ref of preempted) preemptionSeen(ref);
      return preempted;
    },
    async listFleet() {
      const resources = await provider.listFleet();
      for (const r of resources) {
        if (r.workflowId) memory.get(r.ref).run ??= r.workflowId;
        if (r.preempted) preemptionSeen(r.ref);
        if (r.agent) gpuSeen(r.ref, r.agent);
      }
      return resources;
    },
    async release(request, onProgress) {
      const asked = Date.now();
      const result = await provider.release(request, onProgress);
      const k = memory.get(request.ref);
      if (result.outcome === 'deleted' && result.startedAt && result.stoppedAt) {
        const hours = Math.max(0, Date.parse(result.stoppedAt) - Date.parse(result.startedAt)) / 3_600_000;
        if (k.pricePerHour !== undefined) metrics.cost.inc(labels(k), k.pricePerHour * hours);
        if (k.gpus !== undefined) metrics.gpuHours.inc(labels(k), k.gpus * hours);
      }
      if (k.preempted && result.stoppedAt) metrics.detectionSeconds.observe({ zone: k.zone }, Math.max(0, asked - Date.parse(result.stoppedAt)) / 1000);
      const where = { run: k.run ?? request.ref.name, zone: request.ref.zone };
      metrics.gpuUtilisation.remove(where);
      metrics.gpuMemoryUsed.remove(where);
      memory.forget(request.ref);
      return result;
    },
  };
  return new Proxy(provider, {
    get(target, property, receiver) {
      if (typeof property === 'string' && Object.hasOwn(hooks, property)) return hooks[property as keyof ComputeProvider];
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Every provider of the worker, metered (one memory: a resource is in one backend). */
export function meteredProviders(providers: Providers, metrics: SternaMetrics): Providers {
  const memory = new ResourceMemory();
  const out: Providers = {};
  for (const [backend, provider] of Object.entries(providers) as [keyof Providers, ComputeProvider | undefined][]) {
    if (provider) (out as Record<string, ComputeProvider>)[backend] = meteredProvider(provider, metrics, memory);
  }
  return out;
}
