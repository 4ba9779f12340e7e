/**
 * A run's releases: the ones that run beside the run (an ended attempt whose guest can no
 * longer write, while the next one is placed; run/endings.ts `releaseBeside`) and the
 * final ones, which wait for those still in flight rather than asking twice.
 */
import { CancellationScope } from '@temporalio/workflow';
import { namedFailureOf } from '../failures';
import type { AttemptActs } from './attempt-acts';
import type { Inbox } from './inbox';
import type { RunEvent } from './protocol';

type Released = Extract<RunEvent, { kind: 'released' }>;

export class Releases {
  private readonly inFlight = new Map<number, Promise<Released>>();

  constructor(
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

  /** The run is ending: each of `pending` is released, in parallel (one in flight is waited for); their answers, in order. */
  all(pending: readonly { attempt: number; createMayBeInFlight: boolean }[]): Promise<Released[]> {
    return Promise.all(
      pending.map((a) => {
        const fresh = () => this.acts.release(a.attempt, a.createMayBeInFlight);
        return this.inFlight.get(a.attempt)?.catch(fresh) ?? fresh();
      }),
    );
  }
}
