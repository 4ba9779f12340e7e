/**
 * What the worker's activities count, read back from its prom-client registry: a real run
 * on the real dev server, with a scripted cloud whose first zone stocks out and whose
 * second preempts once.
 */
import { strict as assert } from 'node:assert';
import type { Worker } from '@temporalio/worker';
import { SternaMetrics } from '../../activities/metrics/registry';
import { createSternaWorker } from '../../workers/worker';
import type { RunResult } from '../../workflows/run/views';
import { ScriptedProvider } from '../helpers/scripted-provider';
import { testEnv, uniqueTaskQueue, workflowBundle } from '../helpers/temporal';

interface Value {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

async function values(metrics: SternaMetrics, name: string): Promise<Value[]> {
  const metric = metrics.registry.getSingleMetric(name);
  assert.ok(metric, `${name} is registered`);
  return (await metric.get()).values as Value[];
}

describe('metrics the activities feed', function () {
  this.timeout(120_000);
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  after(async () => {
    worker?.shutdown();
    await running;
  });

  it('counts attempts, named provision failures, one preemption per resource, cost and GPU-hours by zone and model', async () => {
    const env = await testEnv();
    const taskQueue = uniqueTaskQueue('metrics');
    const metrics = new SternaMetrics();
    // $36/h spot; a stocks out first, b is preempted once; after that every VM completes.
    const provider = new ScriptedProvider([
      { zone: 'us-central1-a', spot: 36, onDemand: 72 },
      { zone: 'us-central1-b', spot: 36, onDemand: 72 },
    ])
      .script('us-central1-a', { kind: 'stockout' })
      .script('us-central1-b', { kind: 'preempt', step: 50 }, { kind: 'exit', code: 0, step: 100 });
    worker = await createSternaWorker({ connection: env.nativeConnection, namespace: env.namespace, taskQueue, providers: { gce: provider }, workflowBundle: await workflowBundle(require.resolve('../../workflows')), metrics });
    running = worker.run();
    const result = (await env.client.workflow.execute('trainingRun', {
      taskQueue,
      workflowId: `${taskQueue}-run`,
      args: [{ command: ['python', 'train.py'], checkpoint: { uri: 'gs://ckpt/run' }, resources: { accelerators: [{ type: 'nvidia-l4', count: 2 }] }, pricing: { mode: 'spot' }, recovery: { pollSeconds: 0.2, zoneCooldown: 0 } }],
    })) as RunResult;
    assert.equal(result.status, 'completed');
    assert.equal(result.preemptions, 1);

    // What the run's own result says happened, zone by zone, is what was counted.
    const byZone = (outcomes: string[], value: (a: RunResult['attempts'][number]) => number) => {
      const sums = new Map<string, number>();
      for (const a of result.attempts) if (outcomes.includes(a.outcome)) sums.set(a.zone, (sums.get(a.zone) ?? 0) + value(a));
      return [...sums].map(([zone, v]) => ({ zone, value: v })).sort((x, y) => x.zone.localeCompare(y.zone));
    };
    const counted = async (name: string, failure?: string) =>
      (await values(metrics, name))
        .map((v) => {
          assert.deepEqual({ model: v.labels.model, accelerator: v.labels.accelerator, failure: v.labels.failure }, { model: 'SPOT', accelerator: 'nvidia-l4', failure });
          return { zone: String(v.labels.zone), value: v.value };
        })
        .sort((x, y) => x.zone.localeCompare(y.zone));
    assert.deepEqual(await counted('sterna_attempts_total'), byZone(['completed', 'preempted'], () => 1));
    assert.deepEqual(await counted('sterna_provision_failures_total', 'Stockout'), byZone(['stockout'], () => 1));
    assert.deepEqual(await counted('sterna_preemptions_total'), byZone(['preempted'], () => 1));
    // Cost and GPU-hours of the attempts that ran, from their release windows at the offer price.
    const cost = await counted('sterna_cost_usd_total');
    const ledger = byZone(['completed', 'preempted'], (a) => a.costUsd);
    assert.deepEqual(cost.map((c) => c.zone), ledger.map((l) => l.zone));
    // The ledger and the release window may differ by the time between the resource's stop and the release.
    for (const [i, c] of cost.entries()) assert.ok(Math.abs(c.value - ledger[i].value) < 36 / 3600, `${c.zone}: metric ${c.value} against the ledger ${ledger[i].value}`);
    const gpuHours = await counted('sterna_gpu_hours_total');
    for (const [i, g] of gpuHours.entries()) assert.ok(Math.abs(g.value - (2 * ledger[i].value) / 36) < 2 / 3600, `${g.zone}: GPU-hours ${g.value}`);
    // Latencies: one per provision (by outcome), one per preemption released.
    const provisions = (await values(metrics, 'sterna_provision_seconds')).filter((v) => v.metricName === 'sterna_provision_seconds_count');
    assert.equal(provisions.reduce((s, v) => s + v.value, 0), result.attempts.length);
    assert.equal(provisions.filter((v) => v.labels.outcome === 'Stockout').reduce((s, v) => s + v.value, 0), 1);
    const detections = (await values(metrics, 'sterna_preemption_detection_seconds')).filter((v) => v.metricName === 'sterna_preemption_detection_seconds_count');
    assert.deepEqual(detections.map((v) => v.value), [1]);
    // The team queue gauge, for the team queues to feed.
    metrics.setTeamQueueLength('default', 3); // a team is a namespace: here the dev server's
    assert.deepEqual((await values(metrics, 'sterna_team_queue_length')).map((v) => ({ ...v.labels, value: v.value })), [{ team: 'default', value: 3 }]);
  });
});
