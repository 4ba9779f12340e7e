/**
 * Data-aware placement, server-less: the egress and staging estimate by continent pair,
 * the run machine choosing between the data's region and a cheaper far zone, and the
 * staging progress the status shows.
 */
import { strict as assert } from 'node:assert';
import { admitted, stepOn } from '../helpers/run-harness';
import { continentOf, dataCost, DEFAULT_DATA_TRANSFER } from '../../workflows/data-cost';
import { executionToken, resourceName, runKey } from '../../workflows/naming';
import type { Action as Command, RunEvent } from '../../workflows/run/protocol';
import { initialState, type RunState } from '../../workflows/run/state';
import { statusOf } from '../../workflows/run/views';
import { checkSpec, parseSpec, type RunSpec, type RunSpecInput } from '../../workflows/spec';
import type { AgentSnapshot, Offer } from '../../workflows/types';

const T0 = Date.parse('2026-12-01T00:00:00Z');
const WORKFLOW = 'run-data';
const EXEC = executionToken('first');

function offer(zone: string, price: number): Offer {
  return { backend: 'gce', zone, region: zone.slice(0, -2), accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: 'SPOT', pricePerHour: price, onDemandPricePerHour: 0.7, quotaAvailable: true };
}

/** A Tokyo-style choice: the data sits in Singapore; us-central1 is 4 cents an hour cheaper. */
const OFFERS = [offer('us-central1-a', 0.2), offer('asia-southeast1-b', 0.24)];

class Run {
  readonly spec: RunSpec;
  state: RunState;
  now = T0;

  constructor(datasets: RunSpecInput['datasets'], extra: Partial<RunSpecInput> = {}) {
    this.spec = parseSpec({
      command: ['python', 'train.py'],
      checkpoint: { uri: 'gs://ckpt/run' },
      resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
      pricing: { mode: 'spot' },
      time: { expectedDuration: '10h' },
      datasets,
      ...extra,
    });
    this.state = admitted(initialState(WORKFLOW, T0, undefined, undefined));
  }

  send(event: RunEvent): Command {
    return stepOn(this, this.spec, event, { nowMs: this.now, workflowId: WORKFLOW, execution: EXEC, continueAsNewSuggested: false, attemptsAtStart: 0 });
  }

  /** The zone the machine provisions first. */
  placed(): string {
    this.send({ kind: 'start' });
    const command = this.send({ kind: 'offers', offers: OFFERS });
    assert.equal(command.kind, 'provision');
    return this.state.attempts[0].offer.zone;
  }

  observe(seconds: number, snapshot: Partial<AgentSnapshot>): void {
    this.now = T0 + seconds * 1000;
    const owner = { run: runKey(WORKFLOW), execution: EXEC, attempt: 1 };
    this.send({ kind: 'observed', via: 'look', observation: { name: resourceName(WORKFLOW, EXEC, 1), owner, at: '', snapshot: { lifecycle: 'running', preempted: false, ...snapshot } } });
  }
}

const dataset = (sizeGb: number) => [{ uri: 'gs://data-sg/train', path: 'data', location: 'asia-southeast1', sizeGb }];

