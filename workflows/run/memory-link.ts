/**
 * The run's link to the project's memories: it reads the zone memory (placement's prior;
 * an activity, so replay reads the same) and tells the zone and throughput memories what
 * released attempts showed (run/effects.ts decides what), in one activity beside the
 * run's next step. Both are courtesies: a run that cannot reach them goes on without.
 */
import { proxyActivities, type ActivityOptions } from '@temporalio/workflow';
import type { ThroughputSample } from '../plan/measured';
import type { RunSpec } from '../spec';
import type { Backend } from '../types';
import type { ZoneActivities } from '../zones/contract';
import type { ZoneMemory, ZoneOutcome } from '../zones/memory';
import type { MemoryActivities } from './memory-contract';

// A worker built without the activities (NotFoundError) answers at once: the run goes on.
const COURTESY: ActivityOptions = { startToCloseTimeout: '30 seconds', retry: { initialInterval: '1 second', maximumAttempts: 3, nonRetryableErrorTypes: ['NotFoundError'] } };

export class MemoryLink {
  private readonly acts = proxyActivities<MemoryActivities>(COURTESY);
  private readonly zones = proxyActivities<ZoneActivities>(COURTESY);
  /** Tells still in flight: a preempted run's replacement does not wait for them. */
  private pending: Promise<unknown>[] = [];

  /** The project's zone memory for this run's accelerators (undefined: not reachable). */
  readZones(spec: RunSpec): Promise<ZoneMemory | undefined> {
    const accelerators = spec.resources.accelerators.map((a) => a.type);
    return this.zones.readZoneMemory({ backend: spec.backend, accelerators }).catch(() => undefined);
  }

  /** Tells both memories, without waiting. Failures are dropped. */
  tell(backend: Backend, outcomes: ZoneOutcome[], samples: ThroughputSample[]): void {
    this.pending.push(this.acts.recordReleasedAttempts({ backend, outcomes, samples }).catch(() => undefined));
  }

  /** Waits for every tell in flight (before the run continues as new or ends). */
  async settled(): Promise<void> {
    const pending = this.pending;
    this.pending = [];
    await Promise.all(pending);
  }
}
