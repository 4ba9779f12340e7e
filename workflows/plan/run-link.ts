/**
 * What a run tells the throughput memory: how fast each released attempt trained (told
 * with the zone outcomes, run/memory-link.ts).
 */
import type { RunState } from '../run/state';
import type { RunSpec } from '../spec';
import { samplesToTell, type ThroughputSample } from './measured';

export class ThroughputLink {
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
}
