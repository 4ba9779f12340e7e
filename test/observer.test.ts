/**
 * The fleet observer against the real stack: the Temporal dev server, the GCE emulator
 * with real VM processes, the real compute client. Runs are started normally; what the
 * observer tells them is read back from their histories (`observation` signals), and
 * its API calls are counted on the wire by a proxy in front of the emulator.
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InstancesClient } from '@google-cloud/compute';
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { createActivities } from '../activities';
import { createFleetActivities, observerOptions, startObserver, type ObserverOptions } from '../activities/fleet';
import { resume } from '../activities/fleet/memory';
import { createNotifyActivities } from '../activities/notify';
import { createTeamActivities } from '../activities/teams';
import { createMemoryActivities } from '../activities/memories';
import { BucketLocator, createStorageActivities } from '../activities/storage';
import { createCheckActivities } from '../activities/check';
import { createLogActivities } from '../activities/logs';
import { createZoneActivities } from '../activities/zones';
import { catalogPriceBook } from '../config/price-book';
import { buildGceProvider } from '../workers/providers';
import { createSternaWorker } from '../workers/worker';
import { observerWorkflowId, type EnsureObserverResult, type WatchFleetInput, type WatchFleetResult } from '../workflows/fleet/contract';
import type { ResourceObservation } from '../workflows/messages';
import { ownerLabels, runKey } from '../workflows/naming';
import { startCountingProxy, type CountingProxy } from './helpers/counting-proxy';
import { eventually } from './helpers/processes';
import { exampleSpec, PROJECT, startStack, type Stack } from './helpers/stack';
import { ScriptedProvider } from './helpers/scripted-provider';
import { testEnv, uniqueTaskQueue, workflowBundle } from './helpers/temporal';
import { sternaDataConverter } from '../config/data-converter';
import { allEvents, executionHistories, payloadValue } from './helpers/histories';

/** What ensureObserver answered; these workers always run an observer. */
async function ensured(answer: Promise<EnsureObserverResult | null>): Promise<EnsureObserverResult> {
  const result = await answer;
  assert.ok(result, 'the worker runs an observer');
  return result;
}

const INTERVAL_S = 1;
const OBSERVER: ObserverOptions = observerOptions({
  // maxSilenceSeconds: a run that hears nothing for twice this takes the observer for lost.
  settings: { intervalSeconds: INTERVAL_S, progressReadSeconds: 2, busyReadSeconds: 1, progressSignalSeconds: 3, maxSilenceSeconds: 3 },
  watchSeconds: 10,
  idleExitSeconds: 600,
});

interface Heard {
  atMs: number;
  observation: ResourceObservation;
}

function eventMs(time: temporal.api.history.v1.IHistoryEvent['eventTime']): number {
  return Number(time?.seconds ?? 0) * 1000 + Math.floor((time?.nanos ?? 0) / 1e6);
}

/** Every observation signal in the run's histories (all its executions), in order. */
async function heard(client: Client, workflowId: string): Promise<Heard[]> {
  const signals = await Promise.all((await allEvents(client, workflowId))
    .filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'observation')
    .map(async (e) => ({ atMs: eventMs(e.eventTime), observation: await payloadValue<ResourceObservation>(e.workflowExecutionSignaledEventAttributes!.input!.payloads![0]) })));
  return signals.sort((a, b) => a.atMs - b.atMs);
}

async function hear(client: Client, workflowId: string, what: string, test: (o: ResourceObservation) => boolean, timeoutMs = 90_000): Promise<Heard> {
  return eventually(what, async () => (await heard(client, workflowId)).find((h) => test(h.observation)), timeoutMs, 250).catch(async (err: Error) => {
    const told = (await heard(client, workflowId)).map((h) => `${h.observation.name} ${JSON.stringify(h.observation.snapshot)}`);
    throw new Error(`${err.message}; the run heard:\n  ${told.join('\n  ')}`);
  });
}

/** The results of the observer's completed watchFleet calls, across its continue-as-new chain. */
async function watchResults(client: Client, workflowId: string): Promise<WatchFleetResult[]> {
  return Promise.all(
    (await allEvents(client, workflowId))
      .map((e) => e.activityTaskCompletedEventAttributes?.result?.payloads?.[0])
      .filter((p) => p !== undefined && p !== null)
      .map((p) => payloadValue<WatchFleetResult>(p)),
  );
}

