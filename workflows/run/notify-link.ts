/**
 * The run's link to its notifications: what the reducer found due (run/effects.ts) goes
 * to delivery without the run waiting for it; the run waits for what is in flight only
 * before it continues as new or ends. A refusal comes back as an event for the state.
 */
import { CancellationScope, condition, proxyActivities } from '@temporalio/workflow';
import type { NotifyEvent } from './notify';
import type { WebhookTarget } from './notify-spec';
import { NOTIFY_ACTIVITY_OPTIONS, type NotifyActivities } from './notify-contract';
import type { RunEvent } from './protocol';

type Failed = Extract<RunEvent, { kind: 'notification-failed' }>;

export class NotifyLink {
  private readonly acts = proxyActivities<NotifyActivities>(NOTIFY_ACTIVITY_OPTIONS);
  /** Deliveries handed out and not yet answered. */
  private inFlight = 0;

  /**
   * Hands `events` to delivery, without waiting: the run goes on, and a webhook that is
   * down never holds it up. The deliveries outlive a cancellation of the run.
   */
  deliver(events: readonly NotifyEvent[], webhooks: readonly WebhookTarget[], failed: (event: Failed) => void): void {
    for (const event of events) {
      this.inFlight++;
      void CancellationScope.nonCancellable(() => this.acts.deliverNotification({ event, webhooks: [...webhooks] }))
        .then(
          (report) => {
            for (const f of report.failed) failed({ kind: 'notification-failed', notification: event.kind, target: f.target, problem: f.problem });
          },
          (err: unknown) => failed({ kind: 'notification-failed', notification: event.kind, problem: String(err) }),
        )
        .finally(() => this.inFlight--);
    }
  }

  /**
   * Waits for the deliveries in flight: all of them before a continue-as-new (the next run
   * would not send them again), at most `limitMs` as the run ends, so a webhook that is
   * down delays a run's end by minutes, not by the hour its delivery may retry.
   */
  async settled(limitMs?: number): Promise<void> {
    if (this.inFlight === 0) return;
    if (limitMs === undefined) await condition(() => this.inFlight === 0);
    else await condition(() => this.inFlight === 0, limitMs);
  }
}
