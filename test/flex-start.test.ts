/**
 * Flex-start (Dynamic Workload Scheduler) on GCE: the spec and prices (pure), the
 * emulator's flex-start lifecycle through the real provider, and whole runs on the
 * emulator: spot out everywhere -> a flex-start VM after a wait -> completed, billed at
 * flex-start prices; a wait window that ends -> the next choice, the failure named; a
 * flex-start VM cut at its run duration -> a resumed attempt from the last checkpoint.
 */
import { strict as assert } from 'node:assert';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { bookFromCatalog, bookPriceBook } from '../activities/pricing/book-data';
import { defaultCatalog, pricePerHour } from '../config/catalog';
import type { ProvisionRequest } from '../workflows/activity-contract';
import { FailureType } from '../workflows/failures';
import { statusQuery } from '../workflows/messages';
import { ownerLabels, runKey, type Owner } from '../workflows/naming';
import { modelsOf } from '../workflows/pricing';
import { flexRunDurationSeconds, FLEX_START_MAX_RUN_SECONDS, FLEX_START_MIN_RUN_SECONDS } from '../workflows/run/flex-start';
import type { RunStatus } from '../workflows/run/views';
import { checkSpec, parseSpec, type RunSpecInput } from '../workflows/spec';
import type { trainingRun } from '../workflows/training-run';
import type { Offer } from '../workflows/types';
import { eventually } from './helpers/processes';
import { exampleSpec, startStack, type Stack } from './helpers/stack';

type Run = WorkflowHandle<typeof trainingRun>;

const A100 = 'nvidia-tesla-a100';
const BASE = { command: ['python', 'train.py'], resources: { accelerators: [{ type: A100, count: 1 }] }, checkpoint: { uri: 'gs://bucket/ckpt' } } as RunSpecInput;

describe('flex-start: spec and prices (pure)', () => {
  it('takes flex-start alone or as a tier of auto, with a wait within GCE\'s bounds', () => {
    const alone = parseSpec({ ...BASE, pricing: { mode: 'flex-start' } });
    assert.deepEqual(modelsOf(alone), ['FLEX_START']);
    const tier = parseSpec({ ...BASE, pricing: { mode: 'auto', flexStart: { maxWait: '30m' } } });
    assert.deepEqual(modelsOf(tier), ['SPOT', 'FLEX_START', 'STANDARD']);
    assert.equal(tier.pricing.flexStart?.maxWait, 1800);
    assert.deepEqual(modelsOf(parseSpec({ ...BASE, pricing: { mode: 'auto' } })), ['SPOT', 'STANDARD'], 'auto without flexStart is as before');

    const tooLong = checkSpec({ ...BASE, pricing: { mode: 'flex-start', flexStart: { maxWait: '3h' } } });
    assert.ok(!tooLong.ok && tooLong.problems.some((p) => p.path === 'pricing.flexStart.maxWait' && /at most 2h/.test(p.message)), JSON.stringify(tooLong));
    const wrongMode = checkSpec({ ...BASE, pricing: { mode: 'spot', flexStart: {} } });
    assert.ok(!wrongMode.ok && wrongMode.problems.some((p) => p.path === 'pricing.flexStart'), JSON.stringify(wrongMode));
  });

  it('prices flex-start A2 at about half the on-demand price, G2 at on-demand, and N1 not at all', () => {
    const q = { region: 'us-central1', machineType: 'a2-highgpu-1g', accelerator: A100, count: 1, spot: false };
    const onDemand = pricePerHour(q)!;
    const flex = pricePerHour({ ...q, flexStart: true })!;
    assert.ok(Math.abs(flex - onDemand / 2) < 0.001, `flex $${flex}/h vs on-demand $${onDemand}/h`);
    const g2 = { region: 'us-central1', machineType: 'g2-standard-4', accelerator: 'nvidia-l4', count: 1, spot: false };
    assert.equal(pricePerHour({ ...g2, flexStart: true }), pricePerHour(g2));
    assert.equal(pricePerHour({ region: 'us-central1', machineType: 'n1-standard-4', accelerator: 'nvidia-tesla-t4', count: 1, spot: false, flexStart: true }), undefined);
    // The bundled book (the workers' fallback) prices flex-start as the catalog does.
    const book = bookPriceBook(bookFromCatalog(), { asOf: defaultCatalog.pricesAsOf, source: 'catalog' });
    assert.equal(book.pricePerHour({ ...q, flexStart: true }), flex);
    assert.equal(book.pricePerHour({ ...q, region: 'europe-west4', flexStart: true }), pricePerHour({ ...q, region: 'europe-west4', flexStart: true }));
  });

  it('runs each flex-start attempt until the run\'s own limit, never beyond 7 days', () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    assert.equal(flexRunDurationSeconds(now + 3_600_000, now), 3600);
    assert.equal(flexRunDurationSeconds(now + 30 * 86_400_000, now), FLEX_START_MAX_RUN_SECONDS);
    assert.equal(flexRunDurationSeconds(now - 5000, now), FLEX_START_MIN_RUN_SECONDS, 'a late attempt still gets a valid duration');
  });
});

