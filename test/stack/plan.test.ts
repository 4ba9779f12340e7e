/**
 * `sterna plan`: predicted cost, finish time and deadline risk of every placement before
 * anything is created, and the choice the run itself would make. The prediction is pure
 * (tested without a server); the command lists capacity through a real worker and the
 * emulator, and creates nothing.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { planLines } from '../../cli/plan';
import { missRisk, predictPlan, PRIOR_PREEMPTIONS_PER_HOUR, RESTART_SECONDS } from '../../workflows/plan/predict';
import type { PlanResult } from '../../workflows/plan/contract';
import { parseSpec, type RunSpecInput } from '../../workflows/spec';
import type { Offer } from '../../workflows/types';
import { emptyMemory, OutcomeKind, record } from '../../workflows/zones/memory';
import { planTrainingRun } from '../../client/plan';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';
import { testEnv, testServerAddress } from '../helpers/temporal';

const NOW = Date.parse('2030-01-01T00:00:00Z');
const offer = (zone: string, model: Offer['provisioningModel'], price: number, accelerator = 'nvidia-l4'): Offer => ({
  backend: 'gce',
  zone,
  region: zone.replace(/-[a-z]$/, ''),
  accelerator,
  acceleratorCount: 1,
  machineType: 'g2-standard-4',
  provisioningModel: model,
  pricePerHour: price,
  onDemandPricePerHour: 1,
  quotaAvailable: true,
});
/** A zone memory that saw one L4 spot VM preempted after 1/rate hours in each zone, just now. */
const seen = (rates: Record<string, number>) =>
  Object.entries(rates).reduce((memory, [zone, rate]) => record(memory, { kind: OutcomeKind.Preempted, zone, accelerator: 'nvidia-l4', model: 'SPOT', at: NOW, lifetimeHours: 1 / rate, resource: `vm-${zone}` }, NOW), emptyMemory());
const spec = (time: RunSpecInput['time'], mode: 'spot' | 'on-demand' | 'auto' = 'spot', accelerators = [{ type: 'nvidia-l4', count: 1 }]) =>
  parseSpec({ command: ['train'], checkpoint: { uri: 'gs://bucket/ckpt', interval: 600 }, resources: { accelerators }, pricing: { mode }, time }, { nowMs: NOW });