function trainingSpec(steps: number, pollSeconds: number) {
  const base = exampleSpec();
  return { ...base, command: ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', String(steps), '--step-ms', '25'], recovery: { ...base.recovery, pollSeconds } };
}

describe('fleet observer on the GCE emulator', function () {
  this.timeout(240_000);
  let stack: Stack;
  let proxy: CountingProxy;
  let worker: Worker;
  let running: Promise<void>;
  let observerId: string;
  let client: Client;

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    client = stack.env.client;
    proxy = await startCountingProxy(stack.emulator.port);
    // The observer's provider goes through the counting proxy; the runs' own one does not.
    const watched = buildGceProvider({ ...stack.gce, emulatorEndpoint: { host: '127.0.0.1', port: proxy.port, protocol: 'http' } }, catalogPriceBook(), 200);
    worker = await Worker.create({
      connection: stack.env.nativeConnection,
      namespace: stack.env.namespace,
      taskQueue: stack.taskQueue,
      workflowBundle: await workflowBundle(require.resolve('../workflows')),
      // Every activity a run calls, as createSternaWorker registers them; the fleet's watch the test's own.
      activities: {
        ...createActivities({ gce: stack.provider }),
        ...createFleetActivities({ providers: { gce: watched }, client, observer: OBSERVER }),
        ...createTeamActivities({ client }),
        ...createZoneActivities({ providers: { gce: stack.provider }, client }),
        ...createMemoryActivities({ providers: { gce: stack.provider }, client }),
        ...createNotifyActivities({ client }),
        ...createStorageActivities(BucketLocator.forEmulator(stack.emulator.endpoint)),
        ...createCheckActivities(undefined),
        ...createLogActivities(undefined),
      },
      maxHeartbeatThrottleInterval: '1 second',
      defaultHeartbeatThrottleInterval: '500 milliseconds',
      shutdownGraceTime: '1 second',
      dataConverter: sternaDataConverter(),
    });
    running = worker.run();
    ({ workflowId: observerId } = await startObserver(client, { taskQueue: stack.taskQueue, backend: 'gce', scope: PROJECT, options: OBSERVER, requester: 'test' }));
  });

  after(async () => {
    await client?.workflow.getHandle(observerId).terminate('test over').catch(() => undefined);
    worker?.shutdown();
    await running;
    await proxy?.close();
    await stack?.stop();
  });

  it('tells a run its VM was preempted within about two looks, then the final checkpoint once its agent exited or the VM is down', async () => {
    const run = await stack.start(trainingSpec(2000, 1));
    const training = await hear(client, run.workflowId, 'a checkpoint', (o) => o.snapshot.lifecycle === 'running' && (o.snapshot.checkpoint?.step ?? 0) > 0);
    const vm = training.observation.name;
    const [listed] = await stack.provider.listRunResources(runKey(run.workflowId));
    assert.equal(listed.name, vm);
    const preemptedAt = Date.now();
    await stack.emulator.preempt(listed.zone, vm);
    const notice = await hear(client, run.workflowId, 'the preemption', (o) => o.name === vm && o.snapshot.preempted);
    const latencyMs = notice.atMs - preemptedAt;
    console.log(`      preemption -> observation signal: ${latencyMs} ms`);
    assert.ok(latencyMs <= 2 * INTERVAL_S * 1000 + 1000, `the run heard of the preemption ${latencyMs} ms after it began`);
    assert.deepEqual(notice.observation.owner, training.observation.owner);
    // The attempt's end: its agent's exit, read between looks while the VM stops, or the VM down.
    const down = await hear(client, run.workflowId, 'the agent exited or the VM down', (o) => o.name === vm && (o.snapshot.lifecycle === 'terminated' || o.snapshot.phase === 'exited'));
    assert.equal(down.observation.snapshot.preempted, true);
    assert.ok(down.observation.snapshot.checkpoint, 'the final read carries the newest checkpoint');
    assert.ok(down.observation.snapshot.checkpoint.step >= training.observation.snapshot.checkpoint!.step);
    await run.cancel();
    await run.result().catch(() => undefined);
  });

  it('tells a run each new checkpoint, and its exit', async () => {
    // The run's own poll is slow (4 s) so its VM outlives the exit long enough to be seen.
    const run = await stack.start(trainingSpec(800, 4));
    const result = await run.result();
    assert.equal(result.status, 'completed');
    const told = (await heard(client, run.workflowId)).map((h) => h.observation.snapshot);
    const steps = told.map((s) => s.checkpoint?.step).filter((s): s is number => s !== undefined);
    assert.ok(new Set(steps).size >= 2, `checkpoints told: ${steps.join(', ')}`);
    assert.deepEqual(steps, [...steps].sort((a, b) => a - b), 'checkpoints are told in order');
    const exit = told.find((s) => s.exitCode !== undefined);
    assert.ok(exit, `no exit among ${JSON.stringify(told)}`);
    assert.equal(exit.exitCode, 0);
    assert.equal(exit.phase, 'exited');
    assert.equal(exit.checkpoint?.step, 800);
  });

  it('makes one listing request per look however many resources there are, and reads each about every cadence', async () => {
    async function measure(seconds: number) {
      const before = proxy.counts();
      await new Promise((r) => setTimeout(r, seconds * 1000));
      const after = proxy.counts();
      return { listings: after.aggregatedInstances - before.aggregatedInstances, reads: after.guestAttributes - before.guestAttributes, gets: after.instanceGet - before.instanceGet };
    }
    const idle = await measure(8);
    // Twenty resources that name runs which do not exist: watched, read, their signals dropped.
    const instances = new InstancesClient(stack.emulator.clientOptions);
    const ghosts = Array.from({ length: 20 }, (_, i) => `st-ghost-${i}`);
    try {
      await Promise.all(
        ghosts.map((name, i) =>
          instances.insert({
            project: PROJECT,
            zone: 'us-central1-a',
            instanceResource: {
              name,
              labels: ownerLabels({ run: `ghost-${i}`, execution: 'e'.repeat(14), attempt: 1 }),
              machineType: 'zones/us-central1-a/machineTypes/e2-standard-2',
              metadata: { items: [{ key: 'startup-script', value: 'sleep 600' }, { key: 'sterna-run-id', value: `ghost-run-${i}` }, { key: 'enable-guest-attributes', value: 'TRUE' }] },
              disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: 'debian-12' } }],
              networkInterfaces: [{ network: 'global/networks/default' }],
            },
          }),
        ),
      );
      await eventually('the ghosts running', async () => ((await stack.emulator.instances()).filter((i) => i.name.startsWith('st-ghost-') && i.status === 'RUNNING').length === 20 ? true : undefined));
      await new Promise((r) => setTimeout(r, 3000));
      const busy = await measure(8);
      // About one listing a second either way (8 s at a 1 s interval), never one per resource.
      for (const m of [idle, busy]) assert.ok(m.listings >= 6 && m.listings <= 9, `listings in 8 s: ${JSON.stringify(m)}`);
      assert.equal(busy.gets, 0, 'the observer never gets instances one by one');
      // Twenty resources read every ~2 s for 8 s: about 80 reads, far below one per resource per look (160).
      assert.ok(busy.reads >= 50 && busy.reads <= 110, `guest reads in 8 s: ${busy.reads}`);
      console.log(`      observer calls in 8 s at a ${INTERVAL_S} s interval: idle ${JSON.stringify(idle)}; 20 resources ${JSON.stringify(busy)}`);
      // Each ghost's run was told once, found closed, and dropped without failing a look.
      const results = await eventually('the watchFleet calls that saw the ghosts', async () => {
        const all = await watchResults(client, observerId);
        return all.some((r) => r.stats.resources >= 20) ? all : undefined;
      });
      const closed = results.reduce((n, r) => n + r.stats.signalsToClosedRuns, 0);
      assert.ok(closed >= 20, `signals to closed runs: ${closed}`);
      assert.equal(results.reduce((n, r) => n + r.stats.failedLooks, 0), 0);
    } finally {
      await Promise.all(ghosts.map((name) => instances.delete({ project: PROJECT, zone: 'us-central1-a', instance: name }).catch(() => undefined)));
      await instances.close();
    }
  });

  it('replays its histories, across continue-as-new, without nondeterminism', async () => {
    const histories = (await executionHistories(client, observerId)).map((events) => ({ workflowId: observerId, history: { events } }));
    assert.ok(histories.length >= 2, 'the observer continued as new at least once');
    let replayed = 0;
    for await (const result of Worker.runReplayHistories({ workflowBundle: await workflowBundle(require.resolve('../workflows')), dataConverter: sternaDataConverter() }, histories)) {
      assert.equal(result.error, undefined, String(result.error));
      replayed++;
    }
    assert.equal(replayed, histories.length);
  });

  it('is started again by ensureObserver once terminated, and watches again', async () => {
    const handle = client.workflow.getHandle(observerId);
    await handle.terminate('simulating a lost observer');
    assert.equal((await handle.describe()).status.name, 'TERMINATED');
    const activities = createFleetActivities({ providers: { gce: stack.provider }, client, observer: OBSERVER });
    const env = new MockActivityEnvironment({ taskQueue: stack.taskQueue });
    const restarted = await ensured(env.run(activities.ensureObserver, { backend: 'gce' as const }));
    assert.equal(restarted.workflowId, observerId);
    assert.equal((await client.workflow.getHandle(observerId, restarted.runId).describe()).status.name, 'RUNNING');
    // A second ask finds it running and starts nothing new.
    const again = await ensured(env.run(activities.ensureObserver, { backend: 'gce' as const }));
    assert.equal(again.runId, restarted.runId);
    // And it watches: a new run hears about its VM.
    const run = await stack.start(trainingSpec(2000, 1));
    await hear(client, run.workflowId, 'an observation from the new observer', (o) => o.snapshot.lifecycle === 'running' && o.snapshot.phase !== undefined);
    await run.cancel();
    await run.result().catch(() => undefined);
  });

  it('loses no run whose observer is terminated mid-training: the run asks for it again and completes', async () => {
    const run = await stack.start(trainingSpec(1600, 1));
    await hear(client, run.workflowId, 'a checkpoint', (o) => (o.snapshot.checkpoint?.step ?? 0) > 0);
    const lostAt = Date.now();
    await client.workflow.getHandle(observerId).terminate('simulating a lost observer');
    const result = await run.result();
    assert.equal(result.status, 'completed');
    const asks = (await allEvents(client, run.workflowId))
      .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'ensureObserver')
      .map((e) => eventMs(e.eventTime))
      .sort((a, b) => a - b);
    assert.ok(asks.length >= 2 && asks[asks.length - 1] > lostAt, `the run asked for the observer when it provisioned and again once it fell silent (asks at ${asks.map((t) => t - lostAt).join(', ')} ms from the loss)`);
    assert.equal((await client.workflow.getHandle(observerId).describe()).status.name, 'RUNNING', 'the run started the observer again');
    const after = (await heard(client, run.workflowId)).filter((h) => h.atMs > asks[asks.length - 1]);
    assert.ok(after.length > 0, 'the restarted observer spoke to the run');
  });
});

