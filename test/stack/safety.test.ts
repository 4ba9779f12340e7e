/**
 * Safety defects found by probing the stack, each reproduced through the real path: the
 * Temporal CLI or client as a user would start runs, the emulator's fault injection, the
 * real compute client for resources that are not Sterna's.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { InstancesClient } from '@google-cloud/compute';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import { findTemporalCli } from '../../processes/temporal-cli';
import { acceptContinuation } from '../../workflows/run/continuation';
import { statusQuery } from '../../workflows/messages';
import { executionToken, resourceName, runKey } from '../../workflows/naming';
import type { RunStatus } from '../../workflows/run/views';
import { parseSpec } from '../../workflows/spec';
import type { trainingRun } from '../../workflows/run/training-run';
import { eventually } from '../helpers/processes';
import { failureOf } from '../helpers/runs';
import { executionHistories } from '../helpers/histories';
import { exampleSpec, PROJECT, startStack, type Stack } from '../helpers/stack';
import { testServerAddress } from '../helpers/temporal';

const run = promisify(execFile);
type Run = WorkflowHandle<typeof trainingRun>;


async function phase(handle: Run, wanted: string): Promise<RunStatus> {
  return eventually(wanted, async () => {
    const s = await handle.query(statusQuery);
    return s.phase === wanted ? s : undefined;
  }, 90_000, 50);
}

describe('safety: no run touches what is not its own', function () {
  this.timeout(240_000);
  let stack: Stack;
  let instances: InstancesClient;

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
    instances = new InstancesClient(stack.emulator.clientOptions);
  });
  after(async () => {
    await instances?.close();
    await stack?.stop();
  });

  async function insertForeignVm(zone: string, name: string, labels: Record<string, string> = { owner: 'dba' }): Promise<void> {
    const [op] = await instances.insert({
      project: PROJECT,
      zone,
      instanceResource: {
        name,
        labels,
        machineType: `zones/${zone}/machineTypes/e2-standard-2`,
        metadata: { items: [{ key: 'startup-script', value: 'sleep 600' }] },
        disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: 'debian-12' } }],
        networkInterfaces: [{ network: 'global/networks/default' }],
      },
    });
    assert.ok(op);
    await eventually(`${name} running`, async () => ((await getVm(zone, name))?.status === 'RUNNING' ? true : undefined));
  }

  async function getVm(zone: string, name: string) {
    const [vm] = await instances.get({ project: PROJECT, zone, instance: name }).catch(() => [undefined]);
    return vm ?? undefined;
  }

  async function deleteVm(zone: string, name: string): Promise<void> {
    await instances.delete({ project: PROJECT, zone, instance: name }).catch(() => undefined);
  }

  it('refuses a continued state sent with `temporal workflow start`, and the VM it names survives', async () => {
    const zone = 'us-central1-a';
    await insertForeignVm(zone, 'victim-db');
    try {
      const spec = parseSpec(exampleSpec());
      const workflowId = `${stack.taskQueue}-forged`;
      const forged = {
        continued: true,
        spec,
        state: {
          runId: workflowId,
          phase: 'training',
          startedAt: new Date().toISOString(),
          attempts: [
            {
              attempt: 1,
              ref: { backend: 'gce', name: 'victim-db', zone },
              offer: { backend: 'gce', zone, region: 'us-central1', accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: 'SPOT', pricePerHour: 0.2, onDemandPricePerHour: 0.7, quotaAvailable: true },
              outcome: 'running',
              released: false,
            },
          ],
          zoneEvents: [],
          preemptions: 0,
          restarts: 0,
          timeline: [],
        },
      };
      const cli = await findTemporalCli();
      if (!cli) assert.fail('the Temporal CLI is installed by npm test');
      const address = await testServerAddress();
      await run(cli, ['workflow', 'start', '--address', address, '--namespace', stack.env.namespace ?? 'default', '--task-queue', stack.taskQueue, '--type', 'trainingRun', '--workflow-id', workflowId, '--input', JSON.stringify(forged)]);
      const failure = await failureOf(stack.env.client.workflow.getHandle(workflowId));
      assert.equal(failure.type, 'InvalidSpec');
      assert.match(failure.message, /continue-as-new/);
      assert.equal((await getVm(zone, 'victim-db'))?.status, 'RUNNING', 'the VM named in the forged state is untouched');
      assert.deepEqual(await stack.provider.listRunResources(runKey(workflowId)), []);
    } finally {
      await deleteVm(zone, 'victim-db');
    }
  });

  it('fails a malformed continued input with InvalidSpec instead of getting stuck', async () => {
    const handle = await stack.env.client.workflow.start('trainingRun', { taskQueue: stack.taskQueue, workflowId: `${stack.taskQueue}-malformed`, args: [{ continued: true } as never] });
    const failure = await failureOf(handle);
    assert.equal(failure.type, 'InvalidSpec');
  });

  it('validates a real continuation as strictly as fresh input: a state naming another resource is refused', () => {
    const spec = parseSpec(exampleSpec());
    const execution = { workflowId: 'run-7', execution: executionToken('first-run-id'), continuedFromExecutionRunId: 'previous-run-id', attempt: 1 };
    const attempt = (name: string) => ({
      attempt: 1,
      ref: { backend: 'gce' as const, name, zone: 'us-central1-a' },
      offer: { backend: 'gce' as const, zone: 'us-central1-a', region: 'us-central1', accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: 'SPOT' as const, pricePerHour: 0.2, onDemandPricePerHour: 0.7, quotaAvailable: true },
      outcome: 'running' as const,
      released: false,
    });
    const state = (name: string) => ({ runId: 'run-7', phase: 'training' as const, startedAt: new Date(0).toISOString(), attempts: [attempt(name)], zoneEvents: [], preemptions: 0, restarts: 0, timeline: [] });
    const own = resourceName('run-7', execution.execution, 1);
    assert.equal(acceptContinuation({ continued: true, spec, state: state(own) }, execution).state.attempts[0].ref.name, own);
    assert.throws(() => acceptContinuation({ continued: true, spec, state: state('victim-db') }, execution), /not this run's resource/);
    const otherExecution = resourceName('run-7', executionToken('another-first-run-id'), 1);
    assert.throws(() => acceptContinuation({ continued: true, spec, state: state(otherExecution) }, execution), /not this run's resource/);
    assert.throws(() => acceptContinuation({ continued: true, spec, state: { ...state(own), runId: 'run-8' } }, execution), /state\.runId/);
    assert.throws(() => acceptContinuation({ continued: true, spec, state: state(own) }, { ...execution, continuedFromExecutionRunId: undefined }), /continue-as-new/);
    // The server marks cron runs and retries as continued too; they carry their caller's input.
    assert.throws(() => acceptContinuation({ continued: true, spec, state: state(own) }, { ...execution, cronSchedule: '@every 1m' }), /cron run/);
    assert.throws(() => acceptContinuation({ continued: true, spec, state: state(own) }, { ...execution, attempt: 2 }), /retry 2/);
  });

  it('leaves a VM that already holds its name alone, bills nothing for it, and moves to a new name', async () => {
    // One zone, so the name the run's first attempt will take there is known from its
    // start; someone else's VM takes it before the run can (it must first be admitted,
    // list capacity and provision).
    const zone = 'us-central1-a';
    const handle = await stack.start(exampleSpec({ placement: { zones: { allow: [zone] } } }));
    const name = resourceName(handle.workflowId, executionToken(handle.firstExecutionRunId), 1);
    await insertForeignVm(zone, name, { owner: 'someone-else', 'sterna-run': runKey(handle.workflowId), 'sterna-attempt': '1' });
    try {
      const result = await handle.result();
      assert.equal(result.attempts[0].outcome, 'conflict');
      assert.equal(result.attempts[0].costUsd, 0, 'the foreign VM is not billed to the run');
      assert.equal(result.attempts[result.attempts.length - 1].outcome, 'completed');
      assert.equal((await getVm(zone, name))?.status, 'RUNNING', 'the foreign VM was not deleted');
      const billed = (await stack.emulator.billing()).filter((b) => b.labels['sterna-exec'] === executionToken(handle.firstExecutionRunId));
      assert.equal(billed.length, 1, 'one VM of its own');
    } finally {
      await deleteVm(zone, name);
    }
  });

  it('a reused workflow id neither adopts nor deletes the earlier execution\'s leaked VM', async () => {
    const workflowId = `${stack.taskQueue}-reused`;
    const first = await stack.start(exampleSpec(), workflowId);
    const s = await phase(first, 'training');
    const [leaked] = await stack.provider.listRunResources(runKey(workflowId));
    await first.terminate('leave the VM behind, as `temporal workflow terminate` does');
    try {
      const second = await stack.start(exampleSpec(), workflowId);
      const result = await second.result();
      assert.equal(result.status, 'completed');
      assert.equal(result.attempts.length, 1);
      const vm = await getVm(s.zone!, leaked.name);
      assert.ok(vm, 'the earlier execution\'s VM is still there (the reaper\'s to delete)');
      assert.equal(vm.labels?.['sterna-exec'], executionToken(first.firstExecutionRunId));
      const billedToSecond = (await stack.emulator.billing()).filter((b) => b.labels['sterna-exec'] === executionToken(second.firstExecutionRunId));
      assert.equal(billedToSecond.length, 1);
      assert.notEqual(billedToSecond[0].name, leaked.name, 'the second execution made its own VM');
    } finally {
      await deleteVm(s.zone!, leaked.name);
    }
  });

  it('cancelled while its insert is in flight, deletes the VM that lands late and says so', async () => {
    await stack.emulator.admin.injectFault({ fraction: 1, hangMs: 8000, path: '/instances$', method: 'POST', count: 1 });
    const handle = await stack.start(exampleSpec());
    await phase(handle, 'provisioning');
    await new Promise((r) => setTimeout(r, 500));
    await handle.cancel();
    const err = await handle.result().catch((e: unknown) => e);
    assert.ok(err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure, String(err));
    const { timeline } = await handle.query(statusQuery);
    assert.deepEqual(timeline.filter((e) => e.kind === 'released').map((e) => [e.attempt, e.released]), [[1, 'deleted']], 'the VM that landed late was deleted');
    assert.deepEqual(await stack.provider.listRunResources(runKey(handle.workflowId)), []);
    // Nothing of the cancelled create can still land.
    await new Promise((r) => setTimeout(r, 10_000));
    assert.deepEqual(await stack.provider.listRunResources(runKey(handle.workflowId)), []);
    const billed = (await stack.emulator.billing()).filter((b) => b.labels['sterna-run'] === runKey(handle.workflowId));
    assert.ok(billed.every((b) => b.stoppedAt), 'nothing of the run is still billing');
  });

  it('names the field when no offer can ever match: accelerator count, maximum price', async () => {
    const count = await failureOf(await stack.start(exampleSpec({ resources: { accelerators: [{ type: 'nvidia-l4', count: 16 }] } })));
    assert.equal(count.type, 'NoCapacity');
    assert.match(count.message, /^resources\.accelerators: /);
    const price = await failureOf(await stack.start(exampleSpec({ pricing: { mode: 'spot', maxPricePerHour: 0.0001 } })));
    assert.equal(price.type, 'NoCapacity');
    assert.match(price.message, /^pricing\.maxPricePerHour /);
  });
});

describe('safety: API outages delay runs, never fail them', function () {
  this.timeout(420_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
  });
  afterEach(async () => stack?.emulator.admin.clearFaults());
  after(async () => stack?.stop());

  it('keeps heartbeating while a GCE operation wait outlasts the heartbeat timeout: no spurious retry', async () => {
    await stack.emulator.admin.injectFault({ fraction: 1, hangMs: 15_000, path: '/operations/[^/]+/wait$', count: 1 });
    const handle = await stack.start(exampleSpec());
    const result = await handle.result();
    assert.equal(result.status, 'completed');
    // Event ids restart in each execution, so each is matched within its own.
    const attempts = (await executionHistories(stack.env.client, handle.workflowId)).flatMap((events) => {
      const provisions = new Set(events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'provision').map((e) => String(e.eventId)));
      return events
        .filter((e) => e.activityTaskStartedEventAttributes && provisions.has(String(e.activityTaskStartedEventAttributes.scheduledEventId)))
        .map((e) => e.activityTaskStartedEventAttributes!.attempt);
    });
    assert.deepEqual(attempts, [1], 'provision ran once');
  });

  it('survives 160 s in which every GET answers 503 (longer than the old ten-attempt limit)', async () => {
    const handle = await stack.start(exampleSpec());
    await phase(handle, 'training');
    await stack.emulator.admin.injectFault({ fraction: 1, status: 503, method: 'GET' });
    await new Promise((r) => setTimeout(r, 160_000));
    await stack.emulator.admin.clearFaults();
    const result = await handle.result();
    assert.equal(result.status, 'completed');
    assert.deepEqual(await stack.provider.listRunResources(runKey(handle.workflowId)), []);
  });

  it('completes every run under 15% 503, 10% 429 and 5% hung calls', async () => {
    await stack.emulator.admin.injectFault({ fraction: 0.15, status: 503 });
    await stack.emulator.admin.injectFault({ fraction: 0.1, status: 429 });
    await stack.emulator.admin.injectFault({ fraction: 0.05, hangMs: 12_000 });
    const handles = await Promise.all([1, 2, 3].map(() => stack.start(exampleSpec())));
    const results = await Promise.all(handles.map((h) => h.result()));
    assert.deepEqual(results.map((r) => r.status), ['completed', 'completed', 'completed']);
    await stack.emulator.admin.clearFaults();
    for (const h of handles) assert.deepEqual(await stack.provider.listRunResources(runKey(h.workflowId)), []);
  });
});