describe('the plan (pure)', () => {
  it('prices each offer by its expected hours, with the work lost to preemptions and restarts added to spot', () => {
    const plan = predictPlan({ spec: spec({ expectedDuration: 36_000 }), offers: [offer('us-central1-a', 'SPOT', 0.2), offer('us-central1-a', 'STANDARD', 0.6)], nowMs: NOW, memory: seen({ 'us-central1-a': 0.5 }) });
    const spot = plan.rows.find((r) => r.provisioningModel === 'SPOT')!;
    const standard = plan.rows.find((r) => r.provisioningModel === 'STANDARD')!;
    const loss = (300 + RESTART_SECONDS) / 3600;
    assert.equal(spot.expectedHours, 10 / (1 - 0.5 * loss));
    assert.equal(spot.expectedCostUsd, 0.2 * spot.expectedHours);
    assert.equal(spot.preemptionSource, 'observed');
    assert.deepEqual([standard.expectedHours, standard.expectedCostUsd, standard.expectedPreemptions, standard.preemptionSource], [10, 6, 0, 'none']);
    assert.equal(standard.finishAt, new Date(NOW + 10 * 3_600_000).toISOString());
    assert.deepEqual(plan.rows.map((r) => r.provisioningModel), ['SPOT', 'STANDARD'], 'cheapest first');
  });

  it('costs a preemption what earlier runs of the spec measured it to cost, when they did, instead of the prior', () => {
    const offers = [offer('us-central1-a', 'SPOT', 0.2)];
    const [prior] = predictPlan({ spec: spec({ expectedDuration: 36_000 }), offers, nowMs: NOW, memory: seen({ 'us-central1-a': 0.5 }) }).rows;
    const [measured] = predictPlan({ spec: spec({ expectedDuration: 36_000 }), offers, nowMs: NOW, memory: seen({ 'us-central1-a': 0.5 }), measuredLoss: { seconds: 36, samples: 2 } }).rows;
    assert.deepEqual([prior.lossSeconds, prior.lossSource], [300 + RESTART_SECONDS, 'prior']);
    assert.deepEqual([measured.lossSeconds, measured.lossSource, measured.expectedHours], [36, 'measured', 10 / (1 - 0.5 * 0.01)]);
  });

  it('uses the prior for zones the project has not seen, and says so', () => {
    const [row] = predictPlan({ spec: spec({ expectedDuration: 3600 }), offers: [offer('europe-west4-a', 'SPOT', 0.2)], nowMs: NOW }).rows;
    assert.deepEqual([row.preemptionsPerHour, row.preemptionSource], [PRIOR_PREEMPTIONS_PER_HOUR, 'prior']);
  });

  it('scales the work by throughput: a slower accelerator takes longer, by the datasheet or by the spec', () => {
    const accelerators = [{ type: 'nvidia-l4', count: 1 }, { type: 'nvidia-tesla-t4', count: 1 }];
    const offers = [offer('us-central1-a', 'STANDARD', 0.6), offer('us-central1-a', 'STANDARD', 0.35, 'nvidia-tesla-t4')];
    const byDatasheet = predictPlan({ spec: spec({ expectedDuration: 3600 }, 'on-demand', accelerators), offers, nowMs: NOW });
    assert.equal(byDatasheet.rows.find((r) => r.accelerator === 'nvidia-tesla-t4')!.workHours, 121 / 65);
    const bySpec = predictPlan({ spec: spec({ expectedDuration: 3600, relativeThroughput: { 'nvidia-l4': 2, 'nvidia-tesla-t4': 1 } }, 'on-demand', accelerators), offers, nowMs: NOW });
    const t4 = bySpec.rows.find((r) => r.accelerator === 'nvidia-tesla-t4')!;
    assert.deepEqual([t4.workHours, t4.throughputSource], [2, 'spec']);
  });

  it('gives the deadline risk: certain for on-demand that fits, rising with the preemption rate for spot, certain past the slack', () => {
    const offers = [offer('us-central1-a', 'SPOT', 0.2), offer('us-central1-b', 'SPOT', 0.2), offer('us-central1-c', 'STANDARD', 0.6)];
    const s = spec({ expectedDuration: 8 * 3600, deadline: new Date(NOW + 9 * 3_600_000).toISOString() }, 'auto');
    const plan = predictPlan({ spec: s, offers, nowMs: NOW, memory: seen({ 'us-central1-a': 0.05, 'us-central1-b': 1 }) });
    const risk = (zone: string) => plan.rows.find((r) => r.zone === zone)!.missRisk!;
    assert.equal(risk('us-central1-c'), 0);
    assert.ok(risk('us-central1-a') < risk('us-central1-b'), JSON.stringify(plan.rows));
    const late = predictPlan({ spec: spec({ expectedDuration: 10 * 3600, deadline: new Date(NOW + 9 * 3_600_000).toISOString() }, 'auto'), offers, nowMs: NOW });
    assert.ok(late.rows.every((r) => r.missRisk === 1));
  });

  it('computes the Poisson tail exactly', () => {
    assert.equal(missRisk(0, 1, 1), 1 - Math.exp(-1));
    assert.equal(missRisk(2.5, 1, 1), 1 - Math.exp(-1) * (1 + 1 + 0.5));
    assert.equal(missRisk(-0.1, 0, 1), 1);
    assert.equal(missRisk(5, 0, 1), 0);
  });

  it('marks the offer the run would try first, as the run decides it', () => {
    const offers = [offer('us-central1-a', 'SPOT', 0.3), offer('us-central1-b', 'SPOT', 0.2), offer('us-central1-c', 'STANDARD', 0.6)];
    const plan = predictPlan({ spec: spec({ expectedDuration: 3600 }), offers, nowMs: NOW });
    assert.deepEqual(plan.rows.filter((r) => r.pick).map((r) => `${r.zone}/${r.provisioningModel}`), ['us-central1-b/SPOT']);
    const onDemand = predictPlan({ spec: spec({ expectedDuration: 3600 }, 'on-demand'), offers, nowMs: NOW });
    assert.deepEqual(onDemand.rows.filter((r) => r.pick).map((r) => `${r.zone}/${r.provisioningModel}`), ['us-central1-c/STANDARD']);
  });

  it('marks what the run would pick knowing what the project saw: not a zone another run just found stocked out', () => {
    const offers = [offer('us-central1-a', 'SPOT', 0.2), offer('us-central1-b', 'SPOT', 0.25)];
    const memory = record(emptyMemory(), { kind: OutcomeKind.Stockout, zone: 'us-central1-a', accelerator: 'nvidia-l4', model: 'SPOT', at: NOW - 60_000 }, NOW - 60_000);
    const plan = predictPlan({ spec: spec({ expectedDuration: 3600 }), offers, nowMs: NOW, memory });
    assert.deepEqual(plan.rows.filter((r) => r.pick).map((r) => r.zone), ['us-central1-b']);
  });

  it('predicts nothing without expectedDuration, and says which accelerators it cannot predict', () => {
    const plan = predictPlan({ spec: spec({}), offers: [offer('us-central1-a', 'SPOT', 0.2)], nowMs: NOW });
    assert.deepEqual([plan.rows.length, plan.unpredictable], [0, ['nvidia-l4']]);
  });

  it('prints as a table with the pick starred, the prior named, and what it could not predict', () => {
    const plan = predictPlan({ spec: spec({ expectedDuration: 3600 }), offers: [offer('us-central1-b', 'SPOT', 0.2), offer('us-central1-c', 'STANDARD', 0.6), offer('us-central1-c', 'STANDARD', 9, 'nvidia-tesla-p4')], nowMs: NOW });
    const lines = planLines({ ...plan, at: new Date(NOW).toISOString(), prices: { asOf: '2030-01-01', source: 'catalog' }, unpriced: [] });
    assert.match(lines[2], /^\*\s+nvidia-l4 x1\s+us-central1-b\s+spot\s+0\.200\s+1\.0 h\s+\$0\.2000\s+\$0\.2014\s+2030-01-01T01:\d\dZ\s+-\s+0\.042 \(prior\)\s+600 s \(prior\)\s+expected$/);
    assert.match(lines[3], /^\s+nvidia-l4 x1\s+us-central1-c\s+on-demand\s+0\.600\s+1\.0 h\s+\$0\.6000\s+\$0\.6000\s/);
    assert.equal(lines[4], 'work: time.expectedDuration 1.0 h on nvidia-l4 x1; other accelerators scaled by datasheet throughput');
    assert.equal(lines[5], 'not predicted (no throughput figure; give time.relativeThroughput): nvidia-tesla-p4');
  });

  it('prefers the throughput runs of the same spec measured over the datasheet, and says which figure each row used', () => {
    const accelerators = [{ type: 'nvidia-l4', count: 1 }, { type: 'nvidia-tesla-t4', count: 1 }];
    const s = parseSpec({ name: 'bert', command: ['train'], checkpoint: { uri: 'gs://bucket/ckpt', interval: 600 }, resources: { accelerators }, pricing: { mode: 'on-demand' }, monitoring: { totalSteps: 36_000 } }, { nowMs: NOW });
    const offers = [offer('us-central1-a', 'STANDARD', 0.6), offer('us-central1-a', 'STANDARD', 0.35, 'nvidia-tesla-t4')];
    const l4Only = predictPlan({ spec: s, offers, nowMs: NOW, measured: { 'nvidia-l4': { stepsPerGpuSecond: 10, samples: 2, seconds: 500 } } });
    const row = (plan: typeof l4Only, accelerator: string) => plan.rows.find((r) => r.accelerator === accelerator)!;
    assert.deepEqual([row(l4Only, 'nvidia-l4').workHours, row(l4Only, 'nvidia-l4').throughputSource, row(l4Only, 'nvidia-l4').stepsPerSecond], [1, 'measured', 10]);
    assert.deepEqual([row(l4Only, 'nvidia-tesla-t4').workHours, row(l4Only, 'nvidia-tesla-t4').throughputSource], [121 / 65, 'datasheet'], 'the T4 scales the measured L4 work by the datasheet');
    assert.deepEqual(l4Only.work, { basis: 'measured-steps', accelerator: 'nvidia-l4', acceleratorCount: 1, hours: 1, totalSteps: 36_000, stepsPerGpuSecond: 10, measuredSeconds: 500 });
    const both = predictPlan({ spec: s, offers, nowMs: NOW, measured: { 'nvidia-l4': { stepsPerGpuSecond: 10, samples: 2, seconds: 500 }, 'nvidia-tesla-t4': { stepsPerGpuSecond: 4, samples: 1, seconds: 100 } } });
    assert.deepEqual([row(both, 'nvidia-tesla-t4').workHours, row(both, 'nvidia-tesla-t4').throughputSource], [2.5, 'measured'], 'measured on the T4 itself: 36,000 steps at 4 a second');
    // Without total steps the expected duration is the work, scaled by the measured ratio.
    const byRatio = predictPlan({ spec: spec({ expectedDuration: 3600 }, 'on-demand', accelerators), offers, nowMs: NOW, measured: { 'nvidia-l4': { stepsPerGpuSecond: 10, samples: 1, seconds: 60 }, 'nvidia-tesla-t4': { stepsPerGpuSecond: 5, samples: 1, seconds: 60 } } });
    assert.deepEqual([row(byRatio, 'nvidia-tesla-t4').workHours, row(byRatio, 'nvidia-tesla-t4').throughputSource, byRatio.work?.basis], [2, 'measured', 'expected-duration']);
  });

  it('predicts from measured throughput and total steps alone, with no expected duration', () => {
    const s = parseSpec({ name: 'bert', command: ['train'], checkpoint: { uri: 'gs://bucket/ckpt', interval: 600 }, resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] }, pricing: { mode: 'on-demand' } }, { nowMs: NOW });
    const plan = predictPlan({ spec: s, offers: [offer('us-central1-a', 'STANDARD', 0.6)], nowMs: NOW, measured: { 'nvidia-l4': { stepsPerGpuSecond: 2, samples: 1, seconds: 60, totalSteps: 14_400 } } });
    assert.deepEqual([plan.rows[0].workHours, plan.rows[0].expectedCostUsd, plan.work?.totalSteps], [2, 1.2, 14_400]);
  });

  it('charges a gang of N nodes for N VMs, and counts a preemption of any one of them', () => {
    const one = spec({ expectedDuration: 3600 });
    const gang = { ...one, resources: { ...one.resources, nodes: 2 } };
    const offers = [offer('us-central1-a', 'STANDARD', 0.6), offer('us-central1-b', 'SPOT', 0.2)];
    const [single, pair] = [one, gang].map((s) => predictPlan({ spec: s, offers, nowMs: NOW }));
    const standard = (p: typeof single) => p.rows.find((r) => r.provisioningModel === 'STANDARD')!;
    const spot = (p: typeof single) => p.rows.find((r) => r.provisioningModel === 'SPOT')!;
    assert.deepEqual([standard(pair).nodes, standard(pair).workHours, standard(pair).workCostUsd, standard(pair).expectedCostUsd], [2, 1, 1.2, 1.2]);
    assert.equal(standard(single).expectedCostUsd, 0.6);
    assert.equal(spot(pair).preemptionsPerHour, 2 * PRIOR_PREEMPTIONS_PER_HOUR);
    assert.ok(spot(pair).expectedHours > spot(single).expectedHours, 'more preemptions, more hours');
    assert.equal(spot(pair).expectedCostUsd, 0.2 * 2 * spot(pair).expectedHours);
    // An offer the provider already priced for the whole gang (GKE: offer.nodes) is not charged twice.
    const gangPriced = predictPlan({ spec: gang, offers: [{ ...offers[0], pricePerHour: 1.2, nodes: 2 }], nowMs: NOW });
    assert.deepEqual([gangPriced.rows[0].pricePerHour, gangPriced.rows[0].expectedCostUsd], [0.6, 1.2]);
    // GCE prices a gang's offer for all its nodes (run/gang.ts): the plan charges that price once.
    const gangOffers = offers.map((o) => ({ ...o, pricePerHour: o.pricePerHour * 2, nodes: 2 }));
    const priced = predictPlan({ spec: gang, offers: gangOffers, nowMs: NOW });
    assert.deepEqual(priced.rows.map((r) => [r.pricePerHour, r.expectedCostUsd]), pair.rows.map((r) => [r.pricePerHour, r.expectedCostUsd]));
  });

  it('has a slice of a GPU train at the share it is priced at: a 1g MIG partition a seventh, a GPU shared by 4 a quarter', () => {
    const a100 = spec({ expectedDuration: 3600 }, 'on-demand', [{ type: 'nvidia-a100-80gb', count: 1 }]);
    const whole = offer('us-central1-a', 'STANDARD', 3.5, 'nvidia-a100-80gb');
    const offers = [whole, { ...whole, zone: 'us-central1-b', pricePerHour: 0.5, partition: '1g.10gb' }, { ...whole, zone: 'us-central1-c', pricePerHour: 0.875, maxSharedClients: 4 }];
    const plan = predictPlan({ spec: a100, offers, nowMs: NOW });
    const byZone = (zone: string) => plan.rows.find((r) => r.zone === zone)!;
    assert.deepEqual([byZone('us-central1-a').workHours, byZone('us-central1-a').slice, byZone('us-central1-a').throughputSource], [1, undefined, 'expected']);
    assert.deepEqual([byZone('us-central1-b').workHours, byZone('us-central1-b').slice], [7, 'MIG 1g.10gb']);
    assert.deepEqual([byZone('us-central1-c').workHours, byZone('us-central1-c').slice], [4, 'time-shared by 4']);
    // Priced at their share, slices cost what the whole GPU does for the same work, and take longer.
    for (const zone of ['us-central1-b', 'us-central1-c']) assert.ok(Math.abs(byZone(zone).expectedCostUsd - 3.5) < 1e-9, zone);
  });

  it('shows what the work costs per option, and says when the offer the run tries first is dearer for the work than another', () => {
    const accelerators = [{ type: 'nvidia-l4', count: 1 }, { type: 'nvidia-tesla-t4', count: 1 }];
    const offers = [offer('us-central1-a', 'SPOT', 0.283), offer('us-central1-a', 'SPOT', 0.182, 'nvidia-tesla-t4')];
    const plan = predictPlan({ spec: spec({ expectedDuration: 20 }, 'spot', accelerators), offers, nowMs: NOW });
    const t4 = plan.rows.find((r) => r.accelerator === 'nvidia-tesla-t4')!;
    const l4 = plan.rows.find((r) => r.accelerator === 'nvidia-l4')!;
    assert.equal(t4.pick, true, 'placement takes the cheaper by the hour');
    assert.ok(t4.workCostUsd > l4.workCostUsd && t4.expectedCostUsd > l4.expectedCostUsd);
    const lines = planLines({ ...plan, at: new Date(NOW).toISOString(), prices: { asOf: '2030-01-01', source: 'catalog' }, unpriced: [] });
    const more = ((t4.expectedCostUsd / l4.expectedCostUsd - 1) * 100).toFixed(0);
    assert.ok(lines.includes(`the run would try nvidia-tesla-t4 x1 in us-central1-a first (placement ranks offers by price per hour): expected $${t4.expectedCostUsd.toFixed(4)} for the work, ${more}% more than nvidia-l4 x1 in us-central1-a at $${l4.expectedCostUsd.toFixed(4)}`), lines.join('\n'));
  });

  it('refuses a spec whose throughput figures leave out an accelerator it lists', () => {
    assert.throws(() => spec({ relativeThroughput: { 'nvidia-l4': 1 } }, 'spot', [{ type: 'nvidia-l4', count: 1 }, { type: 'nvidia-tesla-t4', count: 1 }]), /time\.relativeThroughput: give a figure for every accelerator the run may use; nvidia-tesla-t4 has none/);
  });
});

