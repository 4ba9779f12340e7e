/**
 * Issue 38, item 5: a failed attempt kept for inspection (recovery.keepOnFailure), through
 * the real path: a run started with the SDK whose command fails on a real VM process of
 * the emulator, the worker's keep labelling it through the @google-cloud/compute client
 * (setLabels), the status query saying how to reach it, and the reaper workflow deleting
 * it only once its keep-until has passed. The keep is the spec's shortest, one minute:
 * the test waits it out rather than loosen the user-facing bounds.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync } from 'node:fs';
import { runReaperOnce } from '../../activities/reaper';
import { keptLines } from '../../cli/format';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import { failureOf } from '../helpers/runs';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';
import { testEnv } from '../helpers/temporal';

describe('keepOnFailure: a failed attempt kept for inspection, then reaped', function () {
  this.timeout(420_000);
  let stack: Stack;

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  it('leaves exactly the failed attempt\'s VM, labelled, says how to reach it, and the reaper deletes it after its time', async () => {
    const spec = exampleSpec({ command: ['node', '-e', 'console.log("about to fail"); process.exit(3)'], recovery: { ...exampleSpec().recovery, maxRestartsOnError: 1, keepOnFailure: '1m' } });
    const startedMs = Date.now();
    const handle = await stack.start(spec);
    const failure = await failureOf(handle);
    assert.equal(failure.type, 'UserCodeFailed');
    const run = runKey(handle.workflowId);

    // Attempt 1 failed and was restarted (released); attempt 2 failed the run and is kept.
    const mine = (await stack.provider.listFleet()).filter((r) => r.owner.run === run);
    assert.equal(mine.length, 1, `exactly one VM is left: ${JSON.stringify(mine)}`);
    const [kept] = mine;
    assert.equal(kept.owner.attempt, 2);
    assert.equal(kept.lifecycle, 'running', 'kept up for inspection (the agent waits the keep out before powering off)');
    assert.ok(kept.keepUntil !== undefined, 'labelled sterna-keep-until');
    const keepUntilMs = kept.keepUntil * 1000;
    assert.ok(keepUntilMs > startedMs + 55_000 && keepUntilMs <= Date.now() + 60_000, `kept about a minute from the failure: ${new Date(keepUntilMs).toISOString()}`);

    // The status (the query `sterna status` prints) says it is kept, until when and how to reach it.
    const status = await handle.query(statusQuery);
    assert.equal(status.phase, 'failed');
    assert.equal(status.kept?.attempt, 2);
    assert.equal(status.kept?.name, kept.ref.name);
    assert.equal(Date.parse(status.kept!.until), keepUntilMs);
    assert.equal(status.kept?.reach.length, 1);
    const lines = keptLines(status);
    assert.match(lines[0], new RegExp(`^  kept: attempt 2 \\(${kept.ref.name} in ${kept.ref.zone}\\) until `));
    assert.match(lines[2], /cost: not in the run's cost/);
    assert.ok(status.timeline.some((e) => e.kind === 'kept' && e.attempt === 2));
    // The emulator's equivalent of `gcloud compute ssh`: the line, run as given, names the VM's directory on its host
    // (asynchronously: the emulator answering it runs in this process).
    const dir = (await promisify(execFile)('bash', ['-c', status.kept!.reach[0]], { encoding: 'utf8' })).stdout.trim();
    assert.ok(dir.length > 0 && existsSync(dir), `the reach line gives the VM's directory: ${JSON.stringify(dir)}`);
    const costNow = status.costUsd;

    // The reaper leaves it alone before its time...
    const client = (await testEnv()).client;
    const pass = () => runReaperOnce(client, { taskQueue: stack.taskQueue, input: { graceSeconds: 0, backends: ['gce'] } });
    const early = await pass();
    assert.ok(Date.now() < keepUntilMs, 'the first pass came before keep-until (else this test proves nothing)');
    assert.equal(early.reaped.filter((r) => r.owner.run === run).length, 0);
    assert.ok(early.kept.kept >= 1, `kept counted: ${JSON.stringify(early.kept)}`);
    assert.equal((await stack.provider.listFleet()).filter((r) => r.owner.run === run).length, 1);

    // ...and deletes it once its time has passed.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, keepUntilMs - Date.now()) + 1500));
    const late = await pass();
    const reaped = late.reaped.filter((r) => r.owner.run === run);
    assert.deepEqual(reaped.map((r) => [r.ref.name, r.reason, r.outcome]), [[kept.ref.name, 'closed', 'deleted']]);
    assert.deepEqual(await stack.provider.listRunResources(run), [], 'nothing of the run is left');

    // The run's cost stopped at its end: the kept time is not in it.
    assert.equal((await handle.query(statusQuery)).costUsd, costNow);
  });
});