describe('fleet observer when its worker is killed', function () {
  this.timeout(300_000);
  let stack: Stack;
  const interval = process.env.STERNA_OBSERVER_INTERVAL_SECONDS;

  before(async () => {
    process.env.STERNA_OBSERVER_INTERVAL_SECONDS = '1';
    stack = await startStack({ timeFactor: 10 });
  });
  after(async () => {
    if (interval === undefined) delete process.env.STERNA_OBSERVER_INTERVAL_SECONDS;
    else process.env.STERNA_OBSERVER_INTERVAL_SECONDS = interval;
    await stack?.env.client.workflow.getHandle(observerWorkflowId(stack.taskQueue, 'gce', PROJECT)).terminate('test over').catch(() => undefined);
    await stack?.stop();
  });

  it('is started by the worker, and after a SIGKILL resumes on the next worker with the memory it heartbeats', async () => {
    const { client } = stack.env;
    let worker = stack.spawnWorker();
    const observer = client.workflow.getHandle(observerWorkflowId(stack.taskQueue, 'gce', PROJECT));
    await eventually('the observer started by the worker', async () => ((await observer.describe()).status.name === 'RUNNING' ? true : undefined), 90_000, 500);
    const run = await stack.start(trainingSpec(4000, 1));
    const training = await hear(client, run.workflowId, 'the VM running', (o) => o.snapshot.lifecycle === 'running' && o.snapshot.phase === 'training');
    await worker.kill('SIGKILL');
    worker = stack.spawnWorker();
    const [vm] = await stack.provider.listRunResources(runKey(run.workflowId));
    assert.equal(vm.name, training.observation.name);
    await stack.emulator.preempt(vm.zone, vm.name);
    // A heartbeat timeout, a new worker's start and the retry: slow on a busy 2-core machine.
    await hear(client, run.workflowId, 'the preemption, heard by the resumed observer', (o) => o.name === vm.name && o.snapshot.preempted, 150_000).catch(async (err: Error) => {
      const [watching] = (await observer.describe()).raw.pendingActivities ?? [];
      const log = readFileSync(join(stack.dir, 'worker.log'), 'utf8').split('\n').slice(-30).join('\n');
      throw new Error(`${err.message}\nobserver activity: attempt ${watching?.attempt}, state ${watching?.state}, last failure ${watching?.lastFailure?.message}\nworker log:\n${log}`);
    });
    // The retried watchFleet heartbeats what it remembers (the run's VM, now its replacement
    // once the run has released the preempted one): what a further retry resumes from.
    const { attempt } = await eventually('the retried watchFleet heartbeating its memory', async () => {
      const [watching] = (await observer.describe()).raw.pendingActivities ?? [];
      const payload = watching?.heartbeatDetails?.payloads?.[0];
      if (!payload || (watching!.attempt ?? 0) < 2) return undefined;
      const remembered = Object.values(resume((await payloadValue<WatchFleetResult>(payload)).memory, 'gce').resources);
      return remembered.some((r) => r.workflowId === run.workflowId && r.told) ? { attempt: watching!.attempt } : undefined;
    }, 30_000, 250);
    assert.ok((attempt ?? 0) >= 2, `watchFleet was retried after the kill (attempt ${attempt})`);
    await run.cancel();
    await run.result().catch(() => undefined);
    await worker.kill('SIGTERM');
  });
});

