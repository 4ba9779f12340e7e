/**
 * What released attempts teach the project: how their zones behaved (the zone memory)
 * and how fast they trained (the throughput memory), told in one activity. Runs recorded
 * before the two went together tell them apart, in two activities, and replay so.
 */
import { proxyActivities } from '@temporalio/workflow';
import { hasChange } from './changes';
import { ThroughputLink } from '../plan/run-link';
import type { RunSpec } from '../spec';
import { usesZoneMemory, ZoneLink } from '../zones/run-link';
import type { MemoryActivities } from './memory-contract';
import type { RunState } from './state';

export const ONE_RECORD_PATCH = 'sterna-one-record';
/** Runs recorded before the tell went on beside the run's next step waited for it. */
export const RECORD_BESIDE_PATCH = 'sterna-record-beside';

export class MemoryLink {
  // A worker built without the activity (NotFoundError) answers at once: the run goes on.
  private readonly acts = proxyActivities<MemoryActivities>({ startToCloseTimeout: '30 seconds', retry: { initialInterval: '1 second', maximumAttempts: 3, nonRetryableErrorTypes: ['NotFoundError'] } });
  readonly zones: ZoneLink;
  private readonly throughput: ThroughputLink;
  /** Tells still in flight: a preempted run's replacement does not wait for them. */
  private pending: Promise<unknown>[] = [];

  constructor(
    private readonly spec: RunSpec,
    state: RunState,
  ) {
    this.zones = new ZoneLink(spec, state);
    this.throughput = new ThroughputLink(spec, state);
  }

  /** Tells both memories what the attempts released since the last tell showed. A courtesy: failures are dropped. */
  async tell(): Promise<void> {
    if (!hasChange(ONE_RECORD_PATCH)) {
      await this.zones.tell();
      await this.throughput.tell();
      return;
    }
    const outcomes = this.zones.take();
    const samples = this.throughput.take();
    if (outcomes.length === 0 && samples.length === 0) return;
    // The zone memory's own patch still guards its outcomes, as in the two-activity path.
    const zoneOutcomes = outcomes.length > 0 && usesZoneMemory() ? outcomes : [];
    const told = this.acts.recordReleasedAttempts({ backend: this.spec.backend, outcomes: zoneOutcomes, samples }).catch(() => undefined);
    if (hasChange(RECORD_BESIDE_PATCH)) this.pending.push(told);
    else await told;
  }

  /** Waits for every tell in flight (before the run continues as new or ends). */
  async settled(): Promise<void> {
    const pending = this.pending;
    this.pending = [];
    await Promise.all(pending);
  }
}
