/**
 * GPU utilisation and progress, server-less: the agent's published reading parsed, the
 * run machine folding readings into a time-weighted average, the idle rule stopping or
 * flagging a run, and step-of-total progress with its ETA.
 */
import { strict as assert } from 'node:assert';
import { parseAgentValues, parseGpu } from '../../activities/agent/script';
import { FailureType } from '../../workflows/failures';
import type { Action as Command } from '../../workflows/run/protocol';
import { progressOf } from '../../workflows/run/progress';
import { TimelineKind, type RunState } from '../../workflows/run/state';
import { currentDetailsOf, searchAttributesOf, statusOf } from '../../workflows/run/views';
import { SternaGpuUtil } from '../../workflows/search-attributes';
import { checkSpec, type RunSpecInput } from '../../workflows/spec';
import type { AgentSnapshot, GpuReading, Offer } from '../../workflows/types';
import { offerIn, RunHarness, specOf, T0 } from '../helpers/run-harness';

const WORKFLOW = 'run-gpu';
const OFFER: Offer = offerIn('us-central1-a', 0.36, { acceleratorCount: 2, machineType: 'g2-standard-24', onDemandPricePerHour: 1.4 });

function reading(utilisation: number): GpuReading {
  return { utilisation, memoryUsedMiB: 1000, memoryTotalMiB: 46068, gpus: 2 };
}

function gpuOf(run: Run): RunState['gpu'] {
  return run.state.gpu;
}

class Run extends RunHarness {
  constructor(monitoring: RunSpecInput['monitoring']) {
    super(WORKFLOW, specOf({ resources: { accelerators: [{ type: 'nvidia-l4', count: 2 }] }, monitoring }));
  }

  /** What a look saw of attempt 1, training unless `snapshot` says otherwise. */
  observed(snapshot: Partial<AgentSnapshot>): Command {
    return this.observe(1, { phase: 'training', ...snapshot });
  }

  /** Provisioned and training at t = 0. */
  training(): this {
    this.send({ kind: 'start' });
    this.provisioned([OFFER]);
    this.observed({ step: 0 });
    return this;
  }
}

