/**
 * Throughput measured by past runs (workflows/plan/measured.ts, run/progress.ts
 * `noteTraining`): what an attempt's training tells the throughput memory, how the
 * memory keeps it, and what a plan reads back. Pure: no server.
 */
import { strict as assert } from 'node:assert';
import { emptyThroughputMemory, isThroughputSample, MAX_SAMPLES, measuredFor, measuredLossFor, preemptionLoss, recordSample, sampleOf, samplesToTell, type ThroughputSample } from '../../workflows/plan/measured';
import { markProgress, noteTraining } from '../../workflows/run/progress';
import { startingState } from '../../workflows/run/requests';
import { AttemptOutcome, Phase, type Attempt } from '../../workflows/run/state';
import { parseSpec } from '../../workflows/spec';
import type { Offer } from '../../workflows/types';

const NOW = Date.parse('2030-01-01T00:00:00Z');
const offer = (accelerator = 'nvidia-l4', count = 1): Offer => ({
  backend: 'gce',
  zone: 'us-central1-a',
  region: 'us-central1',
  accelerator,
  acceleratorCount: count,
  machineType: 'g2-standard-4',
  provisioningModel: 'SPOT',
  pricePerHour: 0.2,
  onDemandPricePerHour: 0.6,
  quotaAvailable: true,
});
/** Trained `steps` in `seconds`, from step `fromStep` heard at `fromMs`. */
const trained = (steps: number, seconds: number, fromStep = 0, fromMs = NOW): Attempt['training'] => ({ fromStep, fromMs, steps, seconds });
const attempt = (n: number, training?: Attempt['training'], o = offer()): Attempt => ({
  attempt: n,
  ref: { backend: 'gce', name: `run-a${n}`, zone: o.zone },
  offer: o,
  outcome: AttemptOutcome.Preempted,
  released: true,
  ...(training ? { training } : {}),
});
const sample = (over: Partial<ThroughputSample> = {}): ThroughputSample => ({ specName: 'bert', accelerator: 'nvidia-l4', gpus: 1, steps: 1000, seconds: 100, at: NOW, resource: 'run-a1', ...over });
const spec = (name?: string) => parseSpec({ ...(name ? { name } : {}), command: ['train'], checkpoint: { uri: 'gs://bucket/ckpt' }, resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] }, monitoring: { totalSteps: 5000 } }, { nowMs: NOW });

