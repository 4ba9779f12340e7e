/**
 * What released attempts teach the project: how their zones behaved (the zone memory)
 * and how fast they trained (the throughput memory), told in one activity. Runs recorded
 * before the two went together tell them apart, in two activities, and replay so.
 */
import { patched, proxyActivities } from '@temporalio/workflow';
import { ThroughputLink } from '../plan/run-link';
import type { RunSpec } from '../spec';
import { usesZoneMemory, ZoneLink } from '../zones/run-link';
import type { MemoryActivities } from './memory-contract';
import type { RunState } from './state';

export const ONE_RECORD_PATCH = 'sterna-one-record';

export class MemoryLink {
  // A worker built without the activity (NotFoundError) answers at once: the run goes on.
  private readonly acts = proxyActivities<MemoryActivities>({ startToCloseTimeout: '30 seconds', retry: { initialInterval: '1 second', maximumAttempts: 3, nonRetryableErrorTypes: ['NotFoundError'] } });
  readonly zones: ZoneLink;
  private readonly throughput: ThroughputLink;

  constructor(
    private readonly spec: RunSpec,
    state: RunState,
  ) {
    this.zones = new ZoneLink(spec, state);
    this.throughput = new ThroughputLink(spec, state);
  }

  /** Tells both memories what the attempts released since the last tell showed. A courtesy: failures are dropped. */
  async tell(): Promise<void> {
    if (!patched(ONE_RECORD_PATCH)) {
      await this.zones.tell();
      await this.throughput.tell();
      return;
    }
    const outcomes = this.zones.take();
    const samples = this.throughput.take();
    if (outcomes.length === 0 && samples.length === 0) return;
    // The zone memory's own patch still guards its outcomes, as in the two-activity path.
    const zoneOutcomes = outcomes.length > 0 && usesZoneMemory() ? outcomes : [];
    await this.acts.recordReleasedAttempts({ backend: this.spec.backend, outcomes: zoneOutcomes, samples }).catch(() => undefined);
  }
}
