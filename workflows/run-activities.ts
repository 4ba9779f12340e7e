/**
 * The activities a training run calls, with the timeouts and retries each needs. Only
 * named failures end a step: transient API errors (5xx, 429 / rateLimitExceeded,
 * timeouts, resets) are retried for as long as the run's limits allow, never by a small
 * attempt count, since the limits are the machine's own timers.
 */
import { proxyActivities, type ActivityOptions } from '@temporalio/workflow';
import type { CheckActivities, LogActivities, SternaActivities, StorageActivities } from './activity-contract';
import { nonRetryableFailureTypes } from './failures';
import type { FleetActivities } from './fleet/contract';

const SECOND = 1000;
const MINUTE = 60 * SECOND;

export function runActivities(pollSeconds: number) {
  // Heartbeats arrive on a timer; a worker that dies is noticed after a few missed ones.
  const heartbeatTimeout = Math.max(10, Math.ceil(4 * pollSeconds)) * SECOND;
  const retry = { initialInterval: SECOND, maximumInterval: MINUTE, nonRetryableErrorTypes: [...nonRetryableFailureTypes] };
  const quick: ActivityOptions = { startToCloseTimeout: MINUTE, retry };
  return {
    quick: proxyActivities<SternaActivities>(quick),
    provision: proxyActivities<SternaActivities>({ ...quick, startToCloseTimeout: 6 * 60 * MINUTE, heartbeatTimeout }),
    // Release must happen, whatever the API does meanwhile.
    release: proxyActivities<SternaActivities>({ startToCloseTimeout: 10 * MINUTE, heartbeatTimeout, retry }),
    // Asking for the observer is a courtesy: a run that cannot reach it looks for itself.
    observer: proxyActivities<FleetActivities>({ startToCloseTimeout: 30 * SECOND, retry: { initialInterval: SECOND, maximumAttempts: 3 } }),
    // So are a new checkpoint interval (the attempt keeps its own) and bucket locations (placement weighs no data).
    courtesy: proxyActivities<SternaActivities>({ startToCloseTimeout: MINUTE, retry: { initialInterval: SECOND, maximumAttempts: 3 } }),
    storage: proxyActivities<StorageActivities>({ startToCloseTimeout: MINUTE, retry: { initialInterval: SECOND, maximumAttempts: 3, nonRetryableErrorTypes: ['NotFoundError'] } }),
    // The checks read a few APIs; a worker without them (NotFoundError) answers at once and the run goes on.
    checks: proxyActivities<CheckActivities>({ startToCloseTimeout: 2 * MINUTE, retry: { initialInterval: SECOND, maximumAttempts: 3, nonRetryableErrorTypes: ['NotFoundError'] } }),
    // A failure's log tail is a courtesy too: the run fails the same without it.
    logs: proxyActivities<LogActivities>({ startToCloseTimeout: 30 * SECOND, retry: { initialInterval: SECOND, maximumAttempts: 2, nonRetryableErrorTypes: ['NotFoundError'] } }),
  };
}
