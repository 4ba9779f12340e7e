/**
 * Issue 36, item 5: failures no new VM can change end the run at once, named, instead of
 * costing a VM per restart. A command whose program does not exist exits 127 on the
 * first VM and the run fails there (UserCodeFailed, saying what to fix); a dataset whose
 * object does not exist is found before any VM is created (InvalidSpec), the emulator's
 * instance list staying empty. Through the real path: runs started with the SDK, real VM
 * processes in the emulator running the agent, the datasets checked where the VMs stage them.
 */
import { strict as assert } from 'node:assert';
import { statusQuery } from '../workflows/messages';
import { runKey } from '../workflows/naming';
import { executionHistories } from './helpers/histories';
import { failureOf } from './helpers/runs';
import { exampleSpec, startStack, type Stack } from './helpers/stack';


/** The activities a run scheduled, by type, across its executions. */
async function scheduled(stack: Stack, workflowId: string, type: string): Promise<number> {
  const events = (await executionHistories(stack.env.client, workflowId)).flat();
  return events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === type).length;
}

describe('deterministic failures end the run at once, named', function () {
  this.timeout(300_000);
  let stack: Stack;

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  it('a dataset object that does not exist fails the run before any VM is created', async () => {
    const spec = exampleSpec();
    const missing = 'gs://sterna-examples/logreg/no-such-train.csv';
    const handle = await stack.start({ ...spec, datasets: [spec.datasets![0], { uri: missing, path: 'data/train.csv' }] });
    const failure = await failureOf(handle);
    assert.equal(failure.type, 'InvalidSpec');
    assert.match(failure.message, /^datasets\[1\]\.uri gs:\/\/sterna-examples\/logreg\/no-such-train\.csv: /);
    assert.match(failure.message, /upload the data or fix the URI/);
    assert.equal(await scheduled(stack, handle.workflowId, 'provision'), 0, 'nothing was provisioned');
    assert.deepEqual(await stack.emulator.admin.instances(), [], "the emulator's instance list stays empty");
    assert.deepEqual(await stack.emulator.billing(), [], 'no VM was ever billed');
    const { phase, attempt } = await handle.query(statusQuery);
    assert.equal(phase, 'failed');
    assert.equal(attempt, undefined, 'no attempt was made');

    // A prefix the agent stages whole is there: the check does not refuse it.
    const prefixed = await stack.start({ ...spec, datasets: [spec.datasets![0], { uri: 'gs://sterna-examples/logreg/', path: 'data/all' }], command: ['node', 'trainer.js', '--data', 'data/all/train.csv', '--steps', '40', '--step-ms', '25'] });
    assert.equal((await prefixed.result()).status, 'completed');
  });

  it('a command whose program does not exist (exit 127) ends the run after one VM, saying what to fix', async () => {
    const spec = exampleSpec({ command: ['no-such-trainer', '--steps', '10'], recovery: { ...exampleSpec().recovery, maxRestartsOnError: 2 } });
    const handle = await stack.start(spec);
    const failure = await failureOf(handle);
    assert.equal(failure.type, 'UserCodeFailed');
    assert.match(failure.message, /program "no-such-trainer" was not found \(exit code 127\)/);
    assert.match(failure.message, /fix command\[0\]/);
    const [details] = failure.details as [{ exitCode: number; attempt: number; logTail: string[] }];
    assert.deepEqual([details.exitCode, details.attempt], [127, 1]);
    assert.ok(details.logTail.some((l) => /no-such-trainer/.test(l)), `the failure carries the log's last lines: ${JSON.stringify(details.logTail)}`);
    assert.match(failure.message, /; its log's last \d+ lines are in this failure's details \(all of it: sterna logs .* --attempt 1\)$/);
    assert.equal(await scheduled(stack, handle.workflowId, 'provision'), 1, 'one VM, no restart');
    const billed = (await stack.emulator.billing()).filter((b) => b.labels['sterna-run'] === runKey(handle.workflowId));
    assert.equal(billed.length, 1, 'one VM was billed');
    assert.ok(billed.every((b) => b.stoppedAt), 'and it was released');
    const { timeline, restarts } = await handle.query(statusQuery);
    assert.equal(restarts, 0);
    const ended = timeline.filter((e) => e.kind === 'attempt-failed').map((e) => [e.attempt, e.outcome]);
    assert.deepEqual(ended, [[1, 'not-runnable']], 'the attempt ended not-runnable');
  });

  it('a setup command that fails ends the run after one VM (SetupFailed), with the command\'s output in the failure', async () => {
    const spec = exampleSpec({ setup: ['echo preparing the environment', 'echo no such requirement >&2; exit 3'], recovery: { ...exampleSpec().recovery, maxRestartsOnError: 2 } });
    const handle = await stack.start(spec);
    const failure = await failureOf(handle);
    assert.equal(failure.type, 'SetupFailed');
    assert.match(failure.message, /^a setup command failed: setup command 2 of 2 exited with code 3; not retried: a new VM would fail the same way/);
    const [details] = failure.details as [{ exitCode: number; logTail: string[] }];
    assert.equal(details.exitCode, 71);
    assert.ok(details.logTail.includes('setup-err no such requirement'), JSON.stringify(details.logTail));
    assert.equal(await scheduled(stack, handle.workflowId, 'provision'), 1, 'one VM, no restart');
    const { timeline, restarts } = await handle.query(statusQuery);
    assert.equal(restarts, 0);
    assert.deepEqual(timeline.filter((e) => e.kind === 'attempt-failed').map((e) => [e.attempt, e.outcome]), [[1, 'setup-failed']]);
  });
});

describe('a run that cannot succeed fails its checks before anything is created', function () {
  this.timeout(300_000);
  let stack: Stack;

  before(async () => {
    // A new GCP project: GPUS_ALL_REGIONS is 0 until a quota is granted.
    stack = await startStack({ timeFactor: 10, gpusAllRegions: 0 });
    await stack.startWorker();
  });

  after(async () => {
    await stack?.stop();
  });

  it('fails with ChecksFailed naming the quota to request, with no VM and no admission asked', async () => {
    const handle = await stack.start(exampleSpec());
    const failure = await failureOf(handle);
    assert.equal(failure.type, 'ChecksFailed');
    assert.match(failure.message, /^the run cannot succeed as things stand, so nothing was created: quota:GPUS_ALL_REGIONS: the project's GPUS_ALL_REGIONS quota is 0.*\(to fix: request a GPUS_ALL_REGIONS quota of at least 1/);
    assert.equal(await scheduled(stack, handle.workflowId, 'findCapacity'), 0);
    assert.equal(await scheduled(stack, handle.workflowId, 'provision'), 0);
    assert.equal(await scheduled(stack, handle.workflowId, 'askAdmission'), 0);
    assert.deepEqual(await stack.emulator.instances(), []);
  });
});
