/**
 * How a run reaches the zone memory: its activities and the patch that guards the new
 * commands, so runs recorded before the memory existed replay unchanged. Both calls
 * are courtesies: a run that cannot reach the memory places as it did without one.
 */
import { proxyActivities } from '@temporalio/workflow';
import { hasChange } from '../run/changes';
import type { RunState } from '../run/state';
import type { RunSpec } from '../spec';
import type { ZoneActivities } from './contract';
import { outcomesToTell } from './from-run';
import type { ZoneMemory, ZoneOutcome } from './memory';

export const ZONE_MEMORY_PATCH = 'sterna-zone-memory';
/** Runs recorded before findCapacity read the memory too read it in an activity of its own. */
export const MEMORY_WITH_CAPACITY_PATCH = 'sterna-memory-with-capacity';

export function zoneMemoryActivities() {
  // A worker built without the zone activities (NotFoundError) answers at once: no memory.
  return proxyActivities<ZoneActivities>({ startToCloseTimeout: '30 seconds', retry: { initialInterval: '1 second', maximumAttempts: 3, nonRetryableErrorTypes: ['NotFoundError'] } });
}

/** Whether this run tells and reads the zone memory (false when replaying a run recorded before it did). */
export function usesZoneMemory(): boolean {
  return hasChange(ZONE_MEMORY_PATCH);
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
    if (!usesZoneMemory()) return undefined;
    const accelerators = this.spec.resources.accelerators.map((a) => a.type);
    return this.acts.readZoneMemory({ backend: this.spec.backend, accelerators }).catch(() => undefined);
  }

  /**
   * The accelerators whose memory findCapacity reads as it finds offers (one activity
   * instead of two); undefined when this run reads it apart, or not at all.
   */
  readWithCapacity(): string[] | undefined {
    // This patch first: a run recorded before it met the zone memory's marker only after
    // scheduling findCapacity, and must not meet it earlier on replay.
    if (!hasChange(MEMORY_WITH_CAPACITY_PATCH) || !usesZoneMemory()) return undefined;
    return this.spec.resources.accelerators.map((a) => a.type);
  }

  /** How each attempt released since the last take ended (stockout, preemption, lifetime), each taken once. */
  take(): ZoneOutcome[] {
    const { attempts, outcomes } = outcomesToTell(this.state.attempts, this.told, Date.now());
    for (const attempt of attempts) this.told.add(attempt);
    return outcomes;
  }

  /** Tells the memory in an activity of its own, as runs recorded before run/memory-link.ts did. */
  async tell(): Promise<void> {
    const outcomes = this.take();
    if (outcomes.length === 0 || !usesZoneMemory()) return;
    await this.acts.recordZoneOutcomes({ backend: this.spec.backend, outcomes }).catch(() => undefined);
  }
}