describe('data-aware placement (pure, no server)', () => {
  it('prices egress and staging by continent pair, free and fastest in the data\'s own region', () => {
    assert.deepEqual([continentOf('asia-southeast1'), continentOf('us-central1'), continentOf('EU'), continentOf('australia-southeast1')], ['asia', 'na', 'eu', 'oceania']);
    const gb100 = [{ location: 'asia-southeast1', bytes: 100e9 }];
    assert.deepEqual(dataCost(gb100, 'asia-southeast1', 1), { egressUsd: 0, stagingSeconds: 250, stagingUsd: 250 / 3600, totalUsd: 250 / 3600 });
    assert.equal(dataCost(gb100, 'asia-northeast1', 1).egressUsd, 100 * DEFAULT_DATA_TRANSFER.sameContinentUsdPerGb);
    assert.equal(dataCost(gb100, 'us-central1', 1).egressUsd, 100 * DEFAULT_DATA_TRANSFER.otherContinentUsdPerGb);
    assert.equal(dataCost(gb100, 'australia-southeast1', 1).egressUsd, 100 * DEFAULT_DATA_TRANSFER.farContinentUsdPerGb);
    assert.equal(dataCost([{ location: 'US', bytes: 100e9 }], 'us-east1', 1).egressUsd, 0, 'a multi-region bucket is local to its continent');
    assert.ok(Math.abs(dataCost(gb100, 'us-central1', 1).stagingSeconds - 100e3 / DEFAULT_DATA_TRANSFER.otherContinentMBps) < 1e-6);
  });

  it("places the run in the data's region over a slightly cheaper far zone when egress and staging outweigh the saving", () => {
    // 10 h x $0.04/h = $0.40 saved in us-central1; 500 GB cost $40 of egress and 2.3 h of staging there.
    assert.equal(new Run(dataset(500)).placed(), 'asia-southeast1-b');
  });

  it('takes the cheaper far zone when the data is small enough that moving it costs less than the saving', () => {
    // 1 GB: $0.08 of egress and 17 s of staging, against $0.40 saved.
    assert.equal(new Run(dataset(1)).placed(), 'us-central1-a');
    assert.equal(new Run([{ uri: 'gs://data-sg/train', path: 'data' }]).placed(), 'us-central1-a', 'no location stated: price alone');
  });

  it('lets the spec override the transfer table', () => {
    const free = { placement: { dataTransfer: { otherContinentUsdPerGb: 0, otherContinentMBps: 100_000 } } };
    assert.equal(new Run(dataset(500), free).placed(), 'us-central1-a');
  });

  it("weighs the agent's measured size when the spec states none", () => {
    const run = new Run([{ uri: 'gs://data-sg/train', path: 'data', location: 'asia-southeast1' }]);
    assert.equal(run.placed(), 'us-central1-a', 'size unknown: nothing to weigh yet');
    run.send({ kind: 'provisioned', attempt: 1, startedAt: new Date(T0).toISOString(), adopted: false, observerAsked: true });
    run.observe(5, { phase: 'staging', stagedBytes: 0, totalBytes: 500e9 });
    assert.equal(run.state.staging?.totalBytes, 500e9);
    const rerun = new Run([{ uri: 'gs://data-sg/train', path: 'data', location: 'asia-southeast1' }]);
    rerun.state.staging = run.state.staging;
    assert.equal(rerun.placed(), 'asia-southeast1-b');
  });

  it('shows bytes staged, the rate and the ETA in the status', () => {
    const run = new Run(dataset(1));
    run.placed();
    run.send({ kind: 'provisioned', attempt: 1, startedAt: new Date(T0).toISOString(), adopted: false, observerAsked: true });
    run.observe(10, { phase: 'staging', stagedBytes: 0, totalBytes: 1e9 });
    run.observe(20, { phase: 'staging', stagedBytes: 250e6, totalBytes: 1e9 });
    assert.deepEqual(statusOf(run.state, run.now).staging, { attempt: 1, stagedBytes: 250e6, totalBytes: 1e9, bytesPerSecond: 25e6, etaSeconds: 30 });
    run.observe(40, { phase: 'training', stagedBytes: 1e9, totalBytes: 1e9 });
    run.observe(90, { phase: 'training', stagedBytes: 1e9, totalBytes: 1e9 });
    assert.deepEqual(statusOf(run.state, run.now).staging, { attempt: 1, stagedBytes: 1e9, totalBytes: 1e9, bytesPerSecond: 33333333, etaSeconds: 0 }, 'the rate is over the staging, not the training after it');
  });

  it('names the field of a bad dataset location', () => {
    const check = checkSpec({ command: ['x'], checkpoint: { uri: 'gs://bkt/c' }, resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] }, datasets: [{ uri: 'gs://bkt/d', path: 'd', location: 'Singapore' }] });
    assert.equal(check.ok, false);
    assert.match(!check.ok ? `${check.problems[0].path}: ${check.problems[0].message}` : '', /^datasets\.0\.location: a GCS location/);
  });
});
