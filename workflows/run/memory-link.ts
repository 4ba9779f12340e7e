/**
 * What released attempts teach the project: how their zones behaved (the zone memory)
 * and how fast they trained (the throughput memory), told in one activity beside the
 * run's next step.
 */
import { proxyActivities } from '@temporalio/workflow';
import { ThroughputLink } from '../plan/run-link';
import type { RunSpec } from '../spec';
import { ZoneLink } from '../zones/run-link';
import type { MemoryActivities } from './memory-contract';
import type { RunState } from './state';

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
    const outcomes = this.zones.take();
    const samples = this.throughput.take();
    if (outcomes.length === 0 && samples.length === 0) return;
    this.pending.push(this.acts.recordReleasedAttempts({ backend: this.spec.backend, outcomes, samples }).catch(() => undefined));
  }

  /** Waits for every tell in flight (before the run continues as new or ends). */
  async settled(): Promise<void> {
    const pending = this.pending;
    this.pending = [];
    await Promise.all(pending);
  }
}
