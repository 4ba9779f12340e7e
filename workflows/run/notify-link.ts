/**
 * The run's link to its notifications: what is due (run/notify.ts decides) goes to
 * delivery without the run waiting for it; the run waits for what is in flight only
 * before it continues as new or ends.
 */
import { CancellationScope, condition, proxyActivities } from '@temporalio/workflow';
import type { RunSpec } from '../spec';
import { mayNotify, notificationsDue, notifyWakeAtMs, remember, type NotifyMoment } from './notify';
import { NOTIFY_ACTIVITY_OPTIONS, type NotifyActivities } from './notify-contract';
import { record, TimelineKind, type RunState } from './state';

export class NotifyLink {
  private readonly acts = proxyActivities<NotifyActivities>(NOTIFY_ACTIVITY_OPTIONS);
  /** Deliveries handed out and not yet answered. */
  private inFlight = 0;

  constructor(
    private readonly spec: RunSpec,
    private readonly state: RunState,
  ) {}

  /** Whether this run sends notifications: someone may listen. */
  private notifies(): boolean {
    return mayNotify(this.spec, this.state);
  }

  /**
   * Hands what is due to delivery, without waiting: the run goes on, and a webhook that is
   * down never holds it up. The deliveries outlive a cancellation of the run.
   */
  tell(moment: NotifyMoment): void {
    if (!this.notifies()) return;
    const due = notificationsDue(this.state, this.spec, moment, Date.now(), this.state.notify);
    if (due.length === 0) return;
    this.state.notify = remember(this.state.notify, due);
    for (const event of due) {
      this.inFlight++;
      void CancellationScope.nonCancellable(() => this.acts.deliverNotification({ event, webhooks: this.spec.notify?.webhooks ?? [] }))
        .then(
          (report) => {
            for (const f of report.failed) record(this.state, Date.now(), { kind: TimelineKind.Warning, event: `notification ${event.kind} refused by ${f.target}: ${f.problem}` });
          },
          (err: unknown) => record(this.state, Date.now(), { kind: TimelineKind.Warning, event: `notification ${event.kind} not delivered: ${String(err)}` }),
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

  /** A wait ends early when a budget or deadline warning falls due meanwhile. */
  wakeAt(untilMs: number | undefined): number | undefined {
    if (!this.notifies()) return untilMs;
    const wake = notifyWakeAtMs(this.state, this.spec, Date.now(), this.state.notify);
    return wake !== undefined && (untilMs === undefined || wake < untilMs) ? wake : untilMs;
  }
}