describe('fleet observer lifetime', function () {
  this.timeout(60_000);

  it('ends after an idle spell, is started again by the next ensureObserver, and takes a new configuration while running', async () => {
    const env = await testEnv();
    const taskQueue = uniqueTaskQueue('observer-idle');
    const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 1, onDemand: 2 }]);
    const observer = observerOptions({ settings: { intervalSeconds: 0.5 }, watchSeconds: 2, idleExitSeconds: 1 });
    const worker = await createSternaWorker({
      connection: env.nativeConnection,
      namespace: env.namespace,
      taskQueue,
      providers: { gce: provider },
      workflowBundle: await workflowBundle(require.resolve('../workflows')),
      observer,
    });
    await worker.runUntil(async () => {
      const activities = createFleetActivities({ providers: { gce: provider }, client: env.client, observer });
      const context = new MockActivityEnvironment({ taskQueue });
      const first = await ensured(context.run(activities.ensureObserver, { backend: 'gce' as const }));
      assert.equal(first.workflowId, observerWorkflowId(taskQueue, 'gce', 'scripted'));
      // Nothing to watch: it ends by itself after its idle spell.
      await env.client.workflow.getHandle(first.workflowId, first.runId).result();
      const results = await watchResults(env.client, first.workflowId);
      assert.ok(results.length >= 2 && results.every((r) => r.stats.resources === 0 && r.stats.listings > 0), JSON.stringify(results.map((r) => r.stats)));
      const again = await ensured(context.run(activities.ensureObserver, { backend: 'gce' as const }));
      assert.notEqual(again.runId, first.runId);
      // A worker with another configuration asks: the running observer takes it from its next call.
      const reconfigured = observerOptions({ settings: { intervalSeconds: 0.25 }, watchSeconds: 3, idleExitSeconds: 1 });
      const other = createFleetActivities({ providers: { gce: provider }, client: env.client, observer: reconfigured });
      const asked = await ensured(context.run(other.ensureObserver, { backend: 'gce' as const }));
      assert.equal(asked.runId, again.runId);
      await eventually('a watchFleet call with the new options', async () => {
        const inputs = await Promise.all(
          (await allEvents(env.client, again.workflowId))
            .map((e) => e.activityTaskScheduledEventAttributes?.input?.payloads?.[0])
            .filter((p) => p !== undefined && p !== null)
            .map((p) => payloadValue<WatchFleetInput>(p)),
        );
        return inputs.some((i) => i.returnAfterSeconds === 3 && i.settings.intervalSeconds === 0.25) ? true : undefined;
      }, 20_000);
      await env.client.workflow.getHandle(again.workflowId).terminate('test over').catch(() => undefined);
    });
  });
});

