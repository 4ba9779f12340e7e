/**
 * The orphan reaper: deletes what a run left behind once its run is closed, unknown or
 * past that attempt, and never a live run's current attempt. Decisions are pure
 * (workflows/reaper/decide.ts); the passes run as real workflows against the emulator
 * (and a scripted cloud for a run that continues as new 55 times... once, after 50 attempts).
 */
import { strict as assert } from 'node:assert';
import { InstancesClient } from '@google-cloud/compute';
import { installReaperSchedule, reaperLog, REAPER_SCHEDULE_ID, runReaperOnce } from '../../activities/reaper';
import { passLines } from '../../cli/reaper';
import type { ProvisionRequest } from '../../workflows/activity-contract';
import { executionToken, ownerLabels, runKey, type Owner } from '../../workflows/naming';
import { decideReap, KeepReason, ownerWorkflowId, ReapReason, reapedKey, type OwnerRun, type ReapCandidate, type ReaperResult } from '../../workflows/reaper/decide';
import type { RunSpecInput } from '../../workflows/spec';
import { eventually } from '../helpers/processes';
import { ScriptedProvider } from '../helpers/scripted-provider';
import { exampleSpec, PROJECT, startStack, type Stack } from '../helpers/stack';
import { sternaTestWorker, testEnv, uniqueTaskQueue } from '../helpers/temporal';

