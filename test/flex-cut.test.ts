/**
 * The run-duration guard, server-less: the pure rule (when to ask for the final checkpoint
 * before a flex-start cut) and the machine fed events by hand. A run whose flex-start VM
 * will be cut before the run ends asks the agent for its final checkpoint one lead ahead,
 * releases and resumes from it on the next choice, counting no preemption; a run that ends
 * first never asks; an ask that cannot be delivered leaves the cut's stop grace as the
 * fallback; a GKE flex-start node cut at its run duration is a move, not a failure.
 */
import { strict as assert } from 'node:assert';
import { CHECKPOINT_SAFETY, MOVE_MARGIN_SECONDS, planMove } from '../workflows/run/flex-cut';
import { FLEX_START_MAX_RUN_SECONDS } from '../workflows/run/flex-start';
import { PRIOR_CHECKPOINT_SECONDS } from '../workflows/run/checkpoint-interval';
import { parseSpec, type RunSpecInput } from '../workflows/spec';
import type { Offer } from '../workflows/types';
import { offerIn, RunHarness, T0 } from './helpers/run-harness';

const DAY = 24 * 3600;
const WORKFLOW = 'run-flex-cut';

function flexOffer(zone: string, backend: Offer['backend'] = 'gce'): Offer {
  return offerIn(zone, 1.85, { backend, accelerator: 'nvidia-tesla-a100', machineType: 'a2-highgpu-1g', provisioningModel: 'FLEX_START', onDemandPricePerHour: 3.7 });
}

function checkpoint(step: number) {
  return { uri: `gs://ckpt/run/step-${step}.json`, sha256: 'a'.repeat(64), step };
}

class Run extends RunHarness {
  constructor(input: Partial<RunSpecInput>) {
    super(WORKFLOW, parseSpec({ command: ['python', 'train.py'], checkpoint: { uri: 'gs://ckpt/run' }, resources: { accelerators: [{ type: 'nvidia-tesla-a100', count: 1 }] }, pricing: { mode: 'flex-start' }, ...input }));
  }

  /** Places the next attempt on `offers` and has it running (and training) from `atSeconds`. */
  running(offers: Offer[], atSeconds: number): number {
    this.send({ kind: 'offers', offers });
    const attempt = this.provisionedAttempt();
    this.at(atSeconds).send({ kind: 'provisioned', attempt, startedAt: new Date(this.now).toISOString(), adopted: false, observerAsked: true });
    return attempt;
  }
}

