/**
 * How a run tells the throughput memory how fast each released attempt trained (a
 * courtesy: a run that cannot reach it trains as before). Behind its own patch, so runs
 * recorded before it replay unchanged.
 */
import { proxyActivities } from '@temporalio/workflow';
import { hasChange } from '../run/changes';
import type { RunState } from '../run/state';
import type { RunSpec } from '../spec';
import type { ThroughputActivities } from './contract';
import { samplesToTell, type ThroughputSample } from './measured';

export const THROUGHPUT_PATCH = 'sterna-plan-throughput';

export class ThroughputLink {
  // A worker built without the throughput activities (NotFoundError) answers at once.
  private readonly acts = proxyActivities<ThroughputActivities>({ startToCloseTimeout: '30 seconds', retry: { initialInterval: '1 second', maximumAttempts: 3, nonRetryableErrorTypes: ['NotFoundError'] } });
  /** Attempts already told (those released before this execution were, or predate it). */
  private readonly told: Set<number>;

  constructor(
    private readonly spec: RunSpec,
    private readonly state: RunState,
  ) {
    this.told = new Set(state.attempts.filter((a) => a.released).map((a) => a.attempt));
  }

  /** The samples of attempts released since the last take, each taken once. */
  take(): ThroughputSample[] {
    const { attempts, samples } = samplesToTell(this.state, this.spec, this.told, Date.now());
    for (const attempt of attempts) this.told.add(attempt);
    return samples;
  }

  /** Tells the memory in an activity of its own, as runs recorded before run/memory-link.ts did. */
  async tell(): Promise<void> {
    const samples = this.take();
    if (samples.length === 0 || !hasChange(THROUGHPUT_PATCH)) return;
    await this.acts.recordThroughput({ samples }).catch(() => undefined);
  }
}