describe('flex-start on the GCE emulator', function () {
  this.timeout(300_000);
  let stack: Stack;
  let n = 0;
  const owner = (): Owner => ({ run: `flex-${++n}`, execution: 'e1', attempt: 1 });

  before(async () => {
    // Emulated time runs 50x: a 2-hour wait window lasts 2.4 minutes, a 960 s run duration 19 s.
    stack = await startStack({ timeFactor: 50 });
  });
  after(async () => stack?.stop());

  async function flexOffer(zone: string): Promise<Offer> {
    const offers = await stack.provider.findOffers({ accelerators: [{ type: A100, count: 1 }], provisioningModels: ['FLEX_START', 'STANDARD'], zones: { allow: [zone] } });
    const flex = offers.find((o) => o.provisioningModel === 'FLEX_START');
    assert.ok(flex, JSON.stringify(offers));
    return flex;
  }

  function request(o: Offer, who: Owner, terms: ProvisionRequest['flexStart']): ProvisionRequest {
    const name = `${who.run}-vm`;
    return {
      name,
      offer: o,
      owner: who,
      labels: ownerLabels(who),
      diskSizeGb: 10,
      agent: { runId: who.run, attempt: 1, argv: ['sleep', '600'], env: {}, datasets: [], checkpointUri: 'gs://sterna-examples/checkpoints/x', pollSeconds: 1 },
      flexStart: terms,
    };
  }

  it('offers flex-start at flex prices with an expected wait; the VM waits PENDING, then runs, billed at the flex price', async () => {
    const zone = 'us-central1-b';
    await stack.emulator.admin.setFlexStart({ meanWaitSeconds: 200, distribution: 'fixed' });
    const o = await flexOffer(zone);
    assert.ok(Math.abs(o.pricePerHour - o.onDemandPricePerHour / 2) < 0.001);
    assert.ok((o.expectedWaitSeconds ?? 0) > 0);
    const who = owner();
    const provisioning = stack.provider.provision(request(o, who, { maxWaitSeconds: 7200, maxRunDurationSeconds: 3600 }), () => undefined);
    const pending = await eventually('the VM waiting for capacity', async () => (await stack.emulator.instances()).find((i) => i.name === `${who.run}-vm` && i.status === 'PENDING'));
    assert.equal(pending.provisioningModel, 'FLEX_START');
    const result = await provisioning;
    const [view] = (await stack.emulator.instances()).filter((i) => i.name === result.ref.name);
    assert.equal(view.status, 'RUNNING');
    const billed = (await stack.emulator.billing()).find((b) => b.labels['sterna-run'] === who.run)!;
    assert.equal(billed.pricePerHour, o.pricePerHour, 'billed at the flex-start price the offer carried');
    await stack.provider.release({ ref: result.ref, owner: who, createMayBeInFlight: false });
  });

  it('fails the create with FlexStartWaitExpired (not a stockout) when the wait window ends without capacity', async () => {
    const zone = 'us-central1-c';
    await stack.emulator.admin.setCapacity(zone, { accelerator: A100, flexStart: 0 });
    try {
      const o = await flexOffer(zone);
      const who = owner();
      const err = await stack.provider.provision(request(o, who, { maxWaitSeconds: 90, maxRunDurationSeconds: 3600 }), () => undefined).then(
        () => assert.fail('the create should have failed'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof ApplicationFailure, String(err));
      assert.equal(err.type, FailureType.FlexStartWaitExpired, err.message);
      assert.deepEqual((await stack.emulator.instances()).filter((i) => i.name === `${who.run}-vm`), [], 'the waiting VM is gone');
    } finally {
      await stack.emulator.admin.setCapacity(zone, { accelerator: A100, flexStart: null });
    }
  });

  describe('runs', () => {
    const zones = ['us-central1-a', 'us-central1-b'];
    before(async () => {
      await stack.startWorker();
      for (const zone of zones) await stack.emulator.setSpotCapacity(zone, A100, 0);
    });
    after(async () => {
      for (const zone of zones) await stack.emulator.setSpotCapacity(zone, A100, undefined);
    });

    function spec(overrides: Partial<RunSpecInput> = {}): RunSpecInput {
      return exampleSpec({
        resources: { accelerators: [{ type: A100, count: 1 }] },
        placement: { zones: { allow: zones } },
        pricing: { mode: 'auto', flexStart: { maxWait: '2h' }, budgetUsd: 50 },
        ...overrides,
      });
    }

    const status = (run: Run): Promise<RunStatus> => run.query(statusQuery);

    it('with spot out in every zone, waits for DWS capacity, runs flex-start and completes; the ledger matches the billing', async () => {
      await stack.emulator.admin.setFlexStart({ meanWaitSeconds: 300, distribution: 'fixed' });
      const run = await stack.start(spec());
      const waiting = await eventually('the run waiting for DWS capacity', async () => (await status(run)).waiting, 60_000);
      assert.match(waiting, /^waiting for DWS capacity since \d{4}-\d\d-\d\dT/);
      const result = await run.result();
      assert.deepEqual(result.attempts.map((a) => [a.provisioningModel, a.outcome]), [
        ['SPOT', 'stockout'],
        ['SPOT', 'stockout'],
        ['FLEX_START', 'completed'],
      ]);
      assert.equal(result.preemptions, 0);
      const billed = (await stack.emulator.billing()).filter((b) => b.labels['sterna-run'] === runKey(run.workflowId));
      assert.equal(billed.length, 1);
      assert.equal(billed[0].provisioningModel, 'FLEX_START');
      const flexLine = (await status(run)).ledger.find((l) => l.provisioningModel === 'FLEX_START')!;
      assert.equal(billed[0].pricePerHour, flexLine.pricePerHour, 'the emulator bills the flex-start price the ledger charges');
      assert.ok(Math.abs(result.totalCostUsd - billed[0].costUsd) <= 0.02 * billed[0].costUsd, `ledger $${result.totalCostUsd} vs billing $${billed[0].costUsd}`);
      assert.ok(result.totalCostUsd < result.onDemandCostUsd * 0.6, 'flex-start costs about half of on-demand');
    });

    it('when the wait window ends without capacity, names the failure and moves to the next choice', async () => {
      await stack.emulator.admin.setFlexStart({ meanWaitSeconds: 60, distribution: 'fixed' });
      for (const zone of zones) await stack.emulator.admin.setCapacity(zone, { accelerator: A100, flexStart: 0 });
      try {
        const run = await stack.start(spec({ pricing: { mode: 'auto', flexStart: { maxWait: '90s' }, budgetUsd: 50 } }));
        const result = await run.result();
        const models = result.attempts.map((a) => [a.provisioningModel, a.outcome]);
        assert.deepEqual(models, [
          ['SPOT', 'stockout'],
          ['SPOT', 'stockout'],
          ['FLEX_START', 'wait-expired'],
          ['FLEX_START', 'wait-expired'],
          ['STANDARD', 'completed'],
        ]);
        const { timeline } = await status(run);
        const expired = timeline.filter((e) => e.kind === 'attempt-failed' && e.outcome === 'wait-expired');
        assert.equal(expired.length, 2);
        assert.ok(expired.every((e) => /flex-start \(DWS\) capacity/.test(e.event)), expired.map((e) => e.event).join('; '));
      } finally {
        for (const zone of zones) await stack.emulator.admin.setCapacity(zone, { accelerator: A100, flexStart: null });
      }
    });

    it('resumes from the last checkpoint in a new attempt when a flex-start VM reaches its run duration mid-run', async () => {
      await stack.emulator.admin.setFlexStart({ meanWaitSeconds: 30, distribution: 'fixed' });
      // time.maxRunDuration 20 min bounds each VM's run duration at 1200 emulated seconds, 24 s
      // here; the trainer needs about 30 s. (The run's own clock is real time: its move
      // before the cut, 20 minutes away for it, never comes; flex-cut-gce.test.ts tests that.)
      const steps = ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', '1200', '--step-ms', '25'];
      const run = await stack.start(spec({ command: steps, pricing: { mode: 'flex-start', budgetUsd: 50 }, time: { maxRunDuration: '20m' } }));
      const result = await run.result();
      const outcomes = result.attempts.map((a) => a.outcome);
      assert.equal(outcomes[0], 'run-duration-reached', outcomes.join(', '));
      assert.equal(outcomes[outcomes.length - 1], 'completed');
      assert.equal(result.preemptions, 0, 'a run-duration cut is not a preemption');
      assert.equal(result.finalStep, 1200);
      const { timeline } = await status(run);
      const cut = timeline.find((e) => e.kind === 'run-duration-reached')!;
      assert.ok((cut.step ?? 0) > 0, `resumed from step ${cut.step}, not from 0`);
    });
  });
});
