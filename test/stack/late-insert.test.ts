/**
 * Issue 36, item 4: a run cancelled while its insert is in flight, the insert landing
 * 75 s later (the emulator's fault injection holds it; GCE may carry an insert out until
 * its server deadline, 90 s by default). The run must not call the VM "never created":
 * its release watches for it under its name until no insert can land, deletes it when it
 * appears, and its timeline says so. Through the real path: the SDK as an outside caller
 * cancels the run, the emulator serves the held insert late.
 */
import { strict as assert } from 'node:assert';
import { InstancesClient } from '@google-cloud/compute';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunStatus } from '../../workflows/run/views';
import type { trainingRun } from '../../workflows/run/training-run';
import { eventually } from '../helpers/processes';
import { exampleSpec, PROJECT, startStack, type Stack } from '../helpers/stack';

type Run = WorkflowHandle<typeof trainingRun>;

/** How long the emulator holds the run's insert before it carries it out (real time: the fault's hang is not scaled). */
const LATE_MS = 75_000;

describe('late insert: a run cancelled mid-insert deletes the VM that lands 75 s later', function () {
  this.timeout(300_000);
  let stack: Stack;

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  async function phase(handle: Run, wanted: string): Promise<RunStatus> {
    return eventually(wanted, async () => {
      const s = await handle.query(statusQuery);
      return s.phase === wanted ? s : undefined;
    }, 90_000, 50);
  }

  it('watches for the create under its name, deletes the VM when it lands, and says so', async () => {
    await stack.emulator.admin.injectFault({ fraction: 1, hangMs: LATE_MS, path: '/instances$', method: 'POST', count: 1 });
    const handle = await stack.start(exampleSpec());
    await phase(handle, 'provisioning');
    // The insert is on its way to the emulator, which holds it.
    await new Promise((r) => setTimeout(r, 1000));
    const cancelledAt = Date.now();
    await handle.cancel();
    const err = await handle.result().catch((e: unknown) => e);
    assert.ok(err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure, String(err));
    assert.ok(Date.now() - cancelledAt >= LATE_MS - 5_000, 'the run ended only after the held insert was carried out');

    const { timeline, attempt } = await handle.query(statusQuery);
    const released = timeline.filter((e) => e.kind === 'released').map((e) => ({ attempt: e.attempt, released: e.released, createWatch: e.createWatch }));
    assert.deepEqual(released, [{ attempt: 1, released: 'deleted', createWatch: 'landed-late' }], 'the VM that landed late was deleted, and the timeline says it landed late');
    assert.equal(attempt, 1, 'one attempt, one VM');

    // The one insert (held, then carried out) created the VM and the release deleted it:
    // nothing of the run is still billing or listed.
    const { methods } = (await stack.emulator.admin.apiUsage(PROJECT)).projects[0];
    assert.equal(methods['compute.instances.insert']?.calls, 1, 'one insert, carried out late; none sent again');
    assert.equal(methods['compute.instances.delete']?.calls, 1, 'the VM it created was deleted');
    const billed = (await stack.emulator.billing()).filter((b) => b.labels['sterna-run'] === runKey(handle.workflowId));
    assert.ok(billed.every((b) => b.stoppedAt), 'nothing of the run is still billing');
    assert.deepEqual(await stack.provider.listRunResources(runKey(handle.workflowId)), []);
  });

  it('bounds when an insert can land: one held past its X-Server-Timeout fails 504 and is never carried out', async () => {
    const instances = new InstancesClient(stack.emulator.clientOptions);
    try {
      const zone = 'us-central1-a';
      const name = 'held-past-deadline';
      await stack.emulator.admin.injectFault({ fraction: 1, hangMs: 4000, path: '/instances$', method: 'POST', count: 1 });
      const instanceResource = {
        name,
        machineType: `zones/${zone}/machineTypes/e2-standard-2`,
        disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: 'debian-12' } }],
        networkInterfaces: [{ network: 'global/networks/default' }],
      };
      const err = await instances.insert({ project: PROJECT, zone, instanceResource }, { otherArgs: { headers: { 'X-Server-Timeout': '1' } } }).then(
        () => assert.fail('the insert should have failed at its deadline'),
        (e: unknown) => e as { httpStatusCode?: number },
      );
      // google-gax 6: the HTTP status GCE answered (its gRPC mapping, DEADLINE_EXCEEDED, is in code).
      assert.equal(err.httpStatusCode, 504);
      // Past the hang too: the held request was dropped, not served late.
      await new Promise((r) => setTimeout(r, 4000));
      const found = await instances.get({ project: PROJECT, zone, instance: name }).then(
        () => true,
        () => false,
      );
      assert.equal(found, false);
    } finally {
      await instances.close();
    }
  });
});
