/**
 * The checkpoint interval by policy, server-less: Young/Daly with its priors, cap, floor
 * and pin, and, through the run machine, the interval each attempt's VM is given.
 */
import { strict as assert } from 'node:assert';
import { parseAgentValues } from '../../activities/agent/script';
import { runKey } from '../../workflows/naming';
import { checkpointInterval, intervalForZone, ownZoneRate, PRIOR_CHECKPOINT_SECONDS, PRIOR_PREEMPTIONS_PER_HOUR } from '../../workflows/run/checkpoint-interval';
import { provisionRequest } from '../../workflows/run/requests';
import { type RunSpecInput } from '../../workflows/spec';
import { ProvisioningModel, type Offer } from '../../workflows/types';
import { emptyMemory, OutcomeKind, record, zonePrior } from '../../workflows/zones/memory';
import { EXEC, offerIn, RunHarness, specOf, T0 } from '../helpers/run-harness';

const WORKFLOW = 'run-ckpt';
const HOUR = 3600;

const offer = (zone: string, price: number): Offer => offerIn(zone, price);

class Run extends RunHarness {
  constructor(overrides: Partial<RunSpecInput> = {}) {
    super(WORKFLOW, specOf(overrides));
  }

  /** Provisions what the machine asks for: returns the attempt and the interval its VM gets. */
  provision(offers: Offer[]): { attempt: number; zone: string; interval: number } {
    const command = this.last.kind === 'find-capacity' ? this.send({ kind: 'offers', offers }) : this.last;
    assert.equal(command.kind, 'provision', JSON.stringify(command));
    const attempt = this.state.attempts[(command as { attempt: number }).attempt - 1];
    const request = provisionRequest(this.spec, this.state, attempt, { run: runKey(WORKFLOW), execution: EXEC, attempt: attempt.attempt }, this.now);
    this.send({ kind: 'provisioned', attempt: attempt.attempt, startedAt: new Date(this.now).toISOString(), adopted: false });
    return { attempt: attempt.attempt, zone: attempt.offer.zone, interval: Number(request.agent.env.STERNA_CHECKPOINT_INTERVAL) };
  }

  preempted(attempt: number): void {
    this.observe(attempt, { lifecycle: 'terminated', preempted: true });
    this.send({ kind: 'released', attempt, outcome: 'deleted', stoppedAt: new Date(this.now).toISOString() });
  }
}

