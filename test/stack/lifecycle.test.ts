import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { runKey } from '../../workflows/naming';
import { preemptionNoticeSignal, statusQuery } from '../../workflows/messages';
import { rankOffers } from '../../workflows/placement';
import type { RunStatus } from '../../workflows/run/views';
import type { trainingRun } from '../../workflows/run/training-run';
import { executionHistories, saveHistory } from '../helpers/histories';
import { eventually } from '../helpers/processes';
import { typesIn, whereRunIs } from '../helpers/runs';
import { exampleSpec, PROJECT, startStack, type Stack } from '../helpers/stack';
import { teamQuery, teamWorkflowId } from '../../workflows/teams/contract';
import type { TeamView } from '../../workflows/teams/rules';
import { TEST_SYSTEM_NAMESPACE, TEST_TEAM_NAMESPACES, workflowBundle } from '../helpers/temporal';
import { sternaDataConverter } from '../../codec/data-converter';

type Run = WorkflowHandle<typeof trainingRun>;

const STEPS = 400;

function finalWeights(stack: Stack, workflowId: string): unknown {
  const file = join(stack.bucketsDir, 'sterna-examples', 'checkpoints', runKey(workflowId), `step-${STEPS}.json`);
  return JSON.parse(readFileSync(file, 'utf8'));
}

/** The trainer command with another pause per step: the weights do not depend on it. */
function withStepMs(command: string[], stepMs: number): string[] {
  const at = command.indexOf('--step-ms');
  assert.ok(at >= 0, 'the example trainer takes --step-ms');
  return [...command.slice(0, at + 1), String(stepMs), ...command.slice(at + 2)];
}

async function status(run: Run): Promise<RunStatus> {
  return run.query(statusQuery);
}

async function instancesOf(stack: Stack, workflowId: string): Promise<string[]> {
  return (await stack.provider.listRunResources(runKey(workflowId))).map((r) => r.name);
}

