/**
 * Forged messages, each sent the way an outside caller would (the Temporal CLI or the
 * SDK's client) against the real stack: a continued state carried in by cron, by a retry,
 * by a reset and by a plain start; an admission signal that did not come from the team's
 * ledger; observer settings that would exhaust the project's read quota. None of them may
 * steer a run or the fleet.
 */
import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { cancel, getTeam, setTeamLimits } from '../../client';
import { findTemporalCli } from '../../processes/temporal-cli';
import { acceptContinuation, type ContinuedRun } from '../../workflows/run/continuation';
import { observerWorkflowId } from '../../workflows/fleet/contract';
import { statusQuery } from '../../workflows/messages';
import { executionToken, runKey } from '../../workflows/naming';
import { parseSpec } from '../../workflows/spec';
import type { trainingRun } from '../../workflows/run/training-run';
import { allEvents, executionHistories } from '../helpers/histories';
import { eventually } from '../helpers/processes';
import { failureOf } from '../helpers/runs';
import { exampleSpec, PROJECT, startStack, type Stack } from '../helpers/stack';
import { sternaTestWorker, testServerAddress } from '../helpers/temporal';

const exec = promisify(execFile);
const EventType = temporal.api.enums.v1.EventType;
type Run = WorkflowHandle<typeof trainingRun>;


