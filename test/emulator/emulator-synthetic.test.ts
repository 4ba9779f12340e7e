/**
 * Synthetic guests (scale work only): VMs that run no process while the emulator plays
 * the Sterna agent's observable behaviour, read back through the real
 * `@google-cloud/compute` client as a provider would: phases, steps, checkpoints that
 * exist in the local bucket with their sha256, resume, exit, and the reaction to
 * preemption; and a thousand of them on one timer.
 */
import { strict as assert } from 'node:assert';
import { createHook } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InstancesClient, ZoneOperationsClient, type protos } from '@google-cloud/compute';
import type { SyntheticGuestConfig } from '../../emulator/synthetic-guest';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

type IInstance = protos.google.cloud.compute.v1.IInstance;

const PROJECT = 'synthetic-test';
const ZONE = 'us-central1-a';
/** 20x with 1 s steps: a step lasts 50 ms, the 30 s preemption notice 1.5 s. */
const RUN: Partial<SyntheticGuestConfig> = { steps: 20, stepSeconds: 1, checkpointEvery: 5, startingSeconds: 1, stagingSeconds: 2, uploadSeconds: 1, datasetBytes: 4096 };

function spotVm(name: string, attributes: Record<string, string>, guestAttributes = true): IInstance {
  return {
    name,
    machineType: `zones/${ZONE}/machineTypes/g2-standard-4`,
    scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'STOP', onHostMaintenance: 'TERMINATE', automaticRestart: false },
    metadata: {
      items: [
        { key: 'startup-script', value: 'echo a synthetic guest never runs this; exit 3' },
        ...(guestAttributes ? [{ key: 'enable-guest-attributes', value: 'TRUE' }] : []),
        ...Object.entries(attributes).map(([key, value]) => ({ key, value })),
      ],
    },
  };
}

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