const T0 = Date.parse('2030-01-01T00:00:00Z');
const OWNER: Owner = { run: runKey('run-1'), execution: executionToken('first-run'), attempt: 2 };
const candidate = (overrides: Partial<ReapCandidate> = {}): ReapCandidate => ({
  ref: { backend: 'gce', name: 'st-run-1-a2', zone: 'us-central1-a' },
  owner: OWNER,
  workflowId: 'run-1',
  createdAt: new Date(T0 - 3_600_000).toISOString(),
  ...overrides,
});
/** The example, training long enough to be caught mid-run. */
const longSpec = (): RunSpecInput => exampleSpec({ command: ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', '100000', '--step-ms', '25'] });
const open = (overrides: Partial<Extract<OwnerRun, { found: true }>> = {}): OwnerRun => ({ found: true, open: true, status: 'RUNNING', execution: OWNER.execution, attempt: 2, ...overrides });

describe('what the reaper deletes (pure)', () => {
  const decide = (c: ReapCandidate, o: OwnerRun | undefined, grace = 600) => {
    const d = decideReap(c, o, T0, grace);
    return d.reap ? `reap:${d.reason}` : `keep:${d.reason}`;
  };

  it("keeps a live run's current attempt, however old, and an attempt its run has not yet published", () => {
    assert.equal(decide(candidate(), open()), `keep:${KeepReason.Live}`);
    assert.equal(decide(candidate(), open({ attempt: undefined })), `keep:${KeepReason.Live}`, 'mid-continue-as-new: the attempt is not known yet');
    assert.equal(decide(candidate(), open({ execution: undefined, attempt: 5 })), `reap:${ReapReason.Superseded}`);
    assert.equal(decide(candidate(), open({ execution: undefined, attempt: 2 })), `keep:${KeepReason.Live}`);
  });

  it('keeps everything younger than the grace period, whatever its owner, and what it cannot date', () => {
    const young = candidate({ createdAt: new Date(T0 - 599_000).toISOString() });
    for (const owner of [undefined, { found: false } as const, open({ open: false, status: 'TERMINATED' })]) assert.equal(decide(young, owner), `keep:${KeepReason.Young}`);
    assert.equal(decide(candidate({ createdAt: undefined }), { found: false }), `keep:${KeepReason.Young}`);
  });

  it("deletes after the grace period what a closed run, no run, another chain or a newer attempt left", () => {
    assert.equal(decide(candidate(), open({ open: false, status: 'TERMINATED' })), `reap:${ReapReason.Closed}`);
    assert.equal(decide(candidate(), { found: false }), `reap:${ReapReason.Unknown}`);
    assert.equal(decide(candidate({ workflowId: undefined }), undefined), `reap:${ReapReason.Unknown}`);
    assert.equal(decide(candidate(), open({ execution: executionToken('reused-id-run') })), `reap:${ReapReason.Closed}`);
    assert.equal(decide(candidate(), open({ attempt: 3 })), `reap:${ReapReason.Superseded}`);
  });

  it('keeps an older attempt its run is still releasing beside the next placement, and deletes it once the run says it is done', () => {
    assert.equal(decide(candidate(), open({ attempt: 3, releasing: [2] })), `keep:${KeepReason.Releasing}`);
    assert.equal(decide(candidate(), open({ attempt: 4, releasing: [3] })), `reap:${ReapReason.Superseded}`, 'another attempt being released does not cover this one');
    assert.equal(decide(candidate(), open({ attempt: 3, releasing: [] })), `reap:${ReapReason.Superseded}`);
    assert.equal(decide(candidate(), open({ execution: executionToken('reused-id-run'), attempt: 3, releasing: [2] })), `reap:${ReapReason.Closed}`, "another chain's releases say nothing of this one");
  });

  it('decides nothing on an owner the server could not read, nor on a resource whose run the listing could not read yet', () => {
    assert.equal(decide(candidate(), { found: 'unreadable', message: 'UNAVAILABLE' }), `keep:${KeepReason.OwnerUnreadable}`);
    assert.equal(decide(candidate({ workflowId: undefined, runUnread: true }), undefined), `keep:${KeepReason.OwnerUnreadable}`);
  });

  it("asks only about a workflow id whose run key is the resource's own label", () => {
    assert.equal(ownerWorkflowId(candidate(), runKey), 'run-1');
    assert.equal(ownerWorkflowId(candidate({ workflowId: 'another-run' }), runKey), undefined);
  });
});

describe('the reaper on the emulator', function () {
  this.timeout(300_000);
  let stack: Stack;
  let instances: InstancesClient;

  before(async () => {
    // Real time in the emulator: provisioning (3 s) and staging (2 s) last long enough for passes to meet them.
    stack = await startStack({ timeFactor: 1 });
    await stack.startWorker();
    instances = new InstancesClient(stack.emulator.clientOptions);
  });
  after(async () => {
    await (await testEnv()).client.schedule.getHandle(REAPER_SCHEDULE_ID).delete().catch(() => undefined);
    await stack?.stop();
  });

  const pass = async (graceSeconds = 0, dryRun = false) => runReaperOnce((await testEnv()).client, { taskQueue: stack.taskQueue, input: { graceSeconds, dryRun, backends: ['gce'] } });
  const vmsOf = async (workflowId: string) => (await stack.emulator.instances()).filter((v) => v.labels['sterna-run'] === runKey(workflowId));

  async function training(workflowId: string): Promise<string> {
    return eventually(`${workflowId} training`, async () => {
      const [vm] = (await vmsOf(workflowId)).filter((v) => v.guestAttributes.sterna?.phase === 'training');
      return vm?.name;
    }, 120_000, 200);
  }

  it("never touches a live run's VM, while it provisions, stages, trains and finishes (passes with no grace at all)", async () => {
    const run = await stack.start(exampleSpec());
    const seen = new Set<string>();
    const passes: ReaperResult[] = [];
    let finished = false;
    const result = run.result().finally(() => (finished = true));
    while (!finished) {
      const [vm] = await vmsOf(run.workflowId);
      if (vm) seen.add(vm.status === 'RUNNING' ? `RUNNING/${vm.guestAttributes.sterna?.phase ?? 'booting'}` : vm.status);
      passes.push(await pass(0));
    }
    const done = await result;
    assert.equal(done.status, 'completed');
    assert.deepEqual(done.attempts.map((a) => a.outcome), ['completed'], 'one attempt, never disturbed');
    for (const state of ['PROVISIONING', 'STAGING', 'RUNNING/training']) assert.ok(seen.has(state), `a pass met the VM ${state} (saw ${[...seen].join(', ')})`);
    // A pass that listed the VM just before the run ended may find the run closed: only that is allowed.
    assert.deepEqual(passes.flatMap((p) => p.reaped.filter((r) => r.workflowId === run.workflowId && r.reason !== ReapReason.Closed)), []);
    assert.ok(passes.some((p) => p.kept.live > 0), 'the passes saw the VM and kept it as live');
  });

  it("deletes a terminated run's VM within one Schedule interval plus the grace period, and records it", async () => {
    const client = (await testEnv()).client;
    const run = await stack.start(longSpec());
    const name = await training(run.workflowId);
    const [vm] = await vmsOf(run.workflowId);
    const intervalSeconds = 5;
    const graceSeconds = 3;
    await installReaperSchedule(client, { taskQueue: stack.taskQueue, intervalSeconds, graceSeconds });
    await run.terminate('as a user would, with temporal workflow terminate');
    const terminatedAt = Date.now();
    await eventually('the VM deleted by the reaper', async () => ((await vmsOf(run.workflowId)).length === 0 ? true : undefined), 90_000, 250);
    const createdAgo = (terminatedAt - Date.parse(vm.lastStartTimestamp!)) / 1000;
    const bound = intervalSeconds + Math.max(0, graceSeconds - createdAgo) + 35; // + the delete itself (SIGTERM, the guest's grace)
    const took = (Date.now() - terminatedAt) / 1000;
    assert.ok(took <= bound, `deleted ${took.toFixed(1)} s after the terminate; bound ${bound.toFixed(1)} s`);
    await client.schedule.getHandle(REAPER_SCHEDULE_ID).delete();

    const key = reapedKey({ backend: 'gce', zone: vm.zone, name });
    const recorded = await eventually('the deletion in the reaper log', async () => {
      const log = await reaperLog(client, { limit: 50 });
      return log.flatMap((e) => e.result.reaped).find((r) => reapedKey(r.ref) === key);
    }, 30_000, 500);
    assert.equal(recorded.reason, ReapReason.Closed);
    assert.equal(recorded.outcome, 'deleted');
    assert.equal(recorded.workflowId, run.workflowId);
    const bySearchAttribute = await eventually('the pass found by SternaReaped', async () => {
      const found = [];
      for await (const w of client.workflow.list({ query: `SternaReaped = '${key}'` })) found.push(w.workflowId);
      return found.length > 0 ? found : undefined;
    }, 30_000, 500);
    assert.ok(bySearchAttribute.every((id) => id.startsWith(REAPER_SCHEDULE_ID)));
    const billed = (await stack.emulator.billing()).filter((b) => b.name === name);
    assert.ok(billed.every((b) => !b.open), 'it bills nothing more');
    assert.ok(passLines((await reaperLog(client, { limit: 50 })).find((e) => e.result.reaped.some((r) => reapedKey(r.ref) === key))!.result).some((l) => l.includes(name)));
  });

  it('deletes a Sterna-labelled VM no workflow owns, and the VM a reused workflow id left, but not the new run under that id', async () => {
    const ghost: Owner = { run: runKey('ghost-run'), execution: executionToken('ghost'), attempt: 1 };
    const zone = 'us-central1-a';
    const request: ProvisionRequest = {
      name: 'st-ghost-a1',
      offer: { backend: 'gce', zone, region: 'us-central1', accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: 'SPOT', pricePerHour: 1, onDemandPricePerHour: 1, quotaAvailable: true },
      owner: ghost,
      labels: ownerLabels(ghost),
      diskSizeGb: 50,
      agent: { runId: 'ghost-run', attempt: 1, argv: ['sleep', '600'], env: {}, datasets: [], checkpointUri: `file://${stack.dir}/ghost`, pollSeconds: 1 },
    };
    await stack.provider.provision(request, () => undefined);

    const workflowId = `${stack.taskQueue}-reused`;
    const first = await stack.start(longSpec(), workflowId);
    const left = await training(workflowId);
    await first.terminate('leaves its VM behind');
    const second = await stack.start(longSpec(), workflowId);
    const current = await eventually('the new run training', async () => (await vmsOf(workflowId)).find((v) => v.name !== left && v.guestAttributes.sterna?.phase === 'training')?.name, 120_000, 200);

    const dry = await pass(0, true);
    assert.deepEqual(dry.reaped.filter((r) => r.ref.name === left || r.ref.name === 'st-ghost-a1').map((r) => r.outcome), [undefined, undefined], 'a dry run deletes nothing');
    assert.equal((await vmsOf(workflowId)).length, 2);

    const result = await pass(0);
    const byName = new Map(result.reaped.map((r) => [r.ref.name, r]));
    assert.equal(byName.get('st-ghost-a1')?.reason, ReapReason.Unknown);
    assert.equal(byName.get(left)?.reason, ReapReason.Closed);
    assert.ok(!byName.has(current), 'the current run under the reused id keeps its VM');
    assert.deepEqual((await vmsOf(workflowId)).map((v) => v.name), [current]);
    const [ghostVm] = await instances.get({ project: PROJECT, zone, instance: 'st-ghost-a1' }).catch(() => [undefined]);
    assert.equal(ghostVm, undefined);
    await second.cancel();
    await second.result().catch(() => undefined);
  });
});

describe('the reaper beside a run that continues as new', function () {
  this.timeout(400_000);

  it('keeps every current attempt through 55 preemptions and a continue-as-new, with passes all the while', async () => {
    const zone = { zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 };
    const provider = new ScriptedProvider([zone]);
    for (let i = 1; i <= 55; i++) provider.script('us-central1-a', { kind: 'preempt', step: i, afterPolls: 1 });
    // Deletes take a moment, as GCE's do: a window in which passes can meet an attempt mid-release, however loaded the machine.
    provider.releaseDelayMs = 400;
    const taskQueue = uniqueTaskQueue('reaper-can');
    const worker = await sternaTestWorker(taskQueue, { gce: provider });
    const env = await testEnv();
    await worker.runUntil(async () => {
      const run = await env.client.workflow.start('trainingRun', {
        taskQueue,
        workflowId: `${taskQueue}-run`,
        args: [{ command: ['python', 'train.py'], checkpoint: { uri: 'gs://ckpt/run' }, resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] }, pricing: { mode: 'spot' }, recovery: { pollSeconds: 0.2, maxPreemptions: 100, zoneCooldown: 0.01 } }],
      });
      let finished = false;
      const result = run.result().finally(() => (finished = true));
      const passes: ReaperResult[] = [];
      while (!finished) passes.push(await runReaperOnce(env.client, { taskQueue, input: { graceSeconds: 0 } }));
      const done = await result;
      assert.equal(done.preemptions, 55, 'no attempt ended but by its scripted preemption');
      assert.equal(done.attempts.length, 56);
      assert.equal((await env.client.workflow.getHandle(run.workflowId, run.firstExecutionRunId).describe()).status.name, 'CONTINUED_AS_NEW');
      // The last pass may list the final attempt as its run completes, and find the run closed.
      assert.deepEqual(passes.flatMap((p) => p.reaped.filter((r) => r.reason !== ReapReason.Closed)), []);
      assert.ok(passes.slice(0, -1).every((p) => p.reaped.length === 0), 'no pass before the last deleted anything');
      assert.ok(passes.filter((p) => p.kept.live > 0).length >= 5, `passes met live attempts (${passes.length} passes)`);
      // Each ended attempt is released beside the next placement: the passes see some mid-release and leave them.
      assert.ok(passes.some((p) => p.kept.releasing > 0), 'a pass met an attempt its run was releasing');
    });
  });
});
