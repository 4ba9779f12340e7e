/**
 * Flex-start in the run's rules, server-less: the pure machine fed events by hand. A wait
 * window that ends is its own named ending (the zone cools down for flex-start only); a
 * flex-start VM stopped at its run duration is a move from the last checkpoint, not a
 * preemption; the status says how long the run has waited; the auto tier takes flex-start
 * only where the deadline policy would pay on-demand and the deadline survives a full wait.
 */
import { strict as assert } from 'node:assert';
import { FailureType } from '../workflows/failures';
import { runKey } from '../workflows/naming';
import { ENDINGS, Next, PROVISION_FAILURES } from '../workflows/run/endings';
import { FLEX_START_MAX_RUN_SECONDS } from '../workflows/run/flex-start';
import { provisionRequest } from '../workflows/run/requests';
import { AttemptOutcome } from '../workflows/run/state';
import { statusOf } from '../workflows/run/views';
import { parseSpec, type RunSpecInput } from '../workflows/spec';
import type { Offer } from '../workflows/types';
import { EXEC, offerIn, RunHarness, T0 } from './helpers/run-harness';

const WORKFLOW = 'run-flex';

const offer = (zone: string, price: number, model: Offer['provisioningModel']): Offer =>
  offerIn(zone, price, { accelerator: 'nvidia-tesla-a100', machineType: 'a2-highgpu-1g', provisioningModel: model, onDemandPricePerHour: 3.7 });

class Run extends RunHarness {
  constructor(input: Partial<RunSpecInput>) {
    super(WORKFLOW, parseSpec({ command: ['python', 'train.py'], checkpoint: { uri: 'gs://ckpt/run' }, resources: { accelerators: [{ type: 'nvidia-tesla-a100', count: 1 }] }, ...input }));
  }
}

const FLEX_A = offer('us-central1-a', 1.85, 'FLEX_START');
const FLEX_B = offer('us-central1-b', 1.85, 'FLEX_START');
const ON_DEMAND = offer('us-central1-a', 3.7, 'STANDARD');