describe('GCE emulator: synthetic guests', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  let instances: InstancesClient;
  let buckets: string;

  before(async () => {
    buckets = mkdtempSync(join(tmpdir(), 'sterna-synthetic-buckets-'));
    emu = await startTestEmulator({ timeFactor: 20, guest: 'synthetic', synthetic: RUN, syntheticTickMs: 20, bucketsDir: buckets });
    instances = new InstancesClient(emu.clientOptions);
  });
  after(async () => {
    await emu?.stop();
    rmSync(buckets, { recursive: true, force: true });
  });
  beforeEach(async () => {
    await emu.admin.setSyntheticGuests({ steps: 20, stepSeconds: 1, stagingSeconds: 2 });
  });

  async function insert(resource: IInstance): Promise<void> {
    const [lro] = await instances.insert({ project: PROJECT, zone: ZONE, instanceResource: resource });
    const ops = new ZoneOperationsClient(emu.clientOptions);
    for (;;) {
      const [op] = await ops.wait({ project: PROJECT, zone: ZONE, operation: lro.latestResponse.name as string });
      if (op.status === 'DONE') return assert.equal(op.error ?? undefined, undefined);
    }
  }

  async function attributes(name: string): Promise<Record<string, string>> {
    try {
      const [attrs] = await instances.getGuestAttributes({ project: PROJECT, zone: ZONE, instance: name, queryPath: 'sterna/' });
      return Object.fromEntries((attrs.queryValue?.items ?? []).map((i) => [i.key ?? '', i.value ?? '']));
    } catch (err) {
      if ((err as { httpStatusCode?: number }).httpStatusCode === 404) return {};
      throw err;
    }
  }

  /** Polls the guest attributes as a provider would, until the agent says it exited; returns what it saw. */
  async function watch(name: string): Promise<{ seen: Record<string, string>[]; last: Record<string, string> }> {
    const seen: Record<string, string>[] = [];
    const last = await until(`${name} exited`, async () => {
      const a = await attributes(name);
      if (a.phase) seen.push(a);
      return a.phase === 'exited' || a.phase === 'failed' ? a : undefined;
    });
    return { seen, last };
  }

  it('plays the agent from staging to exit 0: steps, a checkpoint every K steps that exists in the bucket, the VM left RUNNING', async () => {
    await insert(spotVm('vm-run', { 'sterna-checkpoint-uri': 'gs://bkt/ckpt/run-1/' }));
    const { seen, last } = await watch('vm-run');
    const phases = seen.map((a) => a.phase).filter((p, i, all) => p !== all[i - 1]);
    assert.deepEqual(
      phases.filter((p) => p !== 'starting' && p !== 'staging' && p !== 'uploading'),
      ['training', 'exited'],
    );
    const order = ['starting', 'staging', 'training', 'uploading', 'exited'];
    assert.deepEqual([...phases].sort((a, b) => order.indexOf(a) - order.indexOf(b)), phases, 'phases in the agent order');
    const steps = seen.filter((a) => a.step !== undefined).map((a) => Number(a.step));
    assert.deepEqual([...steps].sort((a, b) => a - b), steps, 'steps only go up');
    assert.ok(new Set(steps).size > 5, `saw the run progress: ${[...new Set(steps)].join(',')}`);

    const uri = 'gs://bkt/ckpt/run-1/step-20.json';
    const file = join(buckets, 'bkt', 'ckpt', 'run-1', 'step-20.json');
    assert.deepEqual(last, { phase: 'exited', step: '20', exit: '0', 'total-bytes': '4096', 'staged-bytes': '4096', checkpoint: `20 ${sha256(file)} ${uri}` });
    for (const step of [5, 10, 15]) assert.ok(existsSync(join(buckets, 'bkt', 'ckpt', 'run-1', `step-${step}.json`)), `checkpoint ${step} uploaded`);
    const checkpoints = seen.map((a) => a.checkpoint?.split(' ')[0]).filter((c) => c !== undefined);
    assert.deepEqual([...new Set(checkpoints)], ['5', '10', '15', '20']);

    const [instance] = await instances.get({ project: PROJECT, zone: ZONE, instance: 'vm-run' });
    assert.equal(instance.status, 'RUNNING', 'the guest exited; its VM stays up, as with the agent');
    const view = (await emu.instances()).find((i) => i.name === 'vm-run')!;
    assert.deepEqual([view.guest, view.exitCode, view.processAlive, view.pid], ['synthetic', 0, false, undefined]);
    // What is left of the guest is the agent waiting to power off, which SIGTERM ends: the
    // release's delete does not wait out the 30 s stop grace.
    const [deleted] = await instances.delete({ project: PROJECT, zone: ZONE, instance: 'vm-run' });
    assert.equal((deleted.latestResponse as protos.google.cloud.compute.v1.IOperation).status, 'DONE', 'the delete ended with the call');
  });

  it('resumes from sterna-resume-from at the step its file name gives, and fails with 67 on a bad checkpoint', async () => {
    const from = join(buckets, 'bkt', 'ckpt', 'run-1', 'step-10.json');
    await insert(spotVm('vm-resume', { 'sterna-checkpoint-uri': 'gs://bkt/ckpt/run-2', 'sterna-resume-from': `${sha256(from)} gs://bkt/ckpt/run-1/step-10.json` }));
    const { seen, last } = await watch('vm-resume');
    const steps = seen.filter((a) => a.step !== undefined).map((a) => Number(a.step));
    assert.ok(steps[0] >= 10, `training started at step 10, first seen ${steps[0]}`);
    assert.deepEqual([...new Set(seen.map((a) => a.checkpoint?.split(' ')[0]).filter((c) => c !== undefined))], ['15', '20']);
    assert.deepEqual([last.exit, last.step], ['0', '20']);
    assert.equal(existsSync(join(buckets, 'bkt', 'ckpt', 'run-2', 'step-10.json')), false, 'no checkpoint before the resumed step');

    await insert(spotVm('vm-bad-sha', { 'sterna-checkpoint-uri': 'gs://bkt/ckpt/run-3', 'sterna-resume-from': `${'0'.repeat(64)} gs://bkt/ckpt/run-1/step-10.json` }));
    await insert(spotVm('vm-missing', { 'sterna-checkpoint-uri': 'gs://bkt/ckpt/run-4', 'sterna-resume-from': `${sha256(from)} gs://bkt/ckpt/run-1/step-999.json` }));
    for (const name of ['vm-bad-sha', 'vm-missing']) {
      const { last: failed } = await watch(name);
      assert.deepEqual([failed.phase, failed.exit, failed.step, failed.checkpoint], ['failed', '67', undefined, undefined], name);
    }
  });

  it('reacts to preemption as the agent does: the step in progress is checkpointed, exit 143, and the VM stops before the notice ends', async () => {
    await emu.admin.setSyntheticGuests({ steps: 1000 });
    await insert(spotVm('vm-preempt', { 'sterna-checkpoint-uri': 'gs://bkt/ckpt/run-5' }));
    await until('training', async () => (Number((await attributes('vm-preempt')).step ?? 0) >= 3 ? true : undefined));
    const preempted = await emu.admin.preempt(PROJECT, ZONE, 'vm-preempt');
    const stepAtNotice = Number(preempted.instance.guestAttributes.sterna.step);
    const stopped = await until('TERMINATED', async () => {
      const [i] = await instances.get({ project: PROJECT, zone: ZONE, instance: 'vm-preempt' });
      return i.status === 'TERMINATED' ? i : undefined;
    });
    const final = await attributes('vm-preempt');
    const file = join(buckets, 'bkt', 'ckpt', 'run-5', `step-${stepAtNotice + 1}.json`);
    assert.deepEqual(final, { phase: 'exited', exit: '143', preempted: 'TRUE', step: String(stepAtNotice + 1), 'total-bytes': '4096', 'staged-bytes': '4096', checkpoint: `${stepAtNotice + 1} ${sha256(file)} gs://bkt/ckpt/run-5/step-${stepAtNotice + 1}.json` });
    const stoppedAfterMs = Date.parse(stopped.lastStopTimestamp!) - Date.parse(preempted.preemptAt);
    assert.ok(stoppedAfterMs < 750, `the guest was gone after ${stoppedAfterMs} ms, well within the 1500 ms notice`);
    const view = (await emu.instances()).find((i) => i.name === 'vm-preempt')!;
    assert.deepEqual([view.preempted, view.killed, view.exitCode], [true, false, 143]);
  });

  it('loses what the guest had not finished at SIGKILL, and an agent preempted before training dies at once', async () => {
    // A 60 s step outlasts the 30 s notice: the final checkpoint never comes.
    await emu.admin.setSyntheticGuests({ stepSeconds: 60 });
    await insert(spotVm('vm-slow-step', { 'sterna-checkpoint-uri': 'gs://bkt/ckpt/run-6' }));
    await until('training', async () => ((await attributes('vm-slow-step')).phase === 'training' ? true : undefined));
    await emu.admin.preempt(PROJECT, ZONE, 'vm-slow-step');
    await until('TERMINATED', async () => ((await instances.get({ project: PROJECT, zone: ZONE, instance: 'vm-slow-step' }))[0].status === 'TERMINATED' ? true : undefined));
    const killed = await attributes('vm-slow-step');
    assert.deepEqual([killed.phase, killed.exit, killed.checkpoint], ['training', undefined, undefined]);
    const slowView = (await emu.instances()).find((i) => i.name === 'vm-slow-step')!;
    assert.deepEqual([slowView.killed, slowView.exitCode], [true, undefined]);

    await emu.admin.setSyntheticGuests({ stepSeconds: 1, stagingSeconds: 600 });
    await insert(spotVm('vm-staging', { 'sterna-checkpoint-uri': 'gs://bkt/ckpt/run-7' }));
    await until('staging', async () => ((await attributes('vm-staging')).phase === 'staging' ? true : undefined));
    const at = Date.now();
    await emu.admin.preempt(PROJECT, ZONE, 'vm-staging');
    const stopped = await until('TERMINATED', async () => {
      const [i] = await instances.get({ project: PROJECT, zone: ZONE, instance: 'vm-staging' });
      return i.status === 'TERMINATED' ? i : undefined;
    });
    assert.ok(Date.parse(stopped.lastStopTimestamp!) - at < 500, 'no handler yet: the agent died on SIGTERM');
    assert.equal((await attributes('vm-staging')).exit, undefined);
    assert.equal((await emu.instances()).find((i) => i.name === 'vm-staging')?.exitCode, 143);
  });

  it('carries on across an emulator restart, with the run it started with', async () => {
    await emu.admin.setSyntheticGuests({ steps: 60 });
    await insert(spotVm('vm-restart', { 'sterna-checkpoint-uri': 'gs://bkt/ckpt/run-9' }));
    await until('training', async () => (Number((await attributes('vm-restart')).step ?? 0) >= 3 ? true : undefined));
    await emu.restart();
    instances = new InstancesClient(emu.clientOptions);
    assert.equal((await emu.admin.syntheticGuests()).defaults.steps, 20, 'the restarted emulator has its start options');
    const { last } = await watch('vm-restart');
    assert.deepEqual([last.phase, last.step, last.exit], ['exited', '60', '0'], 'the guest kept the 60 steps it started with');
    assert.ok(existsSync(join(buckets, 'bkt', 'ckpt', 'run-9', 'step-60.json')));
  });

  it('refuses a synthetic run that makes no sense, naming the field', async () => {
    await assert.rejects(emu.admin.setSyntheticGuests({ steps: 0 }), /400.*steps/);
    await assert.rejects(emu.admin.setSyntheticGuests({ stepSeconds: -1 }), /400.*stepSeconds/);
    await assert.rejects(emu.admin.setSyntheticGuests({ exitCode: 256 }), /400.*exitCode/);
    assert.equal((await emu.admin.syntheticGuests()).defaults.steps, 20, 'unchanged');
  });

  it('publishes nothing without enable-guest-attributes, as the agent cannot, yet runs to its exit', async () => {
    await insert(spotVm('vm-quiet', { 'sterna-checkpoint-uri': 'gs://bkt/ckpt/run-8' }, false));
    const view = await until('the guest exited', async () => (await emu.instances()).find((i) => i.name === 'vm-quiet' && i.exitCode !== undefined));
    assert.equal(view.exitCode, 0);
    assert.deepEqual(await attributes('vm-quiet'), {});
    assert.ok(existsSync(join(buckets, 'bkt', 'ckpt', 'run-8', 'step-20.json')), 'checkpoints are uploaded all the same');
  });
});