async function expectFailure(run: Run, type: string): Promise<ApplicationFailure> {
  const err = await run.result().then(
    () => assert.fail('the run should have failed'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof WorkflowFailedError, String(err));
  assert.ok(err.cause instanceof ApplicationFailure, `cause: ${String(err.cause)}`);
  assert.equal(err.cause.type, type, err.cause.message);
  return err.cause;
}

/** The zone the run will try first: the same pure ranking the workflow uses. */
async function preferredOffer(stack: Stack): Promise<{ zone: string; accelerator: string }> {
  const spec = exampleSpec();
  const offers = await stack.provider.findOffers({ accelerators: spec.resources.accelerators as never, provisioningModels: ['SPOT'] });
  const [first] = rankOffers(offers, [], { nowMs: Date.now(), cooldownSeconds: 1800, expectedHours: 1, models: ['SPOT'] });
  return first;
}

// The runs are spread over two team namespaces and the fleet workflows live in the system
// namespace (docs/tenancy.md), as on a platform team's cluster: every behaviour below holds
// across namespaces. Single-namespace mode (the demo's) is what every other stack test runs.
describe('trainingRun on the GCE emulator, runs in two team namespaces', function () {
  this.timeout(240_000);
  let stack: Stack;
  const runs: Run[] = [];
  /** A short name for each run, from the test that started it. */
  const titles: string[] = [];
  let title = '';
  beforeEach(function () {
    title = this.currentTest!.title.toLowerCase().replace(/[^a-z0-9]+/g, '-').split('-').slice(0, 4).join('-');
  });
  let uninterrupted: string | undefined;

  before(async () => {
    stack = await startStack({ timeFactor: 10, teams: TEST_TEAM_NAMESPACES });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  async function start(overrides = {}): Promise<Run> {
    const run = await stack.start(exampleSpec(overrides));
    runs.push(run);
    titles.push(title);
    return run;
  }

  it('completes, and its cost ledger matches the emulator billing within 1%', async () => {
    const run = await start();
    const result = await run.result();
    assert.equal(result.status, 'completed');
    assert.equal(result.finalStep, STEPS);
    assert.equal(result.lastCheckpoint?.step, STEPS);
    assert.equal(result.attempts.length, 1);
    assert.ok(result.totalCostUsd > 0 && result.totalCostUsd < result.onDemandCostUsd, 'spot costs less than on-demand');
    const billed = (await stack.emulator.billing()).filter((b) => b.labels['sterna-run'] === runKey(run.workflowId));
    assert.equal(billed.length, 1);
    const billedCost = billed.reduce((s, b) => s + b.costUsd, 0);
    assert.ok(Math.abs(result.totalCostUsd - billedCost) <= 0.01 * billedCost, `ledger $${result.totalCostUsd} vs billing $${billedCost}`);
    assert.deepEqual(await instancesOf(stack, run.workflowId), []);
    uninterrupted = run.workflowId;
  });

  it('moves to the next zone when the preferred zone has no spot capacity', async () => {
    const { zone, accelerator } = await preferredOffer(stack);
    await stack.emulator.setSpotCapacity(zone, accelerator, 0);
    try {
      const run = await start();
      const result = await run.result();
      assert.equal(result.attempts[0].zone, zone);
      assert.equal(result.attempts[0].outcome, 'stockout');
      assert.notEqual(result.attempts[1].zone, zone);
      assert.equal(result.attempts[1].outcome, 'completed');
      const { timeline } = await status(run);
      assert.ok(timeline.some((e) => e.kind === 'attempt-failed' && e.zone === zone && e.outcome === 'stockout'), 'the stockout is in the run history');
    } finally {
      await stack.emulator.setSpotCapacity(zone, accelerator, undefined);
    }
  });

  it('resumes in another zone from the last checkpoint after each preemption, ending with the same weights', async () => {
    // A slower trainer, same weights: at the example's 25 ms a step, the second attempt
    // can finish before the run first hears from it, and never shows as training.
    const run = await start({ command: withStepMs(exampleSpec().command, 60) });
    for (const attempt of [1, 2]) {
      let seen: RunStatus | undefined;
      const s = await eventually(`a checkpoint on attempt ${attempt}`, async () => {
        const s = (seen = await status(run));
        return s.attempt === attempt && s.phase === 'training' && (s.lastCheckpoint?.step ?? 0) > attempt * 60 ? s : undefined;
      }, 60_000).catch((err: Error) => {
        throw new Error(`${err.message}; last seen: ${seen ? whereRunIs(seen, 20) : 'no status'}`);
      });
      const live = s.ledger.find((l) => l.attempt === attempt)!;
      await stack.emulator.preempt(live.zone, (await instancesOf(stack, run.workflowId))[0]);
    }
    const result = await run.result();
    assert.equal(result.preemptions, 2);
    assert.deepEqual(result.attempts.map((a) => a.outcome), ['preempted', 'preempted', 'completed']);
    assert.notEqual(result.attempts[1].zone, result.attempts[0].zone, 'the second attempt avoids the zone that preempted');
    const { timeline } = await status(run);
    const resumed = timeline.filter((e) => e.kind === 'preempted').map((e) => e.step!);
    assert.equal(resumed.length, 2);
    assert.ok(resumed.every((step) => step > 0), `resumed from ${resumed.join(', ')}, not from 0`);
    assert.ok(uninterrupted, 'the happy-path run ran first');
    assert.deepEqual(finalWeights(stack, run.workflowId), finalWeights(stack, uninterrupted!));
  });

  it('takes an external preemption notice for its VM (and ignores one for another)', async () => {
    const run = await start();
    await eventually('training', async () => ((await status(run)).phase === 'training' ? true : undefined));
    const [vm] = await instancesOf(stack, run.workflowId);
    await run.signal(preemptionNoticeSignal, { name: 'st-someone-else-a1', reason: 'not ours' });
    await run.signal(preemptionNoticeSignal, { name: vm, reason: 'shutdown hook' });
    const zone = (await status(run)).zone!;
    await stack.emulator.preempt(zone, vm);
    const result = await run.result();
    assert.equal(result.preemptions, 1);
    const notices = (await status(run)).timeline.filter((e) => e.kind === 'preemption-notice');
    assert.deepEqual(notices.map((e) => [e.attempt, e.event]), [[1, `preemption notice for ${vm}: shutdown hook`]], 'one notice, for its own VM');
    assert.deepEqual(await instancesOf(stack, run.workflowId), []);
  });

  it('cancelled while training, deletes its VM within seconds', async () => {
    const run = await start();
    await eventually('training', async () => ((await status(run)).phase === 'training' ? true : undefined));
    assert.equal((await instancesOf(stack, run.workflowId)).length, 1);
    const cancelledAt = Date.now();
    await run.cancel();
    const err = await run.result().catch((e: unknown) => e);
    assert.ok(err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure, String(err));
    assert.deepEqual(await instancesOf(stack, run.workflowId), []);
    assert.ok(Date.now() - cancelledAt < 15_000, `released in ${Date.now() - cancelledAt} ms`);
  });

  it('stops with BudgetExceeded when the budget runs out, releasing the VM and keeping the checkpoints', async () => {
    // About two seconds of an L4 spot VM.
    const run = await start({ pricing: { mode: 'spot', budgetUsd: 0.0002 } });
    const failure = await expectFailure(run, 'BudgetExceeded');
    assert.match(failure.message, /budget/);
    assert.deepEqual(await instancesOf(stack, run.workflowId), []);
  });

  it('in auto mode with spot unavailable and the deadline near, runs on on-demand', async () => {
    const zones = ['us-central1-a', 'us-central1-b'];
    for (const zone of zones) await stack.emulator.setSpotCapacity(zone, 'nvidia-l4', 0);
    try {
      const run = await start({
        resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
        placement: { zones: { allow: zones } },
        pricing: { mode: 'auto' },
        time: { deadlineAfter: '10m', expectedDuration: '8m' },
      });
      const result = await run.result();
      assert.equal(result.attempts[result.attempts.length - 1].provisioningModel, 'STANDARD');
      assert.equal(result.status, 'completed');
    } finally {
      for (const zone of zones) await stack.emulator.setSpotCapacity(zone, 'nvidia-l4', undefined);
    }
  });

  it('fails an invalid spec with InvalidSpec naming the bad fields, creating nothing', async () => {
    const run = await stack.start({ ...exampleSpec(), command: [], resources: { accelerators: [] } } as never);
    runs.push(run);
    titles.push(title);
    const failure = await expectFailure(run, 'InvalidSpec');
    assert.match(failure.message, /command: /);
    assert.match(failure.message, /resources\.accelerators: /);
    assert.equal(failure.nonRetryable, true);
    assert.deepEqual(await instancesOf(stack, run.workflowId), []);
    assert.equal((await stack.emulator.billing()).filter((b) => b.labels['sterna-run'] === runKey(run.workflowId)).length, 0);
  });

  it('replays every history above without nondeterminism', async () => {
    const histories = await Promise.all(runs.map(async (run) => ({ workflowId: run.workflowId, history: await run.fetchHistory() })));
    // STERNA_RECORD_HISTORIES=test/histories keeps them, so later changes are replayed against them.
    if (process.env.STERNA_RECORD_HISTORIES) {
      for (const [i, run] of runs.entries()) await saveHistory(join(process.env.STERNA_RECORD_HISTORIES, `lifecycle-${titles[i]}.binpb`), run.workflowId);
    }
    const replay = Worker.runReplayHistories({ workflowBundle: await workflowBundle(require.resolve('../../workflows')), dataConverter: sternaDataConverter() }, histories);
    let count = 0;
    for await (const result of replay) {
      assert.equal(result.error, undefined, `${result.workflowId}: ${String(result.error)}`);
      count++;
    }
    assert.equal(count, runs.length);
  });

  it('records no patch marker: a rule change is a new worker version (docs/versions.md), never a patch', async () => {
    for (const run of runs) {
      const histories = await executionHistories(stack.clientOf(run.workflowId), run.workflowId);
      const markers = histories.map((events) => events.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch').length);
      assert.deepEqual(markers, histories.map(() => 0), run.workflowId);
    }
  });

  it('ran its runs in both team namespaces, each charged to its own, with the fleet workflows in the system namespace only', async () => {
    const namespaces = stack.namespaces!;
    const used = new Set(runs.map((run) => stack.clientOf(run.workflowId).options.namespace));
    assert.deepEqual([...used].sort(), [...TEST_TEAM_NAMESPACES]);
    for (const team of TEST_TEAM_NAMESPACES) assert.deepEqual(await typesIn(namespaces.of(team), stack.taskQueue), ['trainingRun'], team);
    const system = await typesIn(namespaces.of(TEST_SYSTEM_NAMESPACE), stack.taskQueue);
    assert.ok(['fleetObserver', 'teamLedger'].every((type) => system.includes(type)) && !system.includes('trainingRun'), system.join(', '));
    // Each team's ledger (in the system namespace) holds its own namespace's runs, and only those.
    for (const team of TEST_TEAM_NAMESPACES) {
      const view = (await namespaces.system.workflow.getHandle(teamWorkflowId(stack.taskQueue, team)).query(teamQuery)) as TeamView;
      const own = runs.filter((run) => stack.clientOf(run.workflowId).options.namespace === team).map((run) => run.workflowId);
      const charged = view.runs.map((r) => r.runId);
      assert.ok(charged.length > 0 && charged.every((id) => own.includes(id)), `${team}'s ledger charges ${charged.join(', ')}; its runs: ${own.join(', ')}`);
    }
  });
});

describe('trainingRun when its worker is killed, runs in two team namespaces', function () {
  this.timeout(300_000);
  let stack: Stack;
  before(async () => (stack = await startStack({ timeFactor: 10, teams: TEST_TEAM_NAMESPACES })));
  after(async () => stack?.stop());

  for (const phase of ['provisioning', 'training'] as const) {
    it(`completes after a SIGKILL during ${phase}, with one VM per attempt and none left over`, async () => {
      let worker = stack.spawnWorker();
      const run = await stack.start(exampleSpec());
      await eventually(phase, async () => ((await run.query(statusQuery)).phase === phase ? true : undefined), 90_000, 50);
      await worker.kill('SIGKILL');
      worker = stack.spawnWorker();
      const result = await run.result();
      assert.equal(result.status, 'completed');
      const billed = (await stack.emulator.billing()).filter((b) => b.labels['sterna-run'] === runKey(run.workflowId));
      assert.equal(billed.length, result.attempts.length, 'exactly one VM per attempt');
      assert.deepEqual(await instancesOf(stack, run.workflowId), []);
      await worker.kill('SIGTERM');
    });
  }
});

export { PROJECT };
