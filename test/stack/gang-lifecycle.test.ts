/**
 * Gang runs end to end on the GCE emulator: two real VM processes per attempt whose
 * trainers add their gradients over TCP each step (examples/trainer.ts), a partial gang
 * (one node stocked out) released whole, a preempted node moving the whole gang to
 * another zone, and the weights it ends with.
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { observerOptions } from '../../activities/fleet';
import { createSternaWorker } from '../../workers/worker';
import { dataParallelStep, parseData, shardOf, type Checkpoint } from '../../examples/trainer';
import { runKey } from '../../workflows/naming';
import { statusQuery, type ResourceObservation } from '../../workflows/messages';
import { rankOffers } from '../../workflows/placement';
import type { trainingRun } from '../../workflows/run/training-run';
import { allEvents, payloadValue } from '../helpers/histories';
import { eventually } from '../helpers/processes';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';
import { workflowBundle } from '../helpers/temporal';

type Run = WorkflowHandle<typeof trainingRun>;

const STEPS = 600;
const NODES = 2;
const ACCELERATOR = 'nvidia-l4';

/** A two-node gang of the example, one L4 per node. */
function gangSpec() {
  const spec = exampleSpec();
  return exampleSpec({
    command: ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', String(STEPS), '--step-ms', '25', '--data-parallel'],
    resources: { accelerators: [{ type: ACCELERATOR, count: 1 }], nodes: NODES },
    pricing: { ...spec.pricing, budgetUsd: 20 },
  });
}

function finalCheckpoint(stack: Stack, workflowId: string): Checkpoint {
  const file = join(stack.bucketsDir, 'sterna-examples', 'checkpoints', runKey(workflowId), `step-${STEPS}.json`);
  return JSON.parse(readFileSync(file, 'utf8')) as Checkpoint;
}

/** What two ranks that really exchange gradients end with: the data-parallel step, computed here. */
function expectedGangWeights(stack: Stack): Checkpoint {
  const data = parseData(readFileSync(join(stack.bucketsDir, 'sterna-examples', 'logreg', 'train.csv'), 'utf8'));
  const shards = Array.from({ length: NODES }, (_, rank) => shardOf(data, rank, NODES));
  let state: Checkpoint = { step: 0, weights: new Array<number>(data.x[0].length).fill(0), bias: 0, loss: NaN };
  while (state.step < STEPS) state = dataParallelStep(state, shards, 0.1);
  // As a checkpoint file holds it (JSON keeps every bit of a double).
  return JSON.parse(JSON.stringify(state)) as Checkpoint;
}

/** Every observation the fleet observer signalled to the run. */
async function heard(client: Client, workflowId: string): Promise<ResourceObservation[]> {
  const signals = (await allEvents(client, workflowId)).filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'observation');
  return Promise.all(signals.map((e) => payloadValue<ResourceObservation>(e.workflowExecutionSignaledEventAttributes!.input!.payloads![0])));
}

async function vmsOf(stack: Stack, workflowId: string): Promise<string[]> {
  return (await stack.provider.listRunResources(runKey(workflowId))).map((r) => r.name).sort();
}