describe('flex-start in the run machine (pure)', () => {
  it('maps FlexStartWaitExpired to its own ending: next offer, the zone cooling down for flex-start only', () => {
    assert.equal(PROVISION_FAILURES[FailureType.FlexStartWaitExpired], AttemptOutcome.WaitExpired);
    assert.equal(ENDINGS[AttemptOutcome.WaitExpired].next, Next.NextOffer);
    assert.equal(ENDINGS[AttemptOutcome.RunDurationReached].next, Next.Move);

    const run = new Run({ pricing: { mode: 'flex-start', flexStart: { maxWait: '20m' } } });
    run.send({ kind: 'start' });
    run.send({ kind: 'offers', offers: [FLEX_A, FLEX_B, ON_DEMAND] });
    const first = run.provisionedAttempt();
    assert.equal(run.state.attempts[0].offer.provisioningModel, 'FLEX_START', 'flex-start alone never takes on-demand');
    assert.match(statusOf(run.state, run.now).waiting ?? '', /^waiting for DWS capacity since 2026-12-01T00:00:00\.000Z \(flex-start a2-highgpu-1g in us-central1-a\)$/);

    run.at(1200).send({ kind: 'provision-failed', attempt: first, failure: FailureType.FlexStartWaitExpired, message: 'no flex-start (DWS) capacity in us-central1-a' });
    assert.deepEqual(run.last, { kind: 'release', attempt: first, createMayBeInFlight: false, beside: true });
    assert.equal(run.state.attempts[0].outcome, 'wait-expired');
    assert.deepEqual(run.state.zoneEvents.map((e) => [e.zone, e.provisioningModel, e.kind]), [['us-central1-a', 'FLEX_START', 'stockout']]);
    run.send({ kind: 'released', attempt: first, outcome: 'absent' });
    assert.equal(run.state.attempts[run.provisionedAttempt() - 1].offer.zone, 'us-central1-b', 'the next choice: flex-start in the other zone');
  });

  it('gives each flex-start VM the run\'s remaining time as its run duration (at most 7 days) and the wait as its window', () => {
    const run = new Run({ pricing: { mode: 'flex-start', flexStart: { maxWait: '20m' } }, time: { deadlineAfter: '30d', expectedDuration: '10d' } });
    run.send({ kind: 'start' });
    run.send({ kind: 'offers', offers: [FLEX_A] });
    const attempt = run.state.attempts[run.provisionedAttempt() - 1];
    assert.equal(attempt.runDurationSeconds, FLEX_START_MAX_RUN_SECONDS);
    const request = provisionRequest(run.spec, run.state, attempt, { run: runKey(WORKFLOW), execution: EXEC, attempt: 1 }, run.now);
    assert.deepEqual(request.flexStart, { maxWaitSeconds: 1200, maxRunDurationSeconds: FLEX_START_MAX_RUN_SECONDS });

    const short = new Run({ pricing: { mode: 'flex-start' }, time: { deadlineAfter: '2h', expectedDuration: '1h' } });
    short.send({ kind: 'start' });
    short.send({ kind: 'offers', offers: [FLEX_A] });
    assert.equal(short.state.attempts[0].runDurationSeconds, 2 * 3600, 'until the run\'s own end (its deadline), not its VM-side limit');
  });

  it('moves on from the last checkpoint when GCE stops a flex-start VM at its run duration, counting no preemption', () => {
    const run = new Run({ pricing: { mode: 'flex-start' } });
    run.send({ kind: 'start' });
    run.send({ kind: 'offers', offers: [FLEX_A, FLEX_B] });
    const first = run.provisionedAttempt();
    run.at(60).send({ kind: 'provisioned', attempt: first, startedAt: new Date(run.now).toISOString(), adopted: false, observerAsked: true });
    run.at(70).observe(first, { phase: 'training', step: 50, checkpoint: { uri: 'gs://ckpt/run/step-40.json', sha256: 'x', step: 40 } });
    // The cut: SIGTERM, the trainer exits 0 after its final checkpoint, the VM stops.
    const cmd = run.at(80).observe(first, { lifecycle: 'stopping', phase: 'exited', exitCode: 0, step: 60, checkpoint: { uri: 'gs://ckpt/run/step-60.json', sha256: 'y', step: 60 } });
    assert.deepEqual(cmd, { kind: 'release', attempt: first, createMayBeInFlight: false, beside: true });
    assert.equal(run.state.attempts[0].outcome, 'run-duration-reached');
    assert.equal(run.state.preemptions, 0);
    run.send({ kind: 'released', attempt: first, outcome: 'deleted', startedAt: new Date(T0 + 60_000).toISOString(), stoppedAt: new Date(T0 + 80_000).toISOString() });
    run.send({ kind: 'tick' });
    const second = run.send({ kind: 'offers', offers: [FLEX_A, FLEX_B] });
    assert.equal(second.kind, 'provision');
    assert.equal(run.state.attempts[1].resumedFromStep, 60, 'resumed from the final checkpoint written at the cut');
  });

  it('in auto with a deadline and spot out, weighs flex-start by expected cost and never takes it without room for a full wait', () => {
    // 12 h for 2 h of work, a 1-hour wait (workflows/policy/flex-tier.ts): the run waits for
    // spot while waiting is free; once the all-zones outage has used its share of the slack
    // the policy would pay on-demand, and flex-start at half the price, with a full wait still
    // leaving on-demand time, is the cheaper in expectation.
    const weighed = new Run({ pricing: { mode: 'auto', flexStart: { maxWait: '1h' } }, time: { deadlineAfter: '12h', expectedDuration: '2h' } });
    weighed.send({ kind: 'start' });
    assert.equal(weighed.send({ kind: 'offers', offers: [FLEX_A, ON_DEMAND] }).kind, 'wait', 'early on, the policy waits for spot');
    assert.equal(weighed.at(8 * 3600 + 40 * 60).send({ kind: 'tick' }).kind, 'find-capacity');
    weighed.send({ kind: 'offers', offers: [FLEX_A, ON_DEMAND] });
    assert.equal(weighed.state.attempts[weighed.provisionedAttempt() - 1].offer.provisioningModel, 'FLEX_START');
    assert.ok(weighed.state.timeline.some((e) => /^policy: flex-start in us-central1-a \(the lowest expected cost/.test(e.event)), JSON.stringify(weighed.state.timeline));
    const tightly = new Run({ pricing: { mode: 'auto', flexStart: { maxWait: '2h' } }, time: { deadlineAfter: '2h5m', expectedDuration: '2h' } });
    tightly.send({ kind: 'start' });
    tightly.send({ kind: 'offers', offers: [FLEX_A, ON_DEMAND] });
    assert.equal(tightly.state.attempts[tightly.provisionedAttempt() - 1].offer.provisioningModel, 'STANDARD', 'no room for a full wait: on-demand');

    // Without pricing.flexStart there is no flex-start tier.
    const without = new Run({ pricing: { mode: 'auto' }, time: { deadlineAfter: '12h', expectedDuration: '2h' } });
    without.send({ kind: 'start' });
    without.send({ kind: 'offers', offers: [FLEX_A, ON_DEMAND] });
    without.at(8 * 3600 + 52 * 60).send({ kind: 'tick' });
    without.send({ kind: 'offers', offers: [FLEX_A, ON_DEMAND] });
    assert.ok(without.state.attempts.every((a) => a.offer.provisioningModel !== 'FLEX_START'), JSON.stringify(without.state.attempts.map((a) => a.offer.provisioningModel)));
  });
});