describe('checkpoint interval by policy (pure, no server)', () => {
  it("is Young/Daly's sqrt(2 x checkpoint cost x mean time between preemptions)", () => {
    assert.deepEqual(checkpointInterval({ preemptionsPerHour: 1, checkpointSeconds: 60 }), { seconds: 657, basis: 'young-daly', preemptionsPerHour: 1, checkpointSeconds: 60 });
    assert.equal(checkpointInterval({ preemptionsPerHour: 4, checkpointSeconds: 60 }).seconds, 329, 'four times the rate: half the interval');
  });

  it('uses the documented priors while the rate or the cost is unknown', () => {
    const prior = checkpointInterval({});
    assert.deepEqual([prior.preemptionsPerHour, prior.checkpointSeconds], [PRIOR_PREEMPTIONS_PER_HOUR, PRIOR_CHECKPOINT_SECONDS]);
    assert.equal(prior.seconds, Math.round(Math.sqrt(2 * PRIOR_CHECKPOINT_SECONDS * (HOUR / PRIOR_PREEMPTIONS_PER_HOUR))));
  });

  it('stays within the cap (default 30 min) and the floor, and a pinned interval wins', () => {
    assert.deepEqual([checkpointInterval({ preemptionsPerHour: 0.01, checkpointSeconds: 60 }).seconds, checkpointInterval({ preemptionsPerHour: 0 }).basis], [1800, 'cap']);
    assert.equal(checkpointInterval({ preemptionsPerHour: 0.01, checkpointSeconds: 60, capSeconds: 900 }).seconds, 900);
    assert.deepEqual(checkpointInterval({ preemptionsPerHour: 30, checkpointSeconds: 1 }), { seconds: 60, basis: 'floor', preemptionsPerHour: 30, checkpointSeconds: 1 });
    assert.equal(checkpointInterval({ preemptionsPerHour: 60, checkpointSeconds: 200 }).seconds, 200, 'never shorter than a checkpoint takes');
    assert.deepEqual(checkpointInterval({ preemptionsPerHour: 30, pinnedSeconds: 600 }).basis, 'pinned');
  });

  it("reads the agent's measured upload time with each checkpoint", () => {
    const values = parseAgentValues({ checkpoint: `40 ${'a'.repeat(64)} gs://c/step-40.json`, 'checkpoint-ms': '20500' });
    assert.equal(values.checkpointMs, 20500);
  });

  it('tightens after a move to a zone with a higher preemption rate, from what the run itself saw', () => {
    const run = new Run({ recovery: { zoneCooldown: '1h' } });
    const offers = [offer('us-central1-a', 0.2), offer('us-east1-b', 0.25)];
    run.send({ kind: 'start' });
    // Attempt 1, in the cheaper zone: nothing known yet, the priors give the interval.
    const a1 = run.provision(offers);
    assert.equal(a1.zone, 'us-central1-a');
    assert.equal(a1.interval, checkpointInterval({}).seconds);
    run.at(60).observe(1, { phase: 'training', step: 10, checkpoint: { step: 10, sha256: 'a'.repeat(64), uri: 'gs://c/step-10' }, checkpointMs: 20_000 });
    assert.equal(run.state.checkpointSeconds, 20, 'the measured cost');
    // Preempted 20 minutes in: us-central1-a now looks like about one an hour.
    run.at(20 * 60).preempted(1);
    assert.ok(Math.abs(ownZoneRate(run.state, 'us-central1-a', run.now)! - 1.5 / (1 / 3 + 1)) < 1e-9);
    const a2 = run.provision(offers);
    assert.equal(a2.zone, 'us-east1-b', 'the preempting zone cools down');
    assert.equal(a2.interval, Math.round(Math.sqrt(2 * 20 * (HOUR / PRIOR_PREEMPTIONS_PER_HOUR))));
    // Five quiet hours in us-east1-b, then a preemption there: back to the busier zone.
    run.at(5 * HOUR + 20 * 60).preempted(2);
    const a3 = run.provision(offers);
    assert.equal(a3.zone, 'us-central1-a');
    assert.ok(a3.interval < a2.interval, `moved to the zone that preempts more: ${a2.interval} s -> ${a3.interval} s`);
    assert.equal(a3.interval, Math.round(Math.sqrt(2 * 20 * (HOUR / 1.125))));
  });

  it("gives a spot attempt the interval for the project's zone memory rate, when the memory has one", () => {
    const run = new Run();
    let memory = emptyMemory();
    // Four preemptions in four hours of running: about one an hour in us-central1-a.
    for (let i = 0; i < 4; i++) memory = record(memory, { zone: 'us-central1-a', accelerator: 'nvidia-l4', model: ProvisioningModel.Spot, kind: OutcomeKind.Preempted, at: T0, lifetimeHours: 1, resource: `vm-${i}` }, T0);
    run.state.zoneMemory = memory;
    const rate = zonePrior(memory, { zone: 'us-central1-a', accelerator: 'nvidia-l4', model: ProvisioningModel.Spot }, T0).preemptionsPerHour!;
    assert.ok(rate > PRIOR_PREEMPTIONS_PER_HOUR, `remembered ${rate}/h`);
    run.send({ kind: 'start' });
    const a1 = run.provision([offer('us-central1-a', 0.2)]);
    assert.equal(a1.interval, checkpointInterval({ preemptionsPerHour: rate }).seconds);
    assert.ok(a1.interval < checkpointInterval({}).seconds, 'tighter than the prior');
  });

  it('takes the zone rate as an input when one is known (zone memory), and a pin in the spec', () => {
    const run = new Run();
    assert.ok(intervalForZone(run.spec, run.state, 'z', T0, 3).seconds < intervalForZone(run.spec, run.state, 'z', T0, 0.2).seconds);
    const pinned = new Run({ checkpoint: { uri: 'gs://ckpt/run', interval: '5m' } });
    assert.deepEqual(intervalForZone(pinned.spec, pinned.state, 'z', T0, 3), { seconds: 300, basis: 'pinned', preemptionsPerHour: 3, checkpointSeconds: PRIOR_CHECKPOINT_SECONDS });
  });
});
