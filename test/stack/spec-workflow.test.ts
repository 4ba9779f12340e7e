/**
 * Specs that pass no client-side validation reach the workflow as a user would send
 * them (a raw workflow start, as `temporal workflow start` does): the workflow must
 * fail them at once with InvalidSpec naming the field, never get stuck on a workflow
 * task that throws.
 */
import { strict as assert } from 'node:assert';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { SpecProblem } from '../../workflows/spec';
import { ScriptedProvider } from '../helpers/scripted-provider';
import { sternaTestWorker, testEnv, uniqueTaskQueue } from '../helpers/temporal';

const base = {
  command: ['python', 'train.py'],
  checkpoint: { uri: 'gs://ckpt/run' },
  resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
  pricing: { mode: 'spot' },
  recovery: { pollSeconds: 0.2 },
};

describe('trainingRun refuses what would break it later', function () {
  this.timeout(120_000);

  const cases: [string, Record<string, unknown>, string][] = [
    ['deadlineAfter: 1e20', { time: { deadlineAfter: 1e20 } }, 'time.deadlineAfter'],
    ['deadlineAfter: "99999999999999d"', { time: { deadlineAfter: '99999999999999d' } }, 'time.deadlineAfter'],
    ['maxRunDuration: 1e300', { time: { maxRunDuration: 1e300 } }, 'time.maxRunDuration'],
    ['an env value with NUL bytes', { env: { X: 'x\u0000INJECTED=1\u0000/bin/sh\u0000-c\u0000touch pwned' } }, 'env.X'],
  ];

  for (const [what, overrides, field] of cases) {
    it(`fails a run started with ${what} at once, as InvalidSpec naming ${field}`, async () => {
      const taskQueue = uniqueTaskQueue('spec');
      const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 }]);
      const worker = await sternaTestWorker(taskQueue, { gce: provider });
      const env = await testEnv();
      await worker.runUntil(async () => {
        const handle = await env.client.workflow.start('trainingRun', { taskQueue, workflowId: `${taskQueue}-run`, args: [{ ...base, ...overrides }] });
        // A workflow task that throws is retried forever: the run would never end.
        const outcome = await Promise.race([handle.result().then(
          () => 'completed',
          (err: unknown) => err,
        ), new Promise((resolve) => setTimeout(() => resolve('stuck'), 15_000))]);
        if (outcome === 'stuck') await handle.terminate('stuck: test cleanup');
        assert.ok(outcome instanceof WorkflowFailedError, `the run ended as ${String(outcome)}`);
        const cause = outcome.cause;
        assert.ok(cause instanceof ApplicationFailure);
        assert.equal(cause.type, 'InvalidSpec');
        const [details] = cause.details as [{ problems: SpecProblem[] }];
        assert.deepEqual(details.problems.map((p) => p.path), [field]);
        assert.deepEqual(provider.created, [], 'no VM was created');
      });
    });
  }
});