describe('sterna plan examples/run.json', function () {
  this.timeout(180_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({});
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  it('prints every placement the example could take, marks the one the run would take, and creates nothing', async () => {
    const { namespace } = await testEnv();
    const env = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: namespace };
    const cli = join(__dirname, '..', '..', 'cli', 'main.js');
    const example = join(__dirname, '..', '..', '..', 'examples', 'run.json');
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, [cli, 'plan', example, '--json', '--task-queue', stack.taskQueue], { env, timeout: 90_000 }, (err, out, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(out))),
    );
    const plan = JSON.parse(stdout) as PlanResult;
    assert.ok(plan.rows.length > 0);
    assert.deepEqual(new Set(plan.rows.map((r) => r.accelerator)), new Set(['nvidia-l4', 'nvidia-tesla-t4']));
    assert.equal(plan.rows.filter((r) => r.pick).length, 1);
    assert.equal(plan.rows.find((r) => r.pick)!.provisioningModel, 'SPOT', 'the example runs on spot');
    assert.equal(plan.prices.source, 'catalog');
    assert.deepEqual((await stack.emulator.instances()).length, 0, 'a plan creates nothing');
  });

  it('remembers how fast a run of the spec trained, and the next plan of that spec predicts from it', async () => {
    const spec = exampleSpec();
    await (await stack.start(spec)).result();
    // The run tells the throughput memory as it releases its attempt; the memory hears it a moment later.
    let plan = await planTrainingRun(stack.env.client, spec, { taskQueue: stack.taskQueue });
    for (const until = Date.now() + 30_000; plan.work?.basis !== 'measured-steps' && Date.now() < until; ) {
      await new Promise((r) => setTimeout(r, 500));
      plan = await planTrainingRun(stack.env.client, spec, { taskQueue: stack.taskQueue });
    }
    const work = plan.work!;
    assert.deepEqual([work.basis, work.totalSteps], ['measured-steps', 400], JSON.stringify(work));
    // The example trainer takes 25 ms a step: at most 40 steps a second, less with its checkpoints.
    assert.ok(work.stepsPerGpuSecond! > 2 && work.stepsPerGpuSecond! <= 40 * 1.25, `measured ${work.stepsPerGpuSecond} steps/s`);
    const measured = plan.rows.filter((r) => r.throughputSource === 'measured');
    assert.ok(measured.length > 0 && measured.every((r) => r.accelerator === work.accelerator), JSON.stringify(plan.rows.map((r) => [r.accelerator, r.throughputSource])));
    assert.ok(plan.rows.filter((r) => r.accelerator !== work.accelerator).every((r) => r.throughputSource === 'datasheet'), 'the other accelerator scales the measured work by the datasheet');
  });
});
