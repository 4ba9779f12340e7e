/**
 * The checkpoint interval kept current while an attempt trains, server-less: the rule
 * with hysteresis, when the run looks again, and, through the run machine, the reads of
 * the zone memory and the update handed to the agent when another run's preemptions
 * raise the zone's rate.
 */
import { strict as assert } from 'node:assert';
import { parseAgentValues } from '../activities/agent/script';
import { checkpointInterval } from '../workflows/run/checkpoint-interval';
import { HYSTERESIS, intervalMoved, RECHECK_MAX_SECONDS, RECHECK_MIN_SECONDS, recheckSeconds } from '../workflows/run/live-interval';
import type { Command } from '../workflows/run/machine';
import { provisionRequest } from '../workflows/run/requests';
import { statusOf } from '../workflows/run/views';
import type { RunSpecInput } from '../workflows/spec';
import { ProvisioningModel, type Offer } from '../workflows/types';
import { emptyMemory, OutcomeKind, record, type ZoneMemory } from '../workflows/zones/memory';
import { offerIn, RunHarness, specOf, T0 } from './helpers/run-harness';

const ZONE = 'us-central1-a';
const offer = (fields: Partial<Offer> = {}) => offerIn(ZONE, 0.2, fields);

/** Another run's record in the memory: `preemptions` in `hours` of spot running in ZONE. */
function memoryWith(preemptions: number, hours: number): ZoneMemory {
  let memory = emptyMemory();
  for (let i = 0; i < preemptions; i++) {
    memory = record(memory, { zone: ZONE, accelerator: 'nvidia-l4', model: ProvisioningModel.Spot, kind: OutcomeKind.Preempted, at: T0, lifetimeHours: hours / preemptions, resource: `other-${i}` }, T0);
  }
  return memory;
}

class Run extends RunHarness {
  constructor(overrides: Partial<RunSpecInput> = {}) {
    super('run-live', specOf(overrides));
  }

  /** Places and starts attempt 1 on `o`; the interval its VM is given. */
  start(o: Offer = offer()): number {
    this.send({ kind: 'start' });
    const command = this.send({ kind: 'offers', offers: [o] });
    assert.equal(command.kind, 'provision', JSON.stringify(command));
    const request = provisionRequest(this.spec, this.state, this.state.attempts[0], this.owner(1), this.now);
    this.provisioned([o]);
    return Number(request.agent.env.STERNA_CHECKPOINT_INTERVAL);
  }

  /** Trains, with a checkpoint whose upload took `checkpointMs`. */
  trains(step: number, checkpointMs: number): Command {
    return this.observe(1, { phase: 'training', step, checkpoint: { step, sha256: 'a'.repeat(64), uri: `gs://ckpt/run/step-${step}` }, checkpointMs });
  }
}

