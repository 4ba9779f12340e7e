/**
 * `planRun`: what a run would cost and when it would finish, before anything is created.
 * The same validation and the same capacity listing as a run (one findCapacity, no
 * create), then the pure prediction (plan/predict.ts). Started by `sterna plan` and by
 * `client/plan.ts`; short-lived, so it never needs continue-as-new.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { SternaActivities } from '../activity-contract';
import { nonRetryableFailureTypes } from '../failures';
import { capacityRequest } from '../run/requests';
import { parseSpec } from '../spec';
import type { ZoneActivities } from '../zones/contract';
import type { PlanResult, ThroughputActivities } from './contract';
import { measuredFor, measuredLossFor, type ThroughputMemory } from './measured';
import { predictPlan } from './predict';

const { findCapacity, readZoneMemory } = proxyActivities<SternaActivities & ZoneActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 5, nonRetryableErrorTypes: [...nonRetryableFailureTypes] },
});
// Only a query of the memory's workflow: quick, and a worker built without it (NotFoundError) answers at once.
const { readThroughput } = proxyActivities<ThroughputActivities>({
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '1 second', maximumAttempts: 3, nonRetryableErrorTypes: ['NotFoundError'] },
});

export async function planRun(input: unknown): Promise<PlanResult> {
  const spec = parseSpec(input, { nowMs: Date.now() });
  const accelerators = spec.resources.accelerators.map((a) => a.type);
  // The memories are priors, not requirements: a worker that keeps none plans without them.
  const throughput: Promise<ThroughputMemory | undefined> =
    spec.name ? readThroughput({ specName: spec.name, accelerators }).catch(() => undefined) : Promise.resolve(undefined);
  const [found, memory, measured] = await Promise.all([
    findCapacity(capacityRequest(spec)),
    readZoneMemory({ backend: spec.backend, accelerators }).catch(() => undefined),
    throughput,
  ]);
  const nowMs = Date.now();
  const plan = predictPlan({ spec, offers: found.offers, nowMs, memory, measured: measuredFor(measured, spec.name, accelerators), measuredLoss: measuredLossFor(measured, spec.name, accelerators) });
  return { ...plan, at: new Date(nowMs).toISOString(), prices: found.prices, unpriced: found.unpriced };
}