describe('GPU utilisation (pure, no server)', () => {
  describe("the agent's reading", () => {
    it('parses "<mean %> <used MiB> <total MiB> <GPUs>" and refuses anything else', () => {
      assert.deepEqual(parseGpu('37 1024 46068 2'), { utilisation: 37, memoryUsedMiB: 1024, memoryTotalMiB: 46068, gpus: 2 });
      for (const bad of ['', '101 1 2 1', '50 1 2 0', '50 1 2', '-1 1 2 1', '50 1 2 1 9', 'N/A 1 2 1']) assert.equal(parseGpu(bad), undefined, bad);
      const values = parseAgentValues({ phase: 'training', step: '12', 'total-steps': '400', gpu: '0 512 23034 1' });
      assert.equal(values.totalSteps, 400);
      assert.deepEqual(values.gpu, { utilisation: 0, memoryUsedMiB: 512, memoryTotalMiB: 23034, gpus: 1 });
    });

    it('the spec refuses a utilisation outside (0, 100] and an unknown idle action, naming the field', () => {
      const base = { command: ['x'], checkpoint: { uri: 'gs://ckpt/run' }, resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] } };
      for (const [monitoring, path] of [
        [{ minGpuUtilisation: 0 }, 'monitoring.minGpuUtilisation'],
        [{ minGpuUtilisation: 120 }, 'monitoring.minGpuUtilisation'],
        [{ idleAction: 'pause' }, 'monitoring.idleAction'],
        [{ idleWindow: '0s' }, 'monitoring.idleWindow'],
      ] as const) {
        const check = checkSpec({ ...base, monitoring });
        assert.equal(check.ok, false);
        assert.ok(!check.ok && check.problems.some((p) => p.path === path), JSON.stringify(!check.ok && check.problems));
      }
      const ok = checkSpec({ ...base, monitoring: { minGpuUtilisation: 10, idleWindow: '5m', idleAction: 'flag' } });
      assert.ok(ok.ok && ok.spec.monitoring.idleWindow === 300);
    });
  });

  describe('the idle rule', () => {
    it('stops the run with GpuIdle once every reading stayed below the minimum for the window, and waits no longer than that', () => {
      const run = new Run({ minGpuUtilisation: 10, idleWindow: 60 }).training();
      run.at(10).observed({ step: 5, gpu: reading(0) });
      assert.equal(run.state.gpu?.belowSinceMs, T0 + 10_000);
      // Nothing new is heard: the wait ends at the window's end at the latest.
      const wait = run.at(11).send({ kind: 'tick' });
      assert.equal(wait.kind, 'wait');
      assert.ok((wait as { untilMs: number }).untilMs <= T0 + 70_000);
      assert.equal(run.at(69).observed({ step: 6, gpu: reading(3) }).kind, 'wait');
      const stop = run.at(70).send({ kind: 'tick' });
      assert.equal(stop.kind, 'fail');
      assert.equal((stop as { failure: string }).failure, FailureType.GpuIdle);
      assert.match((stop as { message: string }).message, /below 10% utilisation for 60 s \(monitoring\.idleWindow 60 s; last reading 3% on 2 GPUs\); stopped/);
    });

    it('a reading at or above the minimum starts the window over', () => {
      const run = new Run({ minGpuUtilisation: 10, idleWindow: 60 }).training();
      run.at(10).observed({ gpu: reading(0) });
      run.at(50).observed({ gpu: reading(10) });
      assert.equal(run.state.gpu?.belowSinceMs, undefined);
      run.at(55).observed({ gpu: reading(2) });
      // Its looks find the same reading (guest attributes hold the last one published).
      assert.notEqual(run.at(100).observed({ gpu: reading(2) }).kind, 'fail');
      assert.equal(run.at(115).observed({ gpu: reading(2) }).kind, 'fail');
    });

    it('readings while staging do not count: the GPUs idle by nature then', () => {
      const run = new Run({ minGpuUtilisation: 10, idleWindow: 60 });
      run.send({ kind: 'start' });
      run.send({ kind: 'offers', offers: [OFFER] });
      run.send({ kind: 'provisioned', attempt: 1, adopted: false, startedAt: new Date(T0).toISOString() });
      run.at(5).observed({ phase: 'staging', gpu: reading(0) });
      assert.equal(gpuOf(run), undefined);
      run.at(100).observed({ phase: 'training', step: 1, gpu: reading(0) });
      assert.equal(gpuOf(run)?.belowSinceMs, T0 + 100_000);
    });

    it('"flag" records it once in the timeline and the status, and the run goes on; busy GPUs clear the flag', () => {
      const run = new Run({ minGpuUtilisation: 25, idleWindow: 30, idleAction: 'flag' }).training();
      run.at(10).observed({ gpu: reading(5) });
      assert.notEqual(run.at(40).observed({ gpu: reading(5) }).kind, 'fail');
      assert.notEqual(run.at(45).observed({ gpu: reading(5) }).kind, 'fail');
      assert.equal(run.state.timeline.filter((e) => e.kind === TimelineKind.GpuIdle).length, 1);
      assert.equal(statusOf(run.state, run.now, run.spec).gpu?.idle, true);
      run.at(50).observed({ gpu: reading(80) });
      assert.equal(statusOf(run.state, run.now, run.spec).gpu?.idle, false);
    });

    it('no minimum in the spec: readings are kept, nothing stops', () => {
      const run = new Run({}).training();
      run.at(10).observed({ gpu: reading(0) });
      assert.notEqual(run.at(100_000).observed({ gpu: reading(0) }).kind, 'fail');
      assert.equal(run.state.gpu?.utilisation, 0);
    });
  });

  it('averages utilisation over time, not over readings, and publishes it as SternaGpuUtil', () => {
    const run = new Run({}).training();
    run.at(10).observed({ gpu: reading(100) });
    run.at(40).observed({ gpu: reading(0) });
    run.at(41).observed({ gpu: reading(0) });
    run.at(50).observed({ gpu: reading(0) });
    // 100% for 30 s, then 0% for 10 s.
    assert.equal(statusOf(run.state, run.now, run.spec).gpu?.meanUtilisation, 75);
    const attribute = searchAttributesOf(run.state, run.now).find((a) => a.key.name === SternaGpuUtil.name);
    assert.equal(attribute?.value, 75);
  });

  describe('progress', () => {
    it('step of the total the trainer reported, with percent, rate, ETA and the predicted cost at the live price', () => {
      const run = new Run({}).training();
      run.at(10).observed({ step: 10, totalSteps: 110 });
      run.at(60).observed({ step: 60, totalSteps: 110 });
      const p = progressOf(run.state, run.spec, 0.5, run.now);
      assert.deepEqual({ step: p.step, totalSteps: p.totalSteps, stepsPerSecond: p.stepsPerSecond, etaSeconds: p.etaSeconds }, { step: 60, totalSteps: 110, stepsPerSecond: 1, etaSeconds: 50 });
      assert.ok(Math.abs(p.percent! - (60 / 110) * 100) < 1e-9);
      assert.ok(Math.abs(p.predictedCostUsd! - (0.5 + (0.36 * 50) / 3600)) < 1e-12);
      // Time since the last word counts as progress made.
      assert.equal(progressOf(run.state, run.spec, 0.5, run.now + 20_000).etaSeconds, 30);
      assert.match(currentDetailsOf(run.state, run.spec, run.now), /\*\*Step\*\* 60 of 110 \(54\.5%\) · \*\*ETA\*\* 50s/);
    });

    it("the spec's monitoring.totalSteps wins over the trainer's report; without a total there is no percent", () => {
      const run = new Run({ totalSteps: 1000 }).training();
      run.at(10).observed({ step: 100, totalSteps: 500 });
      assert.equal(progressOf(run.state, run.spec, 0, run.now).percent, 10);
      const unknown = new Run({}).training();
      unknown.at(10).observed({ step: 100 });
      assert.deepEqual(progressOf(unknown.state, unknown.spec, 0, unknown.now), { step: 100, totalSteps: undefined });
    });
  });
});
