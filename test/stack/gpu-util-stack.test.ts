/**
 * GPU utilisation end to end: the emulator's VMs carry a stand-in nvidia-smi that reports
 * what the admin API tells it, the real agent parses it and publishes it, and the run
 * stops (or flags) idle GPUs as its spec says.
 */
import { strict as assert } from 'node:assert';
import { WorkflowFailedError } from '@temporalio/client';
import { FailureType, namedFailureOf } from '../../workflows/failures';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunResult } from '../../workflows/run/views';
import { TimelineKind } from '../../workflows/run/state';
import type { RunSpecInput } from '../../workflows/spec';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';

/** The example trainer, for `steps` steps of 25 ms. */
function trainFor(steps: number, monitoring: RunSpecInput['monitoring']): RunSpecInput {
  const spec = exampleSpec();
  return { ...spec, command: ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', String(steps), '--step-ms', '25'], pricing: { mode: 'spot', budgetUsd: 5 }, monitoring };
}

describe('GPU utilisation on the emulator stack', function () {
  this.timeout(240_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack();
    await stack.startWorker();
  });
  after(async () => stack?.stop());
  afterEach(async () => void (await stack.emulator.admin.setGpuTelemetry(null)));

  it('a run whose GPUs report 0% for monitoring.idleWindow is stopped with GpuIdle, and its VM released', async () => {
    await stack.emulator.admin.setGpuTelemetry({ utilisation: 0 });
    // 4,000 steps of 25 ms: far longer than the 3 s window.
    const run = await stack.start(trainFor(4000, { minGpuUtilisation: 20, idleWindow: 3 }));
    const err = await run.result().then(
      () => assert.fail('the run completed, though its GPUs were idle'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof WorkflowFailedError);
    const named = namedFailureOf(err);
    assert.equal(named?.type, FailureType.GpuIdle);
    assert.match(named!.message, /GPUs below 20% utilisation for \d+ s \(monitoring\.idleWindow 3 s; last reading 0% on 1 GPU\); stopped/);
    const status = await run.query(statusQuery);
    assert.equal(status.phase, 'failed');
    assert.deepEqual({ utilisation: status.gpu?.utilisation, gpus: status.gpu?.gpus, meanUtilisation: status.gpu?.meanUtilisation }, { utilisation: 0, gpus: 1, meanUtilisation: 0 });
    assert.ok(status.gpu!.memoryTotalMiB > 0);
    assert.ok((status.step ?? 0) < 4000, 'stopped before the trainer finished');
    assert.deepEqual(await stack.provider.listRunResources(runKey(run.workflowId)), []);
    const described = await run.describe();
    assert.equal(described.searchAttributes.SternaGpuUtil?.[0], 0);
  });

  it('"flag" only flags: the run finishes, its timeline and status say the GPUs idled', async () => {
    await stack.emulator.admin.setGpuTelemetry({ utilisation: 5, memoryUsedFraction: 0.1 });
    const run = await stack.start(trainFor(400, { minGpuUtilisation: 20, idleWindow: 1, idleAction: 'flag' }));
    const result = (await run.result()) as RunResult;
    assert.equal(result.status, 'completed');
    assert.equal(result.finalStep, 400);
    const status = await run.query(statusQuery);
    assert.equal(status.gpu?.utilisation, 5);
    assert.equal(status.gpu?.idle, true);
    assert.equal(status.timeline.filter((e) => e.kind === TimelineKind.GpuIdle).length, 1);
    // The trainer reported its total: progress is complete.
    assert.deepEqual({ step: status.progress?.step, totalSteps: status.progress?.totalSteps, percent: status.progress?.percent }, { step: 400, totalSteps: 400, percent: 100 });
  });

  it("busy GPUs (the emulator's default reading) stop nothing", async () => {
    const run = await stack.start(trainFor(400, { minGpuUtilisation: 20, idleWindow: 1 }));
    const result = (await run.result()) as RunResult;
    assert.equal(result.status, 'completed');
    const status = await run.query(statusQuery);
    assert.equal(status.gpu?.utilisation, 90);
    assert.equal(status.gpu?.idle, false);
  });
});