describe('GCE emulator: a thousand synthetic guests', function () {
  this.timeout(180_000);
  let emu: TestEmulator;
  after(async () => emu?.stop());

  it('boots 1,000 synthetic VMs that all train, advanced by one shared timer rather than one per guest', async () => {
    const count = 1000;
    emu = await startTestEmulator({ timeFactor: 20, guest: 'synthetic', synthetic: { steps: 100_000, stepSeconds: 1, checkpointEvery: 50, stagingSeconds: 1 }, rateQuotas: { enabled: false } });
    const instances = new InstancesClient(emu.clientOptions);
    const names = Array.from({ length: count }, (_, n) => `vm-${n}`);
    // CPU-only VMs: no GPU capacity or quota stands between a thousand of them and RUNNING.
    const cpuVm = (name: string) => ({ ...spotVm(name, { 'sterna-checkpoint-uri': `gs://bkt/scale/${name}` }), machineType: `zones/${ZONE}/machineTypes/e2-standard-2` });
    for (let n = 0; n < count; n += 50) {
      await Promise.all(names.slice(n, n + 50).map((name) => instances.insert({ project: PROJECT, zone: ZONE, instanceResource: cpuVm(name) })));
    }
    const training = await until(
      'every guest training',
      async () => {
        const views = await emu.instances();
        const busy = views.filter((v) => v.guestAttributes.sterna?.phase === 'training' && Number(v.guestAttributes.sterna.step) > 0);
        return busy.length === count ? views : undefined;
      },
      60_000,
    );

    // Over a quiet second, count the timers the emulator creates while the guests train.
    let timersCreated = 0;
    const hook = createHook({ init: (_id, type) => void (type === 'Timeout' && timersCreated++) }).enable();
    const stepsBefore = new Map(training.map((v) => [v.name, Number(v.guestAttributes.sterna.step)]));
    await new Promise((r) => setTimeout(r, 1000));
    hook.disable();
    assert.ok(timersCreated < 50, `${timersCreated} timers created in a second by ${count} training guests`);
    const moved = (await emu.instances()).filter((v) => Number(v.guestAttributes.sterna.step) > stepsBefore.get(v.name)!);
    assert.equal(moved.length, count, 'every guest kept training');

    // Listing the fleet costs what it costs on GCE: pages of at most 500 instances.
    await emu.admin.resetApiUsage();
    const listed: string[] = [];
    for await (const [, scoped] of instances.aggregatedListAsync({ project: PROJECT, filter: 'labels.missing:* OR status = RUNNING' })) listed.push(...(scoped.instances ?? []).map((i) => i.name ?? ''));
    assert.equal(new Set(listed).size, count);
    assert.equal((await emu.admin.apiUsage(PROJECT)).projects[0].methods['compute.instances.aggregatedList'].calls, 2);
  });
});
