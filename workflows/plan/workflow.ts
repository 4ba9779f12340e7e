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
import type { ZoneActivities } from '../zones/contract';
import { predictPlan, type Plan } from './predict';

export interface PlanResult extends Plan {
  /** When the plan was made (ISO): its finish times count from then. */
  at: string;
  prices: PriceStamp;
  unpriced: UnpricedZone[];
}

const { findCapacity, readZoneMemory } = proxyActivities<SternaActivities & ZoneActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 5, nonRetryableErrorTypes: [...nonRetryableFailureTypes] },
});

export async function planRun(input: unknown): Promise<PlanResult> {
  const spec = parseSpec(input, { nowMs: Date.now() });
  // The memory is a prior, not a requirement: a worker that keeps none plans without it.
  const [found, memory] = await Promise.all([
    findCapacity(capacityRequest(spec)),
    readZoneMemory({ backend: spec.backend, accelerators: spec.resources.accelerators.map((a) => a.type) }).catch(() => undefined),
  ]);
  const nowMs = Date.now();
  return { ...predictPlan({ spec, offers: found.offers, nowMs, memory }), at: new Date(nowMs).toISOString(), prices: found.prices, unpriced: found.unpriced };
}
