/**
 * An attempt's activities (create, release, look, ask to move) with their web-UI summaries,
 * each answered as the machine's event. A named provision failure is an event (the
 * create's definite answer); anything else leaves open whether the create may still
 * land, and ends the run.
 */
import { isCancellation } from '@temporalio/workflow';
import { namedFailureOf } from '../failures';
import type { Owner } from '../naming';
import type { runActivities } from './activities';
import type { RunSpec } from '../spec';
import type { RunEvent } from './protocol';
import { provisionRequest, provisionSummary } from './requests';
import type { AppliedInterval, Attempt, RunState } from './state';

export class AttemptActs {
  constructor(
    private readonly spec: RunSpec,
    private readonly state: () => RunState,
    private readonly acts: ReturnType<typeof runActivities>,
    private readonly owner: (attempt: number) => Owner,
  ) {}

  async provision(number: number): Promise<RunEvent> {
    const attempt = this.attemptNumbered(number);
    try {
      const result = await this.acts.provision.provision.executeWithOptions({ summary: provisionSummary(attempt.offer) }, [
        provisionRequest(this.spec, this.state(), attempt, this.owner(number), Date.now()),
      ]);
      return { kind: 'provisioned', attempt: number, ref: result.ref, startedAt: result.window.startedAt, adopted: result.adopted, ...(result.observerAsked ? { observerAsked: true } : {}) };
    } catch (err) {
      const named = namedFailureOf(err);
      if (!named) throw err;
      return { kind: 'provision-failed', attempt: number, failure: named.type, message: named.message };
    }
  }

  async release(number: number, createMayBeInFlight: boolean): Promise<Extract<RunEvent, { kind: 'released' }>> {
    const attempt = this.attemptNumbered(number);
    const result = await this.acts.release.release.executeWithOptions({ summary: `release ${attempt.ref.name} in ${attempt.ref.zone}` }, [
      { ref: attempt.ref, owner: this.owner(number), createMayBeInFlight, startedAt: attempt.startedAt },
    ]);
    return { kind: 'released', attempt: number, ...result };
  }

  /**
   * Keeps a failed attempt for inspection (run/keep.ts): labels it to be deleted after
   * `untilMs`. A keep that cannot be made answers `failed`, and the run releases it instead.
   */
  async keep(number: number, untilMs: number): Promise<Extract<RunEvent, { kind: 'kept' }>> {
    const attempt = this.attemptNumbered(number);
    const until = new Date(untilMs).toISOString();
    try {
      const result = await this.acts.keep.keep.executeWithOptions({ summary: `keep ${attempt.ref.name} in ${attempt.ref.zone} until ${until}` }, [{ ref: attempt.ref, owner: this.owner(number), until }]);
      return { kind: 'kept', attempt: number, ...result };
    } catch (err) {
      const cause = (err as { cause?: Error }).cause;
      return { kind: 'kept', attempt: number, outcome: 'failed', message: namedFailureOf(err)?.message ?? cause?.message ?? (err as Error)?.message ?? String(err) };
    }
  }

  /** Asks the attempt's agent for its final checkpoint before the flex-start cut (run/flex-cut.ts). */
  async askMove(number: number): Promise<RunEvent> {
    const attempt = this.attemptNumbered(number);
    const answer = await this.acts.quick.askMove.executeWithOptions({ summary: `ask ${attempt.ref.name} to checkpoint and stop before its cut` }, [{ ref: attempt.ref }]);
    return { kind: 'move-asked', attempt: number, ...answer };
  }

  /** A courtesy: an update that cannot be made leaves the attempt on the interval it has (run/live-interval.ts). */
  async setInterval(number: number, interval: AppliedInterval): Promise<RunEvent> {
    const attempt = this.attemptNumbered(number);
    try {
      const { outcome } = await this.acts.courtesy.setCheckpointInterval.executeWithOptions({ summary: `checkpoint every ${interval.seconds} s on ${attempt.ref.name}` }, [
        { ref: attempt.ref, owner: this.owner(number), seconds: interval.seconds },
      ]);
      return { kind: 'checkpoint-interval-set', attempt: number, interval, outcome };
    } catch (err) {
      if (isCancellation(err)) throw err;
      const cause = (err as { cause?: Error }).cause;
      return { kind: 'checkpoint-interval-set', attempt: number, interval, outcome: 'failed', message: cause?.message ?? (err as Error)?.message ?? String(err) };
    }
  }

  async look(number: number): Promise<RunEvent> {
    const attempt = this.attemptNumbered(number);
    const snapshot = await this.acts.quick.observe.executeWithOptions({ summary: `look at ${attempt.ref.name}` }, [{ ref: attempt.ref }]);
    return { kind: 'observed', via: 'look', observation: { name: attempt.ref.name, owner: this.owner(number), at: new Date(Date.now()).toISOString(), snapshot } };
  }

  /** The attempt as the state holds it now (the state is replaced at every step, never changed). */
  private attemptNumbered(number: number): Attempt {
    return this.state().attempts[number - 1];
  }
}
