/**
 * The notification activities (activities/notify), as the workflows see them, and the
 * options they run with. Delivery is at least once: a worker that dies mid-request, or a
 * response that never arrives, means the request is sent again, with the same
 * `Idempotency-Key` header (the event's key), so a receiver that remembers keys sees each
 * notification once. Receivers that ignore the header (Slack) may show a repeat then.
 */
import type { ActivityOptions } from '@temporalio/workflow';
import type { NotifyEvent } from './notify';
import type { WebhookTarget } from './notify-spec';

export interface DeliveryReport {
  /** Webhooks that answered 2xx (this attempt or an earlier one). */
  delivered: number;
  /** Webhooks that did not want this kind (`on`). */
  skipped: number;
  /** Webhooks that refused it for good (4xx, an unset ref), described without their URL. */
  failed: { target: string; problem: string }[];
}

export interface ReapedNotice {
  workflowId: string;
  resource: { backend: string; zone: string; name: string; reason: string; detail: string };
  at: string;
}

export interface NotifyActivities {
  /** Posts `event` to the run's webhooks and its team's; retried until each answered or refused. */
  deliverNotification(input: { event: NotifyEvent; webhooks: WebhookTarget[] }): Promise<DeliveryReport>;
  /** Tells a reaped resource's run's webhooks and team (read from the run's own start). */
  notifyReaped(input: ReapedNotice): Promise<DeliveryReport>;
}

const SECOND = 1000;

/**
 * A webhook that is down is retried for about an hour, backing off to a minute. The
 * heartbeat timeout is what notices a worker that died mid-request.
 */
export const NOTIFY_ACTIVITY_OPTIONS: ActivityOptions = {
  startToCloseTimeout: 60 * SECOND,
  heartbeatTimeout: 10 * SECOND,
  scheduleToCloseTimeout: 60 * 60 * SECOND,
  retry: { initialInterval: SECOND, maximumInterval: 60 * SECOND, backoffCoefficient: 2 },
};
