/**
 * `planRun`: what a run would cost and when it would finish, before anything is created.
 * The same validation and the same capacity listing as a run (one findCapacity, no
 * create), then the pure prediction (plan/predict.ts). Started by `sterna plan` and by
 * `client/plan.ts`; short-lived, so it never needs continue-as-new.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { SternaActivities, UnpricedZone } from '../activity-contract';
import { nonRetryableFailureTypes } from '../failures';
import type { PriceStamp } from '../pricing-book/contract';
import { capacityRequest } from '../run/requests';
import { parseSpec } from '../spec';
import { predictPlan, type Plan } from './predict';

export interface PlanResult extends Plan {
  /** When the plan was made (ISO): its finish times count from then. */
  at: string;
  prices: PriceStamp;
  unpriced: UnpricedZone[];
}

const { findCapacity } = proxyActivities<SternaActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 5, nonRetryableErrorTypes: [...nonRetryableFailureTypes] },
});

export async function planRun(input: unknown): Promise<PlanResult> {
  const spec = parseSpec(input, { nowMs: Date.now() });
  const found = await findCapacity(capacityRequest(spec));
  const nowMs = Date.now();
  return { ...predictPlan({ spec, offers: found.offers, nowMs }), at: new Date(nowMs).toISOString(), prices: found.prices, unpriced: found.unpriced };
}
