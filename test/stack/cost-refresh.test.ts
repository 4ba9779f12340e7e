/**
 * The cost in the web UI stays current: once the fleet observer speaks for a run, the run
 * has no reason of its own to wake for ten minutes (twice the observer's promised
 * silence), yet while its VM is billed it wakes every COST_REFRESH_SECONDS to upsert
 * SternaCostUsd. Checked on the run's recorded timers, against a real dev server.
 */
import { strict as assert } from 'node:assert';
import { observerOptions } from '../../activities/fleet';
import { COST_REFRESH_SECONDS } from '../../workflows/run/cost-refresh';
import { statusQuery } from '../../workflows/messages';
import { createSternaWorker } from '../../workers/worker';
import { eventually } from '../helpers/processes';
import { allEvents } from '../helpers/histories';
import { ScriptedProvider } from '../helpers/scripted-provider';
import { testEnv, uniqueTaskQueue, workflowBundle } from '../helpers/temporal';

describe('SternaCostUsd stays current while a run trains (dev server)', function () {
  this.timeout(120_000);

  it('caps every wait at the cost refresh while the VM is billed, though the observer would let it sleep ten minutes', async () => {
    const env = await testEnv();
    const taskQueue = uniqueTaskQueue('cost-refresh');
    // Trains until cancelled: the observer's reads do not move the script on.
    const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 36, onDemand: 72 }], { kind: 'exit', code: 0, afterPolls: 1_000_000 });
    const worker = await createSternaWorker({
      connection: env.nativeConnection,
      namespace: env.namespace,
      taskQueue,
      providers: { gce: provider },
      workflowBundle: await workflowBundle(require.resolve('../../workflows')),
      observer: observerOptions({ settings: { intervalSeconds: 0.5 }, watchSeconds: 5, idleExitSeconds: 5 }),
    });
    await worker.runUntil(async () => {
      const run = await env.client.workflow.start('trainingRun', {
        taskQueue,
        workflowId: `${taskQueue}-run`,
        args: [{ command: ['train'], checkpoint: { uri: 'gs://ckpt/run' }, resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] }, pricing: { mode: 'spot' }, recovery: { pollSeconds: 1 } }],
      });
      /** The waits (seconds) the run set once its VM was provisioned (before, it waits for its team's admission). */
      const timers = async () => {
        const events = await allEvents(env.client, run.workflowId);
        const provisioned = events.findIndex((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'provision');
        if (provisioned < 0) return undefined;
        return events.slice(provisioned).flatMap((e) => (e.timerStartedEventAttributes ? [Number(e.timerStartedEventAttributes.startToFireTimeout?.seconds ?? 0)] : []));
      };
      // Once the observer has spoken, the longest wait is the refresh, not the observer's ten minutes.
      const seen = await eventually('a wait capped by the cost refresh', async () => {
        const t = await timers();
        return t?.some((s) => s >= COST_REFRESH_SECONDS - 5) ? t : undefined;
      }, 90_000, 1000);
      assert.ok(seen.every((s) => s <= COST_REFRESH_SECONDS), `timer seconds: ${seen.join(', ')}`);
      assert.equal((await run.query(statusQuery)).phase, 'training');
      await run.cancel();
      await run.result().catch(() => undefined);
    });
  });
});
