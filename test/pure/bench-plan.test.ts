/**
 * bench:plan's arithmetic (bench/plan/analysis.ts): relative errors of a run's plan
 * against what it did, and the median / p90 summaries the README reports. Pure.
 */
import { strict as assert } from 'node:assert';
import { errorsOf, errorSummary, quantile, relativeError, type PlannedPick, type RunOutcome } from '../../bench/plan/analysis';

const pick: PlannedPick = {
  zone: 'us-east-2-b',
  accelerator: 'nvidia-tesla-v100',
  provisioningModel: 'SPOT',
  pricePerHour: 0.9,
  workHours: 0.04,
  expectedHours: 0.05,
  expectedCostUsd: 0.045,
  expectedPreemptions: 0.5,
  preemptionsPerHour: 10,
  preemptionSource: 'observed',
  lossSeconds: 8,
  lossSource: 'measured',
  throughputSource: 'measured',
  finishSeconds: 180,
};
const outcome = (over: Partial<RunOutcome> = {}): RunOutcome => ({ status: 'completed', seconds: 200, billedUsd: 0.05, ledgerUsd: 0.049, billedSeconds: 195, preemptions: 1, attempts: 2, path: [], gapsSeconds: [4], ...over });

describe('bench:plan arithmetic (pure)', () => {
  it('signs the error: positive when the plan said more than happened', () => {
    assert.equal(relativeError(110, 100), 0.1);
    assert.equal(relativeError(90, 100), -0.1);
    const e = errorsOf(pick, outcome())!;
    assert.ok(Math.abs(e.cost - (0.045 - 0.05) / 0.05) < 1e-12);
    assert.equal(e.finish, (180 - 200) / 200);
  });

  it('judges only runs that completed and that the plan predicted', () => {
    assert.equal(errorsOf(undefined, outcome()), undefined);
    assert.equal(errorsOf(pick, outcome({ status: 'failed' })), undefined);
    assert.equal(errorsOf(pick, outcome({ billedUsd: 0 })), undefined);
  });

  it('takes quantiles between order statistics, and the median and p90 of the absolute error', () => {
    assert.equal(quantile([3, 1, 2], 0.5), 2);
    assert.equal(quantile([1, 2, 3, 4], 0.5), 2.5);
    assert.equal(quantile([0, 10], 0.9), 9);
    assert.ok(Number.isNaN(quantile([], 0.5)));
    const s = errorSummary([-0.4, 0.1, 0.2, -0.05]);
    const near = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-12, `${a} is not ${b}`);
    assert.deepEqual([s.runs, s.min, s.max], [4, -0.4, 0.2]);
    near(s.medianAbs, 0.15);
    near(s.medianSigned, 0.025);
    near(s.p90Abs, 0.2 + (0.4 - 0.2) * 0.7);
  });
});
