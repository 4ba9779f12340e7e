/**
 * The checkpoint interval changed mid-attempt, end to end on the GCE emulator: two runs
 * train in one zone; the second is preempted, its preemption reaches the project's zone
 * memory, and the first run (still in its first attempt) reads the higher rate, writes
 * the new interval into its VM's metadata (setMetadata, with the fingerprint), and its
 * agent hands it to the trainer, which then checkpoints that much more often.
 */
import { strict as assert } from 'node:assert';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { InstancesClient } from '@google-cloud/compute';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunSpecInput } from '../../workflows/spec';
import { eventually } from '../helpers/processes';
import { exampleSpec, PROJECT, startStack, type Stack } from '../helpers/stack';

const ZONE = 'us-central1-a';

/** A long run of the example trainer in ZONE, spot, checkpointing every 10 s at most. */
function longRun(overrides: Partial<RunSpecInput> = {}): RunSpecInput {
  const spec = exampleSpec();
  return exampleSpec({
    command: ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', '200000', '--step-ms', '20'],
    checkpoint: { uri: spec.checkpoint.uri, maxInterval: '10s', minInterval: '1s' },
    resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
    placement: { zones: { allow: [ZONE] } },
    pricing: { mode: 'spot', budgetUsd: 50 },
    ...overrides,
  });
}

/** Steps between consecutive checkpoints the agent uploaded, in step order. */
function uploadedGaps(dir: string, fromStep: number): number[] {
  const steps = readdirSync(dir)
    .map((n) => /^step-(\d+)\.json$/.exec(n)?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number)
    .filter((s) => s >= fromStep)
    .sort((a, b) => a - b);
  return steps.slice(1).map((s, i) => s - steps[i]);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

describe('the checkpoint interval changed mid-attempt (real stack)', function () {
  this.timeout(360_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  it("tightens a training attempt's interval when another run's preemptions in its zone raise the rate", async () => {
    const watched = await stack.start(longRun());
    // The other run gives up at its first preemption: it releases and tells the zone memory.
    const other = await stack.start(longRun({ recovery: { maxPreemptions: 0, pollSeconds: 0.5 } }));
    const training = async (run: typeof watched) => {
      const s = await run.query(statusQuery);
      return s.phase === 'training' && (s.lastCheckpoint?.step ?? 0) > 0 ? s : undefined;
    };
    const before = await eventually('the watched run trains past a checkpoint', () => training(watched), 120_000);
    await eventually('the other run trains past a checkpoint', () => training(other), 120_000);
    assert.equal(before.zone, ZONE);
    const initial = before.checkpointInterval!;
    assert.ok(initial.preemptionsPerHour < 1, `no preemption seen yet: ${initial.preemptionsPerHour}/h`);
    assert.ok(initial.seconds >= 5, `${initial.seconds} s before`);

    const [otherVm] = await stack.provider.listRunResources(runKey(other.workflowId));
    await stack.emulator.preempt(ZONE, otherVm.name);
    await assert.rejects(other.result(), 'the other run ends at its first preemption');

    const after = await eventually(
      'the watched run tightens its interval',
      async () => {
        const s = await watched.query(statusQuery);
        return s.checkpointInterval && s.checkpointInterval.preemptionsPerHour > 10 ? s : undefined;
      },
      180_000,
      500,
    );
    assert.equal(after.attempt, 1, 'still the first attempt');
    const tightened = after.checkpointInterval!;
    assert.ok(tightened.seconds <= initial.seconds / 2, `${initial.seconds} s -> ${tightened.seconds} s at ${tightened.preemptionsPerHour.toFixed(0)} preemptions/h`);
    const changes = after.timeline.filter((e) => e.kind === 'checkpoint-interval');
    assert.match(changes.at(-1)!.event, new RegExp(`^checkpoint interval \\d+ s -> ${tightened.seconds} s: ${ZONE} preempts`));

    // The VM's metadata holds it, and its agent handed it on (its own report).
    const [vm] = await stack.provider.listRunResources(runKey(watched.workflowId));
    const instances = new InstancesClient(stack.emulator.clientOptions);
    const [instance] = await instances.get({ project: PROJECT, zone: ZONE, instance: vm.name });
    assert.equal(instance.metadata?.items?.find((i) => i.key === 'sterna-checkpoint-interval')?.value, String(tightened.seconds));
    await eventually('the agent reports the new interval', async () => {
      const view = (await stack.emulator.instances()).find((i) => i.name === vm.name);
      return view?.guestAttributes.sterna?.['checkpoint-interval'] === String(tightened.seconds) ? true : undefined;
    });
    // A writer with a stale fingerprint is refused (412), as on GCE.
    await assert.rejects(
      instances.setMetadata({ project: PROJECT, zone: ZONE, instance: vm.name, metadataResource: { fingerprint: 'stale-print=', items: [{ key: 'x', value: 'y' }] } }),
      (err: { httpStatusCode?: number; message?: string }) => err.httpStatusCode === 412 || /fingerprint/.test(err.message ?? ''),
    );

    // The trainer follows: the checkpoints it writes from now on come that much closer together.
    const changedAtStep = (await watched.query(statusQuery)).step!;
    const dir = join(stack.bucketsDir, 'sterna-examples', 'checkpoints', runKey(watched.workflowId));
    const beforeGaps = uploadedGaps(dir, 0).slice(0, 3);
    await eventually('several checkpoints after the change', () => (uploadedGaps(dir, changedAtStep).length >= 4 ? true : undefined), 60_000);
    const afterGaps = uploadedGaps(dir, changedAtStep);
    assert.ok(median(afterGaps) * 2 <= median(beforeGaps), `steps between checkpoints: ${beforeGaps.join(', ')} before, ${afterGaps.join(', ')} after`);

    await watched.cancel();
    await assert.rejects(watched.result());
  });
});