describe('the checkpoint interval kept current mid-attempt (pure, no server)', () => {
  it(`moves only when the choice differs from the interval in force by ${HYSTERESIS * 100}% or more`, () => {
    assert.deepEqual([intervalMoved(600, 601), intervalMoved(600, 481), intervalMoved(600, 480), intervalMoved(600, 720), intervalMoved(600, 719)], [false, false, true, true, false]);
  });

  it('looks again once per interval, at least every minute apart and at most ten minutes apart', () => {
    assert.deepEqual([recheckSeconds(5), recheckSeconds(300), recheckSeconds(1800)], [RECHECK_MIN_SECONDS, 300, RECHECK_MAX_SECONDS]);
  });

  it('reads the interval the agent handed the trainer', () => {
    assert.equal(parseAgentValues({ 'checkpoint-interval': '42' }).checkpointInterval, 42);
    assert.equal(parseAgentValues({ 'checkpoint-interval': 'soon' }).checkpointInterval, undefined);
  });

  it("tightens the live attempt's interval when another run's preemptions raise its zone's rate", () => {
    const run = new Run({ checkpoint: { uri: 'gs://ckpt/run', maxInterval: '30m', minInterval: '10s' } });
    const started = run.start();
    assert.equal(started, checkpointInterval({ capSeconds: 1800, minSeconds: 10 }).seconds, 'the priors');
    assert.equal(run.state.attempts[0].checkpointInterval?.seconds, started, 'the machine keeps what the VM was given');
    // A checkpoint costs 20 s, near the prior's 30 s: not enough of a move to tell the agent.
    assert.equal(run.at(30).trains(10, 20_000).kind, 'wait');
    const checkAt = run.state.intervalCheckAt!;
    assert.equal(checkAt, T0 + (30 + recheckSeconds(started)) * 1000);
    assert.equal(run.at((checkAt - T0) / 1000).trains(15, 20_000).kind, 'read-zone-memory', 'the look is due');
    // Meanwhile, another run in the zone was preempted twice in an hour.
    const command = run.send({ kind: 'zone-memory', memory: memoryWith(2, 1) });
    assert.equal(command.kind, 'set-checkpoint-interval');
    const update = command as Extract<Command, { kind: 'set-checkpoint-interval' }>;
    assert.ok(update.interval.preemptionsPerHour > 1.9, `the memory's rate: ${update.interval.preemptionsPerHour}/h`);
    assert.equal(update.interval.seconds, checkpointInterval({ preemptionsPerHour: update.interval.preemptionsPerHour, checkpointSeconds: update.interval.checkpointSeconds, capSeconds: 1800, minSeconds: 10 }).seconds);
    assert.ok(update.interval.seconds < started * (1 - HYSTERESIS), `${started} s -> ${update.interval.seconds} s`);
    run.send({ kind: 'checkpoint-interval-set', attempt: 1, interval: update.interval, outcome: 'set' });
    assert.deepEqual(statusOf(run.state, run.now).checkpointInterval, update.interval);
    const said = run.state.timeline.filter((e) => e.kind === 'checkpoint-interval');
    assert.equal(said.length, 1);
    assert.match(said[0].event, new RegExp(`^checkpoint interval ${started} s -> ${update.interval.seconds} s: ${ZONE} preempts`));
    // In force now: the next looks change nothing until the choice moves again.
    assert.equal(run.at((checkAt - T0) / 1000 + 5).trains(20, 20_000).kind, 'wait');
  });

  it('tells the agent at once when a measured checkpoint cost alone moves the choice', () => {
    const run = new Run({ checkpoint: { uri: 'gs://ckpt/run', minInterval: '1s' } });
    const started = run.start();
    // Checkpoints cost 0.5 s, not the prior's 30 s: sqrt(60) times shorter.
    const command = run.at(30).trains(10, 500);
    assert.equal(command.kind, 'set-checkpoint-interval');
    assert.ok((command as Extract<Command, { kind: 'set-checkpoint-interval' }>).interval.seconds < started / 5);
  });

  it('keeps the interval in force when the update cannot reach the VM, and says so once', () => {
    const run = new Run({ checkpoint: { uri: 'gs://ckpt/run', minInterval: '1s' } });
    const started = run.start();
    const command = run.at(30).trains(10, 500) as Extract<Command, { kind: 'set-checkpoint-interval' }>;
    run.send({ kind: 'checkpoint-interval-set', attempt: 1, interval: command.interval, outcome: 'failed', message: 'HTTP 503' });
    assert.equal(run.state.attempts[0].checkpointInterval?.seconds, started);
    assert.equal(run.at(400).trains(20, 500).kind, 'wait', 'no second try, and no more reads for this attempt');
    const said = run.state.timeline.filter((e) => e.kind === 'checkpoint-interval');
    assert.equal(said.length, 1);
    assert.match(said[0].event, /^checkpoint interval stays \d+ s for attempt 1 \(wanted \d+ s\): the update failed: HTTP 503$/);
  });

  it('leaves a pinned interval and a GKE attempt alone', () => {
    for (const [run, o] of [
      [new Run({ checkpoint: { uri: 'gs://ckpt/run', interval: '10m', minInterval: '1s' } }), offer()],
      [new Run({ checkpoint: { uri: 'gs://ckpt/run', minInterval: '1s' } }), offer({ backend: 'gke' })],
    ] as const) {
      run.start(o);
      assert.equal(run.at(30).trains(10, 500).kind, 'wait');
      assert.equal(run.at(4000).trains(20, 500).kind, 'wait');
      assert.equal(run.state.intervalCheckAt, undefined);
    }
  });
});
