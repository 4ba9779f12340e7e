/**
 * The run-duration guard on the GCE emulator, in real time (time factor 1, so the run's
 * own clock and the emulator's cut agree): a flex-start VM whose run duration ends before
 * the run does is moved before its cut. The run asks the agent (instance attribute
 * sterna-move through setMetadata), the agent stops the trainer, which writes a final
 * checkpoint; the run releases the VM and resumes from that checkpoint in a second
 * flex-start attempt, counting no preemption, and the ledger bills both at flex prices.
 *
 * The first attempt's run duration comes from the run's deadline (80 s away at the
 * request); once it runs, the deadline moves an hour later, so the VM would be cut
 * before the run ends: the case of a run longer than GCE's 7-day cap, in seconds.
 */
import { strict as assert } from 'node:assert';
import { InstancesClient } from '@google-cloud/compute';
import type { ProvisionRequest } from '../../workflows/activity-contract';
import { ownerLabels, runKey, type Owner } from '../../workflows/naming';
import { setDeadlineUpdate, statusQuery } from '../../workflows/messages';
import { MOVE_MARGIN_SECONDS } from '../../workflows/run/flex-cut';
import { eventually } from '../helpers/processes';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';

const A100 = 'nvidia-tesla-a100';
const ZONE = 'us-central1-a';

