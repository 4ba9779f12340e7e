/**
 * Zone memory on the real stack (Temporal dev server, GCE emulator, real VM processes):
 * a run's stockout reaches the project's memory, and the next run skips that zone
 * without trying it; `sterna zones` shows it.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { readZoneMemory } from '../../activities/zones/client';
import { rankOffers } from '../../workflows/placement';
import { zoneMemoryWorkflowId } from '../../workflows/zones/contract';
import { zonePrior, type ZoneMemory, type ZoneOutcome } from '../../workflows/zones/memory';
import type { ZoneRow } from '../../cli/zones';
import { eventually } from '../helpers/processes';
import { exampleSpec, PROJECT, startStack, type Stack } from '../helpers/stack';
import { queryCountingClient, testServerAddress, uniqueTaskQueue, workflowBundle } from '../helpers/temporal';
import { allEvents, saveHistory } from '../helpers/histories';
import { zoneOutcomesSignal } from '../../workflows/zones/messages';
import type { zoneMemory } from '../../workflows/zones/zone-memory';
import { observerOptions } from '../../activities/fleet';
import { createSternaWorker } from '../../workers/worker';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { trainingRun } from '../../workflows/run/training-run';

const cli = join(__dirname, '..', '..', 'cli', 'main.js');

async function sternaZones(stack: Stack, args: string[]): Promise<string> {
  const env = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: stack.env.namespace };
  return new Promise((resolve, reject) =>
    execFile(process.execPath, [cli, 'zones', ...args], { env, timeout: 60_000 }, (err, stdout, stderr) => (err ? reject(new Error(`${String(err)}\n${stderr}`)) : resolve(stdout))),
  );
}

/** How many times the run scheduled each activity, by name. */
async function activitiesScheduled(stack: Stack, workflowId: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const e of await allEvents(stack.env.client, workflowId)) {
    const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
    if (name) counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

describe('zone memory across runs (dev server + emulator)', function () {
  this.timeout(300_000);
  let stack: Stack;

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  it('a run started right after another run\'s stockout in zone A skips A without trying it', async () => {
    // The zone every run tries first: the same pure ranking the workflow uses.
    const [preferred] = rankOffers(await stack.provider.findOffers({ accelerators: [{ type: 'nvidia-l4', count: 1 }], provisioningModels: ['SPOT'] }), [], {
      nowMs: Date.now(),
      cooldownSeconds: 1800,
      expectedHours: 1,
      models: ['SPOT'],
    });
    const zoneA = preferred.zone;
    const spec = exampleSpec({ resources: { accelerators: [{ type: preferred.accelerator, count: 1 }] } });
    const memoryId = zoneMemoryWorkflowId(stack.taskQueue, 'gce', PROJECT);
    const key = { zone: zoneA, accelerator: preferred.accelerator, model: 'SPOT' } as const;

    await stack.emulator.setSpotCapacity(zoneA, preferred.accelerator, 0);
    const first = await stack.start(spec);
    const told = await eventually('the first run\'s stockout in the zone memory', async () => {
      const memory = await readZoneMemory(stack.env.client, memoryId);
      return zonePrior(memory, key, Date.now()).lastStockoutAt ? memory : undefined;
    });
    // Zone A has capacity again: a run that tried it now would get it.
    await stack.emulator.setSpotCapacity(zoneA, preferred.accelerator, undefined);
    const second = await stack.start(spec);

    const [r1, r2] = await Promise.all([first.result(), second.result()]);
    assert.deepEqual({ zone: r1.attempts[0].zone, outcome: r1.attempts[0].outcome }, { zone: zoneA, outcome: 'stockout' });
    assert.equal(r1.attempts.at(-1)!.outcome, 'completed');
    assert.equal(zonePrior(told, key, Date.now()).inCooldown, true);
    // Every attempt is recorded before its create: none of the second run's was in A.
    assert.deepEqual(r2.attempts.filter((a) => a.zone === zoneA), [], `the second run tried ${r2.attempts.map((a) => a.zone).join(', ')}`);
    assert.equal(r2.attempts.length, 1);
    assert.equal(r2.attempts[0].outcome, 'completed');

    // Each release told both memories (zones, throughput) in one activity, never in two.
    const told1 = await activitiesScheduled(stack, first.workflowId);
    assert.deepEqual(
      { recordReleasedAttempts: told1.recordReleasedAttempts, recordZoneOutcomes: told1.recordZoneOutcomes, recordThroughput: told1.recordThroughput },
      { recordReleasedAttempts: r1.attempts.length, recordZoneOutcomes: undefined, recordThroughput: undefined },
    );

    // The completed spot VMs told the memory how long they ran, without a preemption.
    const memory: ZoneMemory = await eventually('both runs\' lifetimes in the zone memory', async () => {
      const m = await readZoneMemory(stack.env.client, memoryId);
      return m.records.reduce((n, r) => n + r.lifetimes.length, 0) >= 2 ? m : undefined;
    });
    const ran = zonePrior(memory, { ...key, zone: r2.attempts[0].zone }, Date.now());
    assert.ok(ran.exposureHours > 0 && ran.medianSpotLifetimeHours! > 0, JSON.stringify(ran));
    assert.equal(ran.preemptionsPerHour, 0);

    const rows = JSON.parse(await sternaZones(stack, ['--project', PROJECT, '--task-queue', stack.taskQueue, '--json'])) as ZoneRow[];
    const a = rows.find((r) => r.zone === zoneA && r.accelerator === preferred.accelerator && r.model === 'SPOT');
    assert.deepEqual(Object.keys(a!).sort(), ['accelerator', 'inCooldown', 'lastStockout', 'medianSpotLifetimeHours', 'model', 'nodes', 'preemptionsPerHour', 'zone']);
    assert.equal(a!.nodes, 1, 'single VMs');
    assert.equal(a!.inCooldown, true);
    assert.equal(a!.lastStockout, zonePrior(memory, key, Date.now()).lastStockoutAt);
    // Without --project it finds every memory of the namespace (visibility may lag a moment).
    await eventually('the memory in `sterna zones` without --project', async () => {
      const all = JSON.parse(await sternaZones(stack, ['--json'])) as ZoneRow[];
      return all.some((r) => r.zone === zoneA && r.accelerator === preferred.accelerator && r.model === 'SPOT' && r.inCooldown) ? all : undefined;
    });

    // Re-record with STERNA_RECORD_HISTORIES=test/histories (see replay-histories.test.ts).
    const record = process.env.STERNA_RECORD_HISTORIES;
    if (record) {
      await saveHistory(join(record, 'zone-memory-run-tells-a-stockout.binpb'), first.workflowId);
      await saveHistory(join(record, 'zone-memory-run-skips-the-zone.binpb'), second.workflowId);
      await saveHistory(join(record, 'zone-memory-workflow.binpb'), memoryId);
    }
  });

  it('keeps everything it was told across continue-as-new', async () => {
    const workflowId = zoneMemoryWorkflowId(stack.taskQueue, 'gce', 'continue-as-new-test');
    const now = Date.now();
    // One stockout per signal, past the workflow's signals per run (500), over 100 zones.
    const SIGNALS = 510;
    for (let i = 0; i < SIGNALS; i++) {
      await stack.env.client.workflow.signalWithStart<typeof zoneMemory, [ZoneOutcome[]]>('zoneMemory', {
        workflowId,
        taskQueue: stack.taskQueue,
        args: [{}],
        signal: zoneOutcomesSignal,
        signalArgs: [[{ zone: `zone-${i % 100}`, accelerator: 'nvidia-l4', model: 'SPOT', kind: 'stockout', at: now, resource: `vm-${i}` }]],
      });
    }
    const memory = await eventually(`all ${SIGNALS} stockouts in the memory`, async () => {
      const m = await readZoneMemory(stack.env.client, workflowId);
      return m.records.length === 100 && m.counted.length === SIGNALS ? m : undefined;
    });
    const told = memory.records.reduce((sum, r) => sum + zonePrior(memory, r, now).stockouts, 0);
    assert.ok(Math.abs(told - SIGNALS) < 0.01, `${told} stockouts remembered`);
    const latest = await stack.env.client.workflow.getHandle(workflowId).describe();
    const { events } = await stack.env.client.workflow.getHandle(workflowId, latest.runId).fetchHistory();
    assert.ok(events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId, 'the memory continued as new');
  });

  it('answers a wave of concurrent readers with one query, and a later reader with a fresh one', async () => {
    const workflowId = zoneMemoryWorkflowId(stack.taskQueue, 'gce', 'continue-as-new-test');
    const { client: counted, queries } = queryCountingClient(stack.env);
    const wave = await Promise.all(Array.from({ length: 20 }, () => readZoneMemory(counted, workflowId)));
    assert.equal(queries(), 1, 'one query for 20 readers at once');
    assert.ok(wave.every((m) => m === wave[0] && m.records.length === 100));
    await readZoneMemory(counted, workflowId);
    assert.equal(queries(), 2, 'a reader after the wave asks again');
  });

  it('the fleet observer tells the memory of a preemption its run can no longer tell, with how long the VM ran', async () => {
    // A worker that keeps an observer, on its own task queue (so its own zone memory).
    const taskQueue = uniqueTaskQueue('zones-observer');
    const worker = await createSternaWorker({
      connection: stack.env.nativeConnection,
      namespace: stack.env.namespace,
      taskQueue,
      providers: { gce: stack.provider },
      observer: observerOptions({ settings: { intervalSeconds: 1 }, watchSeconds: 10, idleExitSeconds: 600 }),
      workflowBundle: await workflowBundle(require.resolve('../../workflows')),
    });
    const running = worker.run();
    try {
      const spec = exampleSpec({ command: ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', '100000', '--step-ms', '25'] });
      const run = await stack.env.client.workflow.start<typeof trainingRun>('trainingRun', { taskQueue, workflowId: `${taskQueue}-run`, args: [spec] });
      const training = await eventually('the run training', async () => {
        const s = await run.query(statusQuery);
        return s.phase === 'training' ? s : undefined;
      }, 120_000);
      const [vm] = await stack.provider.listRunResources(runKey(run.workflowId));
      // The run is gone (as after `temporal workflow terminate`): only the observer can tell.
      await run.terminate('zone memory test: a run that cannot tell');
      await stack.emulator.preempt(vm.zone, vm.name);

      const memoryId = zoneMemoryWorkflowId(taskQueue, 'gce', PROJECT);
      const accelerator = training.ledger[0].accelerator.split(' ')[0];
      const prior = await eventually('the observer\'s preemption in the zone memory', async () => {
        const p = zonePrior(await readZoneMemory(stack.env.client, memoryId), { zone: vm.zone, accelerator, model: 'SPOT' }, Date.now());
        return p.preemptions > 0 ? p : undefined;
      }, 120_000);
      assert.ok(prior.preemptions > 0.99 && prior.preemptions <= 1, `counted once: ${prior.preemptions}`);
      assert.ok(prior.exposureHours > 0, 'the listing\'s last start and stop give the VM\'s lifetime');
      assert.ok(prior.preemptionsPerHour! > 0);
      assert.ok(Math.abs(prior.medianSpotLifetimeHours! - prior.exposureHours) < 1e-3 * prior.exposureHours, 'one lifetime: the median is it');
    } finally {
      worker.shutdown();
      await running;
    }
  });
});
