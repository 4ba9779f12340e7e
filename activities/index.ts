/**
 * The trainingRun activities, built by a factory that takes its providers, so tests pass
 * emulator-backed clients and production passes real ones. Each activity is one step
 * the web UI shows; the long ones (provision, release) heartbeat on a timer.
 */
import { ApplicationFailure, Context, CancelledFailure } from '@temporalio/activity';
import type { PriceBook } from '../config/price-book';
import { type Backend, INTERVAL_ATTRIBUTE, type SternaActivities, type ZoneMemory } from '../workflows/api';
import type { ComputeProvider } from './providers/provider';
import type { AdmissionGate } from './teams/admission-gate';

export type { SternaActivities } from '../workflows/api';

/** Well inside the shortest heartbeat timeout the workflow sets (10 s). */
const HEARTBEAT_EVERY_MS = 3000;

export interface Providers {
  gce?: ComputeProvider;
  gke?: ComputeProvider;
}

export interface ActivityOptions {
  /** The price book of a task queue (activities/pricing); without it each provider prices from its own book. */
  priceBook?: (taskQueue: string) => Promise<PriceBook>;
  /**
   * Asks for the fleet observer of a backend (activities/fleet), called by provision once
   * the resource exists; resolves whether it was asked. Without it runs ask for themselves.
   */
  askObserver?: (backend: Backend) => Promise<boolean>;
  /** Reads the zone memory (activities/zones) for findCapacity's `zoneMemoryFor`; without it findCapacity answers none. */
  readZoneMemory?: (backend: Backend, accelerators: readonly string[]) => Promise<ZoneMemory>;
  /** With a namespace per team: refuses a provision its caller's team has not admitted (activities/teams/admission-gate.ts). */
  admissionGate?: AdmissionGate;
}

export function createActivities(providers: Providers, options: ActivityOptions = {}): SternaActivities {
  const providerFor = (backend: string): ComputeProvider => {
    const provider = providers[backend as keyof Providers];
    if (!provider) throw new Error(`this worker has no ${backend} provider configured; see docs/workers.md`);
    return provider;
  };

  /**
   * Runs `body` with a heartbeat on a timer, not only on progress: a GCE operation can
   * take longer than the heartbeat timeout, and a silent wait would look like a dead
   * worker and cause a spurious retry. The heartbeat also delivers cancellation.
   */
  async function heartbeating<T>(body: (progress: (details: unknown) => void) => Promise<T>): Promise<T> {
    const context = Context.current();
    let last: unknown;
    const timer = setInterval(() => context.heartbeat(last), HEARTBEAT_EVERY_MS);
    try {
      return await body((details) => {
        last = details;
        context.heartbeat(details);
      });
    } finally {
      clearInterval(timer);
    }
  }

  return {
    async findCapacity({ backend, request, zoneMemoryFor }) {
      const provider = providerFor(backend);
      // A courtesy read: placement without the memory is placement as before.
      const memory = zoneMemoryFor && options.readZoneMemory ? options.readZoneMemory(backend, zoneMemoryFor).catch(() => undefined) : undefined;
      const prices = options.priceBook ? await options.priceBook(Context.current().info.taskQueue) : undefined;
      const found = await provider.findCapacity(request, prices);
      const zoneMemory = await memory;
      return zoneMemory ? { ...found, zoneMemory } : found;
    },

    async provision(request) {
      const provider = providerFor(request.offer.backend);
      await options.admissionGate?.(request);
      const { cancellationSignal } = Context.current();
      try {
        const result = await heartbeating((progress) => provider.provision(request, (status) => progress({ status }), cancellationSignal));
        // A courtesy: a worker that cannot reach the observer leaves the asking to the run.
        const observerAsked = options.askObserver ? await options.askObserver(request.offer.backend).catch(() => false) : false;
        return observerAsked ? { ...result, observerAsked } : result;
      } catch (err) {
        // The run's release watches for a create that may still land (the insert's server deadline).
        if (cancellationSignal.aborted) throw new CancelledFailure('provision cancelled; an insert it sent may land until its server deadline, and the release watches for it');
        throw err;
      }
    },

    async release(request) {
      return heartbeating((progress) => {
        progress({ releasing: request.ref.name });
        return providerFor(request.ref.backend).release(request, (status) => progress({ releasing: request.ref.name, status }));
      });
    },

    async observe({ ref }) {
      return providerFor(ref.backend).observe(ref);
    },

    async askMove({ ref }) {
      const provider = providerFor(ref.backend);
      return provider.askMove ? provider.askMove(ref) : { delivered: false, detail: `the ${ref.backend} backend cannot ask its agent yet` };
    },

    async setCheckpointInterval({ ref, owner, seconds }) {
      const provider = providerFor(ref.backend);
      if (!provider.setAgentInput) return { outcome: 'unsupported' };
      return { outcome: await provider.setAgentInput(ref, owner, INTERVAL_ATTRIBUTE, String(seconds)) };
    },

    async keep(request) {
      const provider = providerFor(request.ref.backend);
      // The spec refuses keepOnFailure where a backend cannot keep (GKE): this says so if one slips by.
      if (!provider.keep) throw ApplicationFailure.nonRetryable(`the ${request.ref.backend} backend cannot keep a failed attempt; it is released instead`, 'KeepUnsupported');
      return provider.keep(request);
    },
  };
}