describe('forged messages: only Sterna itself steers a run and its fleet', function () {
  this.timeout(300_000);
  let stack: Stack;
  let cli: string;
  let address: string;

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
    cli = (await findTemporalCli()) ?? assert.fail('the Temporal CLI is installed by npm test');
    address = await testServerAddress();
  });
  after(async () => {
    await stack?.stop();
  });

  /** `temporal <args>` against the test server, as an outside caller would run it. */
  async function temporalCli(...args: string[]): Promise<string> {
    const { stdout } = await exec(cli, [...args, '--address', address, '--namespace', stack.env.namespace ?? 'default']);
    return stdout;
  }

  /** The forged state: a $1,000 budget under a $5 spec, admitted without asking, resuming from an object of the bucket. */
  function forgedInput(workflowId: string): ContinuedRun {
    const spec = parseSpec(exampleSpec());
    const data = readFileSync(join(stack.bucketsDir, 'sterna-examples', 'logreg', 'train.csv'));
    const now = Date.now();
    const state = {
      runId: workflowId,
      phase: 'training',
      startedAt: new Date(now).toISOString(),
      attempts: [],
      zoneEvents: [],
      preemptions: 0,
      restarts: 0,
      timeline: [],
      budgetUsd: 1000,
      admission: { team: stack.env.namespace ?? 'default', status: 'admitted', askedAt: now, firstAskedAt: now },
      lastCheckpoint: { uri: 'gs://sterna-examples/logreg/train.csv', sha256: createHash('sha256').update(data).digest('hex'), step: 5 },
    };
    return { continued: true, spec, state } as unknown as ContinuedRun;
  }

  /** The state is well-formed: only the way it came in refuses it. */
  function assertWellFormed(workflowId: string, firstRunId: string): void {
    const genuine = { workflowId, execution: executionToken(firstRunId), continuedFromExecutionRunId: 'a-previous-run', attempt: 1 };
    assert.equal(acceptContinuation(forgedInput(workflowId), genuine).state.budgetUsd, 1000);
  }

  async function nothingCreatedFor(workflowId: string): Promise<void> {
    assert.deepEqual(await stack.provider.listRunResources(runKey(workflowId)), []);
  }

  describe('a continued state gets in only through the run\'s own continue-as-new', () => {
    it('a plain start is refused', async () => {
      const workflowId = `${stack.taskQueue}-forged-plain`;
      await temporalCli('workflow', 'start', '--task-queue', stack.taskQueue, '--type', 'trainingRun', '--workflow-id', workflowId, '--input', JSON.stringify(forgedInput(workflowId)));
      const handle = stack.env.client.workflow.getHandle(workflowId);
      const failure = await failureOf(handle);
      assert.equal(failure.type, 'InvalidSpec');
      assert.match(failure.message, /only from Sterna's own continue-as-new/);
      assertWellFormed(workflowId, (await handle.describe()).runId);
      await nothingCreatedFor(workflowId);
    });

    it('a reset of that start is refused again: a reset keeps the started event, which no continue-as-new wrote', async () => {
      const workflowId = `${stack.taskQueue}-forged-reset`;
      await temporalCli('workflow', 'start', '--task-queue', stack.taskQueue, '--type', 'trainingRun', '--workflow-id', workflowId, '--input', JSON.stringify(forgedInput(workflowId)));
      const first = stack.env.client.workflow.getHandle(workflowId);
      await failureOf(first);
      const firstRunId = (await first.describe()).runId;
      await temporalCli('workflow', 'reset', '--workflow-id', workflowId, '--type', 'FirstWorkflowTask', '--reason', 'forged-messages test');
      const reset = await eventually('the reset run', async () => {
        const d = await first.describe();
        return d.runId !== firstRunId ? d : undefined;
      });
      const failure = await failureOf(stack.env.client.workflow.getHandle(workflowId, reset.runId));
      assert.equal(failure.type, 'InvalidSpec');
      assert.match(failure.message, /only from Sterna's own continue-as-new/);
      await nothingCreatedFor(workflowId);
    });

    it('a cron run is refused, though the server marks it continued: runs on a schedule are Temporal Schedules', async () => {
      const workflowId = `${stack.taskQueue}-forged-cron`;
      const handle = await stack.env.client.workflow.start('trainingRun', { taskQueue: stack.taskQueue, workflowId, cronSchedule: '@every 2s', args: [forgedInput(workflowId) as never] });
      try {
        // The cron run after the first carries the same input and `continuedFromExecutionRunId`.
        const cronRun = await eventually('a second cron run that has failed', async () => {
          const histories = await executionHistories(stack.env.client, workflowId);
          const second = histories.find((events) => events[0].workflowExecutionStartedEventAttributes?.continuedExecutionRunId);
          const ended = second?.find((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED);
          return second && ended ? { started: second[0].workflowExecutionStartedEventAttributes!, failed: ended.workflowExecutionFailedEventAttributes! } : undefined;
        }, 60_000, 500);
        assert.equal(cronRun.started.initiator, temporal.api.enums.v1.ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_CRON_SCHEDULE);
        assert.equal(cronRun.failed.failure?.applicationFailureInfo?.type, 'InvalidSpec');
        assert.match(cronRun.failed.failure?.message ?? '', /does not run on a cron schedule/);
        assertWellFormed(workflowId, handle.firstExecutionRunId);
        await nothingCreatedFor(workflowId);
      } finally {
        await handle.terminate('forged-messages test over').catch(() => undefined);
      }
    });

    it('a retry of a run that failed retryably is refused, though the server marks it continued', async () => {
      // The first run times out before any worker polls its queue (a retryable failure);
      // the retry then carries the same input, marked continued, to a worker.
      const taskQueue = `${stack.taskQueue}-retry`;
      const workflowId = `${taskQueue}-forged`;
      // Made before the first run times out, so the retry's run timeout is all the worker's
      // to take its first task in, not spent loading the bundle on a busy machine.
      const worker = await sternaTestWorker(taskQueue, { gce: stack.provider });
      const handle = await stack.env.client.workflow.start('trainingRun', {
        taskQueue,
        workflowId,
        workflowRunTimeout: '5 seconds',
        retry: { initialInterval: '1 second', maximumAttempts: 2 },
        args: [forgedInput(workflowId) as never],
      });
      await eventually('the first run timed out', async () => {
        const events = await allEvents(stack.env.client, workflowId).catch(() => []);
        return events.some((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT) ? true : undefined;
      }, 30_000, 250);
      const failure = await worker.runUntil(failureOf(handle));
      assert.equal(failure.type, 'InvalidSpec');
      assert.match(failure.message, /retry 2 of a failed one/);
      const retried = (await executionHistories(stack.env.client, workflowId)).at(-1)![0].workflowExecutionStartedEventAttributes!;
      assert.equal(retried.attempt, 2);
      assert.ok(retried.continuedExecutionRunId, 'the server marks the retry as continued');
      assertWellFormed(workflowId, handle.firstExecutionRunId);
      await nothingCreatedFor(workflowId);
    });
  });

  it('an admission signal not sent by the ledger admits nothing: the run stays queued and the ledger stays true', async () => {
    // The team is the stack's one namespace (its limit is lifted again at the end, for the tests after).
    const team = stack.env.namespace ?? 'default';
    await setTeamLimits(stack.env.client, team, { maxGpus: 1 }, { taskQueue: stack.taskQueue });
    const long = exampleSpec();
    long.command = ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', '100000', '--step-ms', '25'];
    const status = (run: Run) => run.query(statusQuery);
    // The second starts once the first trains: two asks in flight reach the ledger in either order.
    const first: Run = await stack.start(long);
    let second: Run | undefined;
    try {
      let last: unknown;
      await eventually('the first run trains', async () => {
        const s = await status(first);
        last = { phase: s.phase, admission: s.admission, timeline: s.timeline.slice(-4) };
        return s.phase === 'training' ? true : undefined;
      }, 180_000, 200).catch((err: Error) => assert.fail(`${err.message}; the run: ${JSON.stringify(last)}`));
      second = await stack.start(long);
      const queued = second;
      await eventually('the second run is queued', async () => ((await status(queued)).admission?.status === 'queued' ? true : undefined), 60_000, 200);

      const forged = { runId: queued.workflowId, outcome: 'admitted', team };
      await temporalCli('workflow', 'signal', '--workflow-id', queued.workflowId, '--name', 'admission', '--input', JSON.stringify(forged));
      // The run heard the signal and asked the ledger, which answered: still queued.
      await eventually('the run asked the ledger after the forged signal', async () => {
        const events = await allEvents(stack.env.client, queued.workflowId);
        const signals = events.map((e, i) => (e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED && e.workflowExecutionSignaledEventAttributes?.signalName === 'admission' ? i : -1));
        const forgedAt = Math.max(...signals);
        const asked = events.slice(forgedAt).some((e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED);
        return forgedAt >= 0 && asked ? true : undefined;
      }, 30_000, 250);
      const after = await status(queued);
      assert.equal(after.admission?.status, 'queued');
      assert.equal(after.attempt, undefined, 'no attempt for the queued run');
      await nothingCreatedFor(queued.workflowId);
      const ledger = await getTeam(stack.env.client, team, { taskQueue: stack.taskQueue });
      assert.deepEqual(
        { runningGpus: ledger.runningGpus, running: ledger.running.map((r) => r.runId), queue: ledger.queue.map((q) => q.runId) },
        { runningGpus: 1, running: [first.workflowId], queue: [queued.workflowId] },
      );
    } finally {
      if (second) await cancel(stack.env.client, second.workflowId).catch(() => undefined);
      await cancel(stack.env.client, first.workflowId).catch(() => undefined);
      await Promise.allSettled([first.result(), second?.result()]);
      await setTeamLimits(stack.env.client, team, { maxGpus: null }, { taskQueue: stack.taskQueue });
    }
  });

  it('observer settings signalled by anyone are held to the worker\'s: a 0.2 s interval and 100,000 reads a minute change nothing', async () => {
    const long = exampleSpec();
    long.command = ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', '100000', '--step-ms', '25'];
    const run: Run = await stack.start(long);
    try {
      await eventually('the run trains', async () => ((await run.query(statusQuery)).phase === 'training' ? true : undefined), 120_000, 200);
      const observerId = observerWorkflowId(stack.taskQueue, 'gce', PROJECT);
      const forged = {
        requester: 'someone',
        options: {
          settings: { intervalSeconds: 0.2, readsPerMinute: 100_000, progressReadSeconds: 0.2, busyReadSeconds: 0.2, progressSignalSeconds: 0.2, maxSilenceSeconds: 0.2, burstSeconds: 600 },
          watchSeconds: 1,
          idleExitSeconds: 1800,
        },
      };
      // A running observer takes new options at its next call; one started with them, at
      // once: so the forged options arrive the quicker way, in a signal-with-start.
      const observer = stack.env.client.workflow.getHandle(observerId);
      await observer.terminate('forged-messages test: the forged options start it again');
      await stack.env.client.workflow.signalWithStart('fleetObserver', {
        workflowId: observerId,
        taskQueue: stack.taskQueue,
        args: [{ backend: 'gce', ...forged.options }],
        signal: 'observerWanted',
        signalArgs: [forged],
      });
      // A malformed request must not stop the observer either.
      await temporalCli('workflow', 'signal', '--workflow-id', observerId, '--name', 'observerWanted', '--input', JSON.stringify({ requester: 'someone', options: { watchSeconds: 'soon' } }));
      await eventually('the observer calls watchFleet', async () => {
        const events = await allEvents(stack.env.client, observerId);
        return events.some((e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED) ? true : undefined;
      }, 30_000, 250);
      const before = await stack.emulator.admin.apiUsage(PROJECT);
      await new Promise((resolve) => setTimeout(resolve, 20_000));
      const after = await stack.emulator.admin.apiUsage(PROJECT);
      const calls = (view: typeof before, method: string) => view.projects.find((p) => p.project === PROJECT)?.methods[method]?.calls ?? 0;
      const listings = calls(after, 'compute.instances.aggregatedList') - calls(before, 'compute.instances.aggregatedList');
      const seconds = after.elapsedSeconds - before.elapsedSeconds;
      // The worker's interval is 5 s: about 4 listings in 20 s (its runs' own looks list
      // nothing); the forged 0.2 s would be about 100.
      assert.ok(listings <= Math.ceil(seconds / 5) + 2, `${listings} listings in ${seconds.toFixed(1)} s`);
      assert.equal((await stack.env.client.workflow.getHandle(observerId).describe()).status.name, 'RUNNING', 'the observer is still running');
    } finally {
      await cancel(stack.env.client, run.workflowId).catch(() => undefined);
      await run.result().catch(() => undefined);
    }
  });
});