describe('flex-start run-duration guard on the GCE emulator', function () {
  this.timeout(300_000);
  let stack: Stack;

  before(async () => {
    stack = await startStack({ timeFactor: 1 });
    await stack.emulator.admin.setFlexStart({ meanWaitSeconds: 2, distribution: 'fixed' });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  it('asks the agent through setMetadata under the current fingerprint: the agent stops the trainer and says it is moving', async () => {
    const [offer] = (await stack.provider.findOffers({ accelerators: [{ type: A100, count: 1 }], provisioningModels: ['FLEX_START'], zones: { allow: [ZONE] } }));
    const who: Owner = { run: 'flex-cut-ask', execution: 'e1', attempt: 1 };
    const request: ProvisionRequest = {
      name: 'flex-cut-ask-vm',
      offer,
      owner: who,
      labels: ownerLabels(who),
      diskSizeGb: 10,
      agent: { runId: who.run, attempt: 1, argv: ['sleep', '600'], env: {}, datasets: [], checkpointUri: 'gs://sterna-examples/checkpoints/ask', pollSeconds: 0.3 },
      flexStart: { maxWaitSeconds: 600, maxRunDurationSeconds: 3600 },
    };
    const { ref } = await stack.provider.provision(request, () => undefined);
    try {
      await eventually('the trainer running', async () => ((await stack.provider.observe(ref)).phase === 'training' ? true : undefined), 30_000, 200);
      // A writer holding a stale fingerprint is refused, as GCE refuses it, and changes nothing.
      const instances = new InstancesClient(stack.emulator.clientOptions);
      await assert.rejects(
        instances.setMetadata({ project: stack.gce.project, zone: ZONE, instance: ref.name, metadataResource: { fingerprint: 'stale', items: [{ key: 'sterna-move', value: 'TRUE' }] } }),
        (err: unknown) => {
          const e = err as { code?: number; message?: string };
          return e.code === 412 || e.code === 9 || /fingerprint/.test(e.message ?? '');
        },
      );
      assert.deepEqual(await stack.provider.askMove(ref), { delivered: true });
      assert.deepEqual(await stack.provider.askMove(ref), { delivered: true }, 'asking again changes nothing');
      const [vm] = await instances.get({ project: stack.gce.project, zone: ZONE, instance: ref.name });
      assert.ok(vm.metadata?.items?.some((i) => i.key === 'sterna-run-id'), 'the other items kept');
      const moved = await eventually('the agent moving off', async () => {
        const s = await stack.provider.observe(ref);
        return s.phase === 'exited' ? s : undefined;
      }, 30_000, 200);
      assert.equal(moved.moving, true);
      assert.equal(moved.exitCode, 143, 'the trainer stopped by SIGTERM');
      assert.equal(moved.lifecycle, 'running', 'the VM itself runs on until the run releases it');
    } finally {
      await stack.provider.release({ ref, owner: who, createMayBeInFlight: false });
    }
    assert.deepEqual(await stack.provider.askMove(ref), { delivered: false, detail: `${ref.name} is gone` });
  });

  it('moves a flex-start VM before its cut: the next attempt resumes from a checkpoint written after the ask, both billed at flex prices', async () => {
    const startedMs = Date.now();
    const firstDeadlineMs = startedMs + 80_000;
    const run = await stack.start(
      exampleSpec({
        command: ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', '1400', '--step-ms', '25'],
        resources: { accelerators: [{ type: A100, count: 1 }] },
        placement: { zones: { allow: [ZONE] } },
        pricing: { mode: 'flex-start', flexStart: { maxWait: '2m' }, budgetUsd: 50 },
        time: { deadline: new Date(firstDeadlineMs).toISOString() },
      }),
    );
    // Once the agent has measured a checkpoint, so the lead is the rule's (not the prior's).
    await eventually('the first attempt checkpointing', async () => ((await run.query(statusQuery)).lastCheckpoint ? true : undefined), 60_000, 200);
    await run.executeUpdate(setDeadlineUpdate, { args: [new Date(Date.now() + 3_600_000).toISOString()] });

    const result = await run.result();
    assert.deepEqual(result.attempts.map((a) => [a.provisioningModel, a.outcome]), [
      ['FLEX_START', 'run-duration-reached'],
      ['FLEX_START', 'completed'],
    ]);
    assert.equal(result.preemptions, 0);
    assert.equal(result.restarts, 0);
    assert.equal(result.finalStep, 1400);

    const { timeline, ledger } = await run.query(statusQuery);
    const asked = timeline.find((e) => e.kind === 'move-asked' && e.attempt === 1);
    assert.ok(asked, JSON.stringify(timeline.map((e) => e.kind)));
    const askedMs = Date.parse(asked.at);
    const moved = timeline.find((e) => e.kind === 'run-duration-reached')!;
    const resumedFrom = moved.step ?? 0;
    const beforeAsk = timeline.filter((e) => e.kind === 'checkpoint' && Date.parse(e.at) < askedMs).map((e) => e.step ?? 0);
    assert.ok(resumedFrom > Math.max(0, ...beforeAsk), `resumed from step ${resumedFrom}, past the last checkpoint before the ask (${Math.max(0, ...beforeAsk)})`);
    assert.ok(resumedFrom >= (asked.step ?? 0), `resumed from step ${resumedFrom}, not behind the step trained at the ask (${asked.step})`);
    const written = timeline.find((e) => e.kind === 'checkpoint' && e.step === resumedFrom)!;
    assert.ok(Date.parse(written.at) >= askedMs, 'the checkpoint resumed from was written after the ask');
    // The ask came one lead (a minute and twice a checkpoint's upload, a few seconds at
    // most here) before the cut, which is no earlier than the first deadline (less a second).
    assert.ok(askedMs >= firstDeadlineMs - 1000 - (MOVE_MARGIN_SECONDS + 2 * 5) * 1000, `asked at +${askedMs - startedMs} ms, the first deadline at +80000 ms`);

    const billed = (await stack.emulator.billing()).filter((b) => b.labels['sterna-run'] === runKey(run.workflowId));
    billed.sort((a, b) => Date.parse(a.startedAt!) - Date.parse(b.startedAt!));
    assert.deepEqual(billed.map((b) => b.provisioningModel), ['FLEX_START', 'FLEX_START']);
    assert.ok(Date.parse(billed[0].stoppedAt!) < firstDeadlineMs, 'the first VM was released before its cut (its run duration ends after the first deadline)');
    assert.deepEqual(ledger.map((l) => [l.provisioningModel, l.pricePerHour]), billed.map((b) => ['FLEX_START', b.pricePerHour]), 'the ledger charges the flex-start price the emulator bills');
    const billedUsd = billed.reduce((s, b) => s + b.costUsd, 0);
    assert.ok(Math.abs(result.totalCostUsd - billedUsd) <= 0.05 * billedUsd, `ledger $${result.totalCostUsd} vs billing $${billedUsd}`);
  });
});