describe('gang runs on the GCE emulator', function () {
  this.timeout(300_000);
  let stack: Stack;
  let worker: Worker | undefined;
  let working: Promise<void> | undefined;
  let uninterrupted: string | undefined;

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    // A worker with the fleet observer: the runs hear of each node from its one listing.
    worker = await createSternaWorker({
      connection: stack.env.nativeConnection,
      namespace: stack.env.namespace,
      taskQueue: stack.taskQueue,
      providers: { gce: stack.provider },
      workflowBundle: await workflowBundle(require.resolve('../../workflows')),
      observer: observerOptions({ settings: { intervalSeconds: 1, progressReadSeconds: 2, busyReadSeconds: 1, progressSignalSeconds: 2, maxSilenceSeconds: 5 }, watchSeconds: 20, idleExitSeconds: 600 }),
    });
    working = worker.run();
  });
  after(async () => {
    worker?.shutdown();
    await working;
    await stack?.stop();
  });

  it('trains two ranks together (their gradients exchanged), bills both nodes, and leaves nothing behind', async () => {
    const run: Run = await stack.start(gangSpec());
    const status = await eventually('both nodes listed while it trains', async () => {
      const s = await run.query(statusQuery);
      return s.phase === 'training' ? s : undefined;
    }, 120_000);
    const names = await vmsOf(stack, run.workflowId);
    assert.deepEqual(status.nodes?.map((n) => n.name).sort(), names, 'the status shows every node');
    assert.equal(names.length, NODES);
    const result = await run.result();
    assert.equal(result.finalStep, STEPS);
    assert.equal(result.attempts.length, 1);
    // Rank 1's rows count in every step only if the ranks really exchanged gradients.
    assert.deepEqual(finalCheckpoint(stack, run.workflowId), expectedGangWeights(stack));
    const billed = (await stack.emulator.billing()).filter((b) => b.labels['sterna-run'] === runKey(run.workflowId));
    assert.deepEqual(billed.map((b) => b.labels['sterna-rank']).sort(), ['0', '1']);
    const billedCost = billed.reduce((s, b) => s + b.costUsd, 0);
    // The ledger's one window for the gang, at both nodes' price, is what the two VMs were billed.
    assert.ok(Math.abs(result.totalCostUsd - billedCost) <= 0.02 * billedCost, `ledger $${result.totalCostUsd} vs billing $${billedCost}`);
    assert.deepEqual(await vmsOf(stack, run.workflowId), []);
    uninterrupted = run.workflowId;
  });

  it('releases a partial gang when one node stocks out, moves the whole gang on a preemption of one node, and ends with the uninterrupted gang\'s weights', async () => {
    assert.ok(uninterrupted, 'the uninterrupted gang ran first');
    const offers = await stack.provider.findOffers({ accelerators: [{ type: ACCELERATOR, count: 1 }], provisioningModels: ['SPOT'], nodes: NODES });
    const [preferred] = rankOffers(offers, [], { nowMs: Date.now(), cooldownSeconds: 1800, expectedHours: 1, models: ['SPOT'] });
    // Room for one node only: rank 0 is created, rank 1 stocks out.
    await stack.emulator.setSpotCapacity(preferred.zone, ACCELERATOR, 1);
    const run: Run = await stack.start(gangSpec());
    try {
      const second = await eventually('the gang training in another zone', async () => {
        const s = await run.query(statusQuery);
        return s.attempt === 2 && s.phase === 'training' ? s : undefined;
      }, 120_000);
      assert.notEqual(second.zone, preferred.zone);
      assert.equal(second.ledger[0].outcome, 'stockout');
      // Nothing of the partial gang is left: only the second attempt's two nodes exist.
      const names = await vmsOf(stack, run.workflowId);
      assert.deepEqual(names, second.nodes!.map((n) => n.name).sort());
      assert.ok(names.every((n) => /-a2-n[01]$/.test(n)), names.join(', '));
      assert.equal((await stack.emulator.instances()).filter((i) => i.zone === preferred.zone && i.labels['sterna-run'] === runKey(run.workflowId)).length, 0);
    } finally {
      await stack.emulator.setSpotCapacity(preferred.zone, ACCELERATOR, undefined);
    }
    const checkpointed = await eventually('a checkpoint of the second attempt', async () => {
      const s = await run.query(statusQuery);
      return s.attempt === 2 && (s.lastCheckpoint?.step ?? 0) >= 60 ? s : undefined;
    }, 120_000);
    // One node of the gang is preempted: the whole gang goes.
    await stack.emulator.preempt(checkpointed.zone!, checkpointed.nodes![1].name);
    const result = await run.result();
    assert.deepEqual(result.attempts.map((a) => a.outcome), ['stockout', 'preempted', 'completed']);
    const told = await heard(stack.env.client, run.workflowId);
    assert.ok(told.some((o) => o.name === checkpointed.nodes![1].name && o.snapshot.preempted), 'the fleet observer told the run of rank 1\'s preemption');
    assert.equal(result.preemptions, 1);
    assert.notEqual(result.attempts[2].zone, result.attempts[1].zone, 'the gang resumed in another zone');
    const { timeline } = await run.query(statusQuery);
    const resumed = timeline.filter((e) => e.kind === 'preempted').map((e) => e.step!);
    assert.equal(resumed.length, 1);
    assert.ok(resumed[0] >= 60, `resumed from step ${resumed[0]}, not from 0`);
    assert.deepEqual(finalCheckpoint(stack, run.workflowId), finalCheckpoint(stack, uninterrupted!));
    assert.deepEqual(await vmsOf(stack, run.workflowId), []);
  });
});