describe('throughput measured by past runs (pure)', () => {
  it('measures an attempt from its first step heard to its last new step, not the quiet after it', () => {
    const state = startingState(spec('bert'), 'run', NOW);
    state.phase = Phase.Training;
    const a = attempt(1);
    state.attempts.push(a);
    markProgress(state, 1, 100, NOW);
    noteTraining(state, a, 100, NOW);
    assert.equal(a.training, undefined, 'no step trained since the mark');
    noteTraining(state, a, 600, NOW + 50_000);
    noteTraining(state, a, 1100, NOW + 100_000);
    noteTraining(state, a, 1100, NOW + 160_000);
    assert.deepEqual(a.training, { fromStep: 100, fromMs: NOW, steps: 1000, seconds: 100 });
    // Another attempt's mark says nothing about this one.
    markProgress(state, 2, 0, NOW + 200_000);
    noteTraining(state, a, 5000, NOW + 300_000);
    assert.deepEqual(a.training, { fromStep: 100, fromMs: NOW, steps: 1000, seconds: 100 });
  });

  it('turns a released attempt into a sample per GPU of the gang, and only with a spec name and enough training', () => {
    const a = attempt(1, trained(1000, 100), offer('nvidia-l4', 2));
    assert.deepEqual(sampleOf(a, 'bert', 3, 5000, NOW), { specName: 'bert', accelerator: 'nvidia-l4', gpus: 6, steps: 1000, seconds: 100, totalSteps: 5000, at: NOW, resource: 'run-a1' });
    assert.equal(sampleOf(a, undefined, 1, 5000, NOW), undefined, 'nothing to file it under');
    const slice = attempt(4, trained(1000, 100), { ...offer('nvidia-a100-80gb', 1), partition: '3g.40gb' });
    assert.equal(sampleOf(slice, 'bert', 1, 5000, NOW)?.gpus, 3 / 7, 'a 3g partition is three sevenths of a GPU');
    assert.equal(sampleOf(attempt(2), 'bert', 1, 5000, NOW), undefined, 'never trained');
    assert.equal(sampleOf(attempt(3, trained(10, 1)), 'bert', 1, 5000, NOW), undefined, 'too short to measure');
  });

  it('tells each released attempt once, with the total steps the spec gives', () => {
    const state = startingState(spec('bert'), 'run', NOW);
    state.attempts.push(attempt(1, trained(1000, 100)), { ...attempt(2, trained(500, 50)), released: false });
    const first = samplesToTell(state, spec('bert'), new Set(), NOW);
    assert.deepEqual([first.attempts, first.samples.map((s) => [s.resource, s.totalSteps])], [[1], [['run-a1', 5000]]]);
    assert.deepEqual(samplesToTell(state, spec('bert'), new Set([1]), NOW).samples, []);
  });

  it('measures what a preemption cost: the gap between the last step heard and the next, less the progress in it', () => {
    // Steps 0..1000 heard over 100 s (10 a second); preempted; the next attempt resumed from
    // the checkpoint at 900 and was first heard at step 950, 40 s after the last step heard.
    const before = { ...attempt(1, trained(1000, 100, 0, NOW)), outcome: AttemptOutcome.Preempted };
    const after = attempt(2, trained(500, 50, 950, NOW + 140_000));
    assert.equal(preemptionLoss(before, after), 40 + 50 / 10, '40 s of wall time, 5 s of it re-training the 50 steps lost');
    assert.equal(preemptionLoss({ ...before, outcome: AttemptOutcome.Stockout }, after), undefined, 'no preemption, no loss');
    const state = startingState(spec('bert'), 'run', NOW);
    state.attempts.push(before, { ...attempt(2), outcome: AttemptOutcome.Stockout }, { ...after, attempt: 3 });
    const told = samplesToTell(state, spec('bert'), new Set([1, 2]), NOW);
    assert.deepEqual(told.samples.map((s) => s.lossSeconds), [45], 'a stockout between them is part of the gap');
    const memory = [45, 15, 30].reduce((m, loss, i) => recordSample(m, sample({ resource: `r${i}`, lossSeconds: loss })), emptyThroughputMemory());
    assert.deepEqual(measuredLossFor(memory, 'bert', ['nvidia-l4']), { seconds: 30, samples: 3 });
    assert.equal(measuredLossFor(memory, 'gpt', ['nvidia-l4']), undefined);
  });

  it('pools the kept samples per GPU, counts a resource once, and keeps only the newest', () => {
    let memory = recordSample(emptyThroughputMemory(), sample());
    memory = recordSample(memory, sample({ steps: 999_999 }));
    memory = recordSample(memory, sample({ resource: 'run-a2', gpus: 2, steps: 3000, seconds: 100, at: NOW + 1, totalSteps: 7000 }));
    assert.deepEqual(measuredFor(memory, 'bert', ['nvidia-l4']), { 'nvidia-l4': { stepsPerGpuSecond: 4000 / 300, samples: 2, seconds: 200, totalSteps: 7000 } });
    assert.deepEqual(measuredFor(memory, 'gpt', ['nvidia-l4']), {}, 'another spec learns nothing from it');
    assert.deepEqual(measuredFor(memory, 'bert', ['nvidia-tesla-t4']), {});
    for (let i = 0; i < MAX_SAMPLES + 5; i++) memory = recordSample(memory, sample({ resource: `run-b${i}`, steps: 50, seconds: 10, at: NOW + 10 + i }));
    const l4 = measuredFor(memory, 'bert', ['nvidia-l4'])['nvidia-l4'];
    assert.deepEqual([l4.samples, l4.stepsPerGpuSecond], [MAX_SAMPLES, 5], 'the older, faster samples are gone');
  });

  it('refuses malformed samples (signals come from outside)', () => {
    assert.equal(isThroughputSample(sample()), true);
    for (const bad of [sample({ steps: -1 }), sample({ seconds: Number.NaN }), sample({ specName: '' }), { ...sample(), gpus: '1' }, null]) assert.equal(isThroughputSample(bad), false, JSON.stringify(bad));
  });
});
