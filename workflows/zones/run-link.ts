/**
 * How a run reaches the zone memory. Both ways are courtesies: a run that cannot reach
 * the memory places as it would without one.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { RunState } from '../run/state';
import type { RunSpec } from '../spec';
import type { ZoneActivities } from './contract';
import { outcomesToTell } from './from-run';
import type { ZoneMemory, ZoneOutcome } from './memory';

export function zoneMemoryActivities() {
  // A worker built without the zone activities (NotFoundError) answers at once: no memory.
  return proxyActivities<ZoneActivities>({ startToCloseTimeout: '30 seconds', retry: { initialInterval: '1 second', maximumAttempts: 3, nonRetryableErrorTypes: ['NotFoundError'] } });
}

/**
 * The run's link to its zone memory: reads it at placement (an activity, so replay reads
 * the same) and tells it how each newly released attempt ended.
 */
export class ZoneLink {
  private readonly acts = zoneMemoryActivities();
  /** Attempts whose outcome the memory has been told (those released before this execution were, or predate it). */
  private readonly told: Set<number>;

  constructor(
    private readonly spec: RunSpec,
    private readonly state: RunState,
  ) {
    this.told = new Set(state.attempts.filter((a) => a.released).map((a) => a.attempt));
  }

  /** The project's zone memory for this run's accelerators: placement's prior. */
  async read(): Promise<ZoneMemory | undefined> {
    const accelerators = this.spec.resources.accelerators.map((a) => a.type);
    return this.acts.readZoneMemory({ backend: this.spec.backend, accelerators }).catch(() => undefined);
  }

  /** The accelerators whose memory findCapacity reads as it finds offers (one activity instead of two). */
  readWithCapacity(): string[] {
    return this.spec.resources.accelerators.map((a) => a.type);
  }

  /** How each attempt released since the last take ended (stockout, preemption, lifetime), each taken once. */
  take(): ZoneOutcome[] {
    const { attempts, outcomes } = outcomesToTell(this.state.attempts, this.told, Date.now());
    for (const attempt of attempts) this.told.add(attempt);
    return outcomes;
  }
}
