/**
 * `auto` weighs the run's data cost when it chooses where and how to run (issue 18), not
 * only when it ranks offers within the action it chose: the egress and the staging time
 * of bringing the data to a zone are part of the price of a start there
 * (workflows/policy/sterna.ts, workflows/run/auto-costs.ts). Server-less: the pure policy
 * and the pure run machine.
 */
import { strict as assert } from 'node:assert';
import { admitted, stepOn } from '../helpers/run-harness';
import { decideAuto, zoneQuotes, type AutoInputs } from '../../workflows/auto-policy';
import { dataCost } from '../../workflows/data-cost';
import { executionToken } from '../../workflows/naming';
import type { Action as Command, RunEvent } from '../../workflows/run/protocol';
import { initialState, type RunState } from '../../workflows/run/state';
import { parseSpec, type RunSpec, type RunSpecInput } from '../../workflows/spec';
import type { Offer } from '../../workflows/types';

const T0 = Date.parse('2026-12-01T00:00:00Z');
const WORKFLOW = 'run-auto-data';
const EXEC = executionToken('first');

function offer(zone: string, model: Offer['provisioningModel'], price: number): Offer {
  return { backend: 'gce', zone, region: zone.slice(0, -2), accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: model, pricePerHour: price, onDemandPricePerHour: 0.7, quotaAvailable: true };
}

/** The data sits in Singapore; us-central1 is 4 cents an hour cheaper on spot, and on-demand costs the same in both. */
const OFFERS = [offer('us-central1-a', 'SPOT', 0.2), offer('us-central1-a', 'STANDARD', 0.7), offer('asia-southeast1-b', 'SPOT', 0.24), offer('asia-southeast1-b', 'STANDARD', 0.7)];
const dataset = (sizeGb: number) => [{ uri: 'gs://data-sg/train', path: 'data', location: 'asia-southeast1', sizeGb }];

class Run {
  readonly spec: RunSpec;
  state: RunState;

  constructor(datasets: RunSpecInput['datasets']) {
    this.spec = parseSpec({
      command: ['python', 'train.py'],
      checkpoint: { uri: 'gs://ckpt/run' },
      resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
      pricing: { mode: 'auto' },
      time: { expectedDuration: '10h', deadlineAfter: '20h' },
      datasets,
    });
    this.state = admitted(initialState(WORKFLOW, T0, undefined, T0 + 20 * 3_600_000));
  }

  send(event: RunEvent): Command {
    return stepOn(this, this.spec, event, { nowMs: T0, workflowId: WORKFLOW, execution: EXEC, continueAsNewSuggested: false, attemptsAtStart: 0 });
  }

  /** Where and how the machine provisions first. */
  placed(offers: Offer[] = OFFERS): string {
    this.send({ kind: 'start' });
    const command = this.send({ kind: 'offers', offers });
    assert.equal(command.kind, 'provision', JSON.stringify(command));
    const o = this.state.attempts[0].offer;
    return `${o.zone} ${o.provisioningModel}`;
  }
}

describe('auto weighs the data cost when it chooses (pure, no server)', () => {
  it('chooses the data\'s region over a cheaper far zone when egress and staging outweigh the saving', () => {
    // 10 h x $0.04/h = $0.40 saved in us-central1; 500 GB cost $40 of egress and 2.3 h of staging there.
    assert.equal(new Run(dataset(500)).placed(), 'asia-southeast1-b SPOT');
  });

  it('chooses the cheaper far zone when moving the data costs less than the saving', () => {
    // 1 GB: $0.08 of egress and 17 s of staging, against $0.40 saved.
    assert.equal(new Run(dataset(1)).placed(), 'us-central1-a SPOT');
    assert.equal(new Run([{ uri: 'gs://data-sg/train', path: 'data' }]).placed(), 'us-central1-a SPOT', 'no location stated: price alone');
  });

  it('finishes on on-demand near the data when the deadline leaves no room for spot', () => {
    // 10 h of work in 10 h 25 min: no room for a spot step that could be lost (the staging
    // alone takes 21 min here), room for on-demand; at equal prices, the zone without egress.
    const run = new Run(dataset(500));
    run.state.deadline = new Date(T0 + 10 * 3_600_000 + 25 * 60_000).toISOString();
    assert.equal(run.placed(), 'asia-southeast1-b STANDARD');
  });

  it('shows the policy each zone\'s egress and staging time as the cost of a start there', () => {
    const cost = (o: Offer) => {
      const c = dataCost([{ location: 'asia-southeast1', bytes: 500e9 }], o.region, o.pricePerHour);
      return { egressUsd: c.egressUsd, stagingSeconds: c.stagingSeconds };
    };
    const quotes = zoneQuotes(OFFERS, false, cost);
    const far = quotes.find((q) => q.zone === 'us-central1-a')!;
    const near = quotes.find((q) => q.zone === 'asia-southeast1-b')!;
    assert.ok(Math.abs(far.startUsd! - 40) < 1e-9);
    assert.ok(Math.abs(far.startHours! - 500e3 / 60 / 3600) < 1e-9);
    assert.equal(near.startUsd, 0);
    const inputs: AutoInputs = {
      offers: OFFERS,
      events: [],
      placement: { nowMs: T0, cooldownSeconds: 1800, expectedHours: 10, models: ['SPOT', 'STANDARD'] },
      nowMs: T0,
      runStartMs: T0,
      deadlineMs: T0 + 20 * 3_600_000,
      remainingWorkSeconds: 36_000,
      changeoverSeconds: 120,
      stepSeconds: 300,
      current: { kind: 'idle' },
    };
    assert.deepEqual(decideAuto(undefined, inputs).action, { kind: 'spot', zone: 'us-central1-a' }, 'without the data cost: the cheaper far zone');
    assert.deepEqual(decideAuto(undefined, { ...inputs, dataCost: cost }).action, { kind: 'spot', zone: 'asia-southeast1-b' });
  });
});
