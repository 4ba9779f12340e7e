/**
 * A run's releases: the ones that run beside the run (an ended attempt whose guest can no
 * longer write, while the next one is placed; run/endings.ts `releaseBeside`) and the
 * final one, which waits for those still in flight rather than asking twice.
 */
import { CancellationScope } from '@temporalio/workflow';
import { namedFailureOf } from '../failures';
import type { Inbox } from '../inbox';
import type { AttemptActs } from './attempt-acts';
import { absorbRelease, type RunEvent } from './machine';
import type { RunState } from './state';

type Released = Extract<RunEvent, { kind: 'released' }>;

export class Releases {
  private readonly inFlight = new Map<number, Promise<Released>>();

  constructor(
    private readonly state: RunState,
    private readonly acts: AttemptActs,
    private readonly inbox: Inbox,
  ) {}

  /**
   * Starts a release and answers at once; its `released` (or `release-failed`) comes
   * through the inbox. It cannot be cancelled: a cancelled run still waits for it in `all`.
   */
  beside(attempt: number, createMayBeInFlight: boolean): RunEvent {
    const release = CancellationScope.nonCancellable(() => this.acts.release(attempt, createMayBeInFlight));
    this.inFlight.set(attempt, release);
    release.then(
      (released) => this.inbox.push(released),
      (err: unknown) => this.inbox.push({ kind: 'release-failed', attempt, message: namedFailureOf(err)?.message ?? String(err) }),
    );
    return { kind: 'releasing', attempt };
  }

  /** The run is ending: every attempt not yet released is, in parallel, and folded into the state. */
  async all(): Promise<void> {
    const pending = this.state.attempts.filter((a) => !a.released);
    const events = await Promise.all(
      pending.map((a) => {
        const fresh = () => this.acts.release(a.attempt, !a.createSettled);
        return this.inFlight.get(a.attempt)?.catch(fresh) ?? fresh();
      }),
    );
    for (const event of events) absorbRelease(this.state, event, Date.now());
  }
}