describe('flex-start run-duration guard (pure)', () => {
  it('asks for the final checkpoint one lead before the cut: twice the measured checkpoint time plus a margin', () => {
    const cutAtMs = T0 + 7 * DAY * 1000;
    assert.deepEqual(planMove({ cutAtMs, runEndMs: cutAtMs + DAY * 1000, checkpointSeconds: 45 }), { askAtMs: cutAtMs - (2 * 45 + MOVE_MARGIN_SECONDS) * 1000, leadSeconds: 2 * 45 + MOVE_MARGIN_SECONDS });
    assert.equal(planMove({ cutAtMs })?.leadSeconds, CHECKPOINT_SAFETY * PRIOR_CHECKPOINT_SECONDS + MOVE_MARGIN_SECONDS, 'the prior until a checkpoint is measured');
    assert.equal(planMove({ cutAtMs, runEndMs: cutAtMs }), undefined, 'the run ends at the cut anyway: no move');
    assert.equal(planMove({ cutAtMs, runEndMs: cutAtMs - 1000 }), undefined);
  });

  it('moves a 7-day flex-start VM before its cut: final checkpoint, release, resume on the next choice, no preemption', () => {
    const run = new Run({ time: { deadlineAfter: '10d', expectedDuration: '8d' } });
    run.send({ kind: 'start' });
    const first = run.running([flexOffer('us-central1-a'), flexOffer('us-central1-b')], 60);
    assert.equal(run.state.attempts[0].runDurationSeconds, FLEX_START_MAX_RUN_SECONDS, 'the run needs longer than GCE allows: 7 days');
    // The agent measured its checkpoints at 20 s: the ask comes 100 s before the cut.
    run.at(120).observe(first, { phase: 'training', step: 10, checkpoint: checkpoint(10), checkpointMs: 20_000 });
    const cutAt = 60 + FLEX_START_MAX_RUN_SECONDS;
    const askAt = cutAt - (2 * 20 + MOVE_MARGIN_SECONDS);
    assert.notEqual(run.at(askAt - 1).observe(first, { phase: 'training', step: 9000, checkpoint: checkpoint(8990), checkpointMs: 20_000 }).kind, 'ask-move', 'not before its time');
    assert.deepEqual(run.at(askAt).observe(first, { phase: 'training', step: 9001, checkpoint: checkpoint(8990), checkpointMs: 20_000 }), { kind: 'ask-move', attempt: first });
    const asked = run.state.timeline.filter((e) => e.kind === 'move-asked');
    assert.deepEqual(asked.map((e) => [e.attempt, e.step]), [[first, 9001]]);
    assert.notEqual(run.send({ kind: 'move-asked', attempt: first, delivered: true }).kind, 'ask-move', 'asked once');

    // The agent stopped the trainer for the move; it checkpointed its next step and exited.
    const cmd = run.at(askAt + 15).observe(first, { phase: 'exited', exitCode: 143, moving: true, step: 9002, checkpoint: checkpoint(9002), checkpointMs: 20_000 });
    assert.deepEqual(cmd, { kind: 'release', attempt: first, createMayBeInFlight: false, beside: true });
    assert.equal(run.state.attempts[0].outcome, 'run-duration-reached');
    assert.equal(run.state.preemptions, 0);
    assert.equal(run.state.restarts, 0);
    run.send({ kind: 'released', attempt: first, outcome: 'deleted', startedAt: new Date(T0 + 60_000).toISOString(), stoppedAt: new Date(run.now).toISOString() });
    assert.ok(run.now < T0 + cutAt * 1000, 'released before the cut');
    const second = run.running([flexOffer('us-central1-a'), flexOffer('us-central1-b')], askAt + 100);
    assert.equal(run.state.attempts[second - 1].resumedFromStep, 9002, 'from the final checkpoint written for the move');
    // The second attempt runs until the run's deadline, under 3 days away.
    assert.equal(run.state.attempts[second - 1].runDurationSeconds, 10 * DAY - (askAt + 15));
  });

  it('completes as usual when the trainer finished before the agent saw the ask', () => {
    const run = new Run({ time: { deadlineAfter: '10d' } });
    run.send({ kind: 'start' });
    const first = run.running([flexOffer('us-central1-a')], 60);
    run.at(120).observe(first, { phase: 'training', step: 10 });
    assert.equal(run.at(60 + FLEX_START_MAX_RUN_SECONDS - 100).observe(first, { phase: 'training', step: 99 }).kind, 'ask-move');
    run.send({ kind: 'move-asked', attempt: first, delivered: true });
    run.observe(first, { phase: 'exited', exitCode: 0, step: 100, checkpoint: checkpoint(100) });
    assert.equal(run.state.attempts[0].outcome, 'completed');
  });

  it('never asks when the run ends before the cut; the run duration comes from the run\'s own end', () => {
    const run = new Run({ time: { deadlineAfter: '2h', expectedDuration: '1h' } });
    run.send({ kind: 'start' });
    const first = run.running([flexOffer('us-central1-a')], 0);
    assert.equal(run.state.attempts[0].runDurationSeconds, 2 * 3600, 'the deadline, with no resource margin');
    run.at(60).observe(first, { phase: 'training', step: 1 });
    const late = run.at(2 * 3600 - 30).observe(first, { phase: 'training', step: 2 });
    assert.notEqual(late.kind, 'ask-move');
    assert.equal(run.state.timeline.filter((e) => e.kind === 'move-asked').length, 0);
  });

  it('falls back on the cut\'s stop grace when the ask cannot be delivered', () => {
    const run = new Run({ time: { deadlineAfter: '10d' } });
    run.send({ kind: 'start' });
    const first = run.running([flexOffer('us-central1-a')], 60);
    run.at(120).observe(first, { phase: 'training', step: 10 });
    assert.equal(run.at(60 + FLEX_START_MAX_RUN_SECONDS - 100).observe(first, { phase: 'training', step: 99 }).kind, 'ask-move');
    run.send({ kind: 'move-asked', attempt: first, delivered: false, detail: 'the gke backend cannot ask its agent yet' });
    assert.equal(run.state.timeline.filter((e) => e.kind === 'move-asked').length, 2, 'the ask, and that it did not reach the agent');
    assert.notEqual(run.at(60 + FLEX_START_MAX_RUN_SECONDS - 50).observe(first, { phase: 'training', step: 120 }).kind, 'ask-move', 'never asked twice');
    run.at(60 + FLEX_START_MAX_RUN_SECONDS + 5).observe(first, { lifecycle: 'stopping', phase: 'exited', exitCode: 143, step: 150, checkpoint: checkpoint(150) });
    assert.equal(run.state.attempts[0].outcome, 'run-duration-reached');
    assert.equal(run.state.lastCheckpoint?.step, 150);
  });

  it('reads a GKE flex-start node cut at its run duration as a move, not a failure of the trainer', () => {
    const run = new Run({ backend: 'gke', time: { deadlineAfter: '10d' } });
    run.send({ kind: 'start' });
    const first = run.running([flexOffer('us-central1-a', 'gke')], 60);
    run.at(120).observe(first, { phase: 'training', step: 10 });
    // The node shut down: the agent forwarded SIGTERM, uploaded the final checkpoint and exited 143.
    run.at(180).observe(first, { lifecycle: 'terminated', phase: 'exited', exitCode: 143, cut: true, step: 20, checkpoint: checkpoint(20) });
    assert.equal(run.state.attempts[0].outcome, 'run-duration-reached');
    assert.equal(run.state.preemptions, 0);
    assert.equal(run.state.restarts, 0);

    const failed = new Run({ backend: 'gke', time: { deadlineAfter: '10d' } });
    failed.send({ kind: 'start' });
    const only = failed.running([flexOffer('us-central1-a', 'gke')], 60);
    failed.at(120).observe(only, { phase: 'training', step: 10 });
    failed.at(180).observe(only, { lifecycle: 'terminated', phase: 'exited', exitCode: 143, step: 20 });
    assert.equal(failed.state.attempts[0].outcome, 'failed', 'without the cut, an exit 143 on its own node is the trainer\'s');
  });
});
