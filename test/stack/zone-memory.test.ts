/**
 * Zone memory, server-less: what it remembers, how it forgets, what a reader sees, and
 * how a run tells it and places from it (the same pure functions the zoneMemory workflow,
 * the run and `sterna zones` call).
 */
import { strict as assert } from 'node:assert';
import { admitted, stepOn } from '../helpers/run-harness';
import { executionToken } from '../../workflows/naming';
import type { Action as Command, Context, RunEvent } from '../../workflows/run/protocol';
import { AttemptOutcome, initialState, type Attempt } from '../../workflows/run/state';
import { parseSpec } from '../../workflows/spec';
import type { Offer } from '../../workflows/types';
import { outcomeOf, outcomesToTell } from '../../workflows/zones/from-run';
import {
  decayFactor,
  DEFAULT_HALF_LIFE_HOURS,
  emptyMemory,
  isZoneOutcome,
  MAX_COUNTED,
  MAX_LIFETIMES,
  MAX_RECORDS,
  prune,
  record,
  sliceFor,
  weightedMedian,
  zonePrior,
  zonePriors,
  type ZoneMemory,
  type ZoneOutcome,
} from '../../workflows/zones/memory';
import { fleetPreemptions } from '../../activities/zones/from-fleet';
import type { FleetMemory, WatchedResource } from '../../activities/fleet/memory';
import type { FleetResource } from '../../activities/providers/provider';
import { zoneRow, zoneTable } from '../../cli/zones';
import { memoryFor, rankWithMemory, rememberedEvents, memoryStats } from '../../workflows/zones/prior';

const T0 = Date.parse('2026-12-01T00:00:00Z');
const HOUR = 3_600_000;
const L4 = { zone: 'us-central1-a', accelerator: 'nvidia-l4', model: 'SPOT' } as const;

function outcome(kind: ZoneOutcome['kind'], at: number, extra: Partial<ZoneOutcome> = {}): ZoneOutcome {
  return { ...L4, region: 'us-central1', kind, at, ...extra };
}

function tell(...outcomes: [ZoneOutcome, number][]): ZoneMemory {
  return outcomes.reduce((m, [o, now]) => record(m, o, now), emptyMemory());
}

function offer(zone: string, price: number, model: 'SPOT' | 'STANDARD' = 'SPOT', accelerator = 'nvidia-l4'): Offer {
  return { backend: 'gce', zone, region: zone.slice(0, -2), accelerator, acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: model, pricePerHour: price, onDemandPricePerHour: 0.7, quotaAvailable: true };
}

describe('zone memory', () => {
  describe('decay', () => {
    it('halves evidence every half-life, and never grows it', () => {
      assert.equal(decayFactor(T0, T0, 6), 1);
      assert.equal(decayFactor(T0, T0 + 6 * HOUR, 6), 0.5);
      assert.equal(decayFactor(T0, T0 + 24 * HOUR, 6), 1 / 16);
      assert.equal(decayFactor(T0 + HOUR, T0, 6), 1, 'evidence from the future is not inflated');
    });

    it('reads counts decayed to the reader\'s now', () => {
      const m = tell([outcome('preempted', T0, { resource: 'a', lifetimeHours: 2 }), T0], [outcome('preempted', T0, { resource: 'b', lifetimeHours: 2 }), T0]);
      assert.equal(zonePrior(m, L4, T0).preemptions, 2);
      assert.equal(zonePrior(m, L4, T0 + DEFAULT_HALF_LIFE_HOURS * HOUR).preemptions, 1);
      assert.equal(zonePrior(m, L4, T0 + DEFAULT_HALF_LIFE_HOURS * HOUR).exposureHours, 2);
    });

    it('weighs a late-told outcome by its age', () => {
      const m = tell([outcome('stockout', T0 + 6 * HOUR, { resource: 'new' }), T0 + 6 * HOUR], [outcome('stockout', T0, { resource: 'old' }), T0 + 6 * HOUR]);
      assert.equal(zonePrior(m, L4, T0 + 6 * HOUR).stockouts, 1.5);
      assert.equal(zonePrior(m, L4, T0 + 6 * HOUR).lastStockoutAt, new Date(T0 + 6 * HOUR).toISOString(), 'the last stockout is the latest, not the last told');
    });
  });

  describe('what a reader sees', () => {
    it('knows nothing of a zone it was never told about', () => {
      assert.deepEqual(zonePrior(emptyMemory(), L4, T0), { ...L4, stockouts: 0, preemptions: 0, exposureHours: 0, inCooldown: false });
    });

    it('puts a zone in cooldown for the cooldown after its last stockout, per accelerator and model', () => {
      const m = tell([outcome('stockout', T0, { resource: 'a' }), T0]);
      const p = zonePrior(m, L4, T0 + 10 * 60_000, 1800);
      assert.equal(p.inCooldown, true);
      assert.equal(p.cooldownUntil, new Date(T0 + 1800_000).toISOString());
      assert.equal(zonePrior(m, L4, T0 + 1800_000, 1800).inCooldown, false);
      assert.equal(zonePrior(m, { ...L4, model: 'STANDARD' }, T0, 1800).inCooldown, false);
      assert.equal(zonePrior(m, { ...L4, accelerator: 'nvidia-a100-80gb' }, T0, 1800).inCooldown, false);
    });

    it('gives preemptions per hour of observed spot running time, and the median lifetime', () => {
      const m = tell(
        [outcome('preempted', T0, { resource: 'a', lifetimeHours: 1 }), T0],
        [outcome('preempted', T0, { resource: 'b', lifetimeHours: 3 }), T0],
        [outcome('released', T0, { resource: 'c', lifetimeHours: 4 }), T0],
      );
      const p = zonePrior(m, L4, T0);
      assert.equal(p.preemptions, 2);
      assert.equal(p.exposureHours, 8);
      assert.equal(p.preemptionsPerHour, 0.25);
      assert.equal(p.medianSpotLifetimeHours, 3);
      assert.equal(p.lastPreemptionAt, new Date(T0).toISOString());
    });

    it('has no rate or median before any running time was seen', () => {
      const p = zonePrior(tell([outcome('preempted', T0, { resource: 'a' }), T0]), L4, T0);
      assert.equal(p.preemptions, 1);
      assert.equal(p.preemptionsPerHour, undefined);
      assert.equal(p.medianSpotLifetimeHours, undefined);
    });

    it('weights the median by age: recent lifetimes outvote old ones', () => {
      assert.equal(weightedMedian([1, 2, 3], [1, 1, 1]), 2);
      assert.equal(weightedMedian([1, 10], [0.1, 1]), 10);
      assert.equal(weightedMedian([], []), undefined);
      const m = tell(
        [outcome('released', T0, { resource: 'a', lifetimeHours: 1 }), T0],
        [outcome('released', T0, { resource: 'b', lifetimeHours: 1 }), T0],
        [outcome('released', T0 + 24 * HOUR, { resource: 'c', lifetimeHours: 9 }), T0 + 24 * HOUR],
      );
      assert.equal(zonePrior(m, L4, T0 + 24 * HOUR).medianSpotLifetimeHours, 9);
    });

    it('lists every remembered zone sorted', () => {
      const m = tell([outcome('stockout', T0, { zone: 'us-east1-b' }), T0], [outcome('stockout', T0), T0]);
      assert.deepEqual(zonePriors(m, T0).map((p) => p.zone), ['us-central1-a', 'us-east1-b']);
    });
  });

  describe('told twice, counted once', () => {
    it('counts a preemption the run and the observer both tell once, and takes the lifetime from whichever has it', () => {
      const m = tell([outcome('preempted', T0, { resource: 'vm-1' }), T0], [outcome('preempted', T0, { resource: 'vm-1', lifetimeHours: 2 }), T0], [outcome('preempted', T0, { resource: 'vm-1', lifetimeHours: 2 }), T0]);
      const p = zonePrior(m, L4, T0);
      assert.equal(p.preemptions, 1);
      assert.equal(p.exposureHours, 2);
      assert.equal(m.records[0].lifetimes.length, 1);
    });

    it('returns the same memory for an outcome that adds nothing', () => {
      const m = tell([outcome('stockout', T0, { resource: 'a' }), T0]);
      assert.equal(record(m, outcome('stockout', T0, { resource: 'a' }), T0), m);
    });
  });

  describe('bounds and forgetting', () => {
    it('forgets a record once its evidence has decayed away and its stockout is a day old', () => {
      const m = tell([outcome('stockout', T0, { resource: 'a' }), T0]);
      assert.equal(prune(m, T0 + 23 * HOUR).records.length, 1);
      assert.equal(prune(m, T0 + 24 * HOUR).records.length, 1, 'a stockout still weighs 1/16 after a day');
      assert.equal(prune(m, T0 + 48 * HOUR).records.length, 0);
    });

    it('stays bounded in records, lifetimes and de-duplication keys however much it is told', () => {
      let m = emptyMemory();
      const many = Math.max(MAX_RECORDS, MAX_COUNTED) + 50;
      for (let i = 0; i < many; i++) m = record(m, outcome('released', T0 + i, { zone: `zone-${i}`, resource: `vm-${i}`, lifetimeHours: 1 }), T0 + i);
      for (let i = 0; i < MAX_LIFETIMES + 5; i++) m = record(m, outcome('released', T0 + 10_000 + i, { resource: `again-${i}`, lifetimeHours: i }), T0 + 10_000 + i);
      assert.equal(m.records.length, MAX_RECORDS);
      assert.ok(m.records.every((r) => r.lifetimes.length <= MAX_LIFETIMES));
      assert.equal(m.records.find((r) => r.zone === L4.zone)!.lifetimes.at(-1)![0], MAX_LIFETIMES + 4, 'the newest lifetimes are kept');
      assert.equal(m.counted.length, MAX_COUNTED);
      assert.ok(m.records.some((r) => r.zone === `zone-${many - 1}`), 'the most recent record is kept');
      assert.ok(JSON.stringify(m).length < 512 * 1024, 'well inside one Temporal payload');
    });

    it('survives JSON (continue-as-new, a query) unchanged', () => {
      const m = tell([outcome('stockout', T0, { resource: 'a' }), T0], [outcome('preempted', T0, { resource: 'b', lifetimeHours: 1.5 }), T0]);
      assert.deepEqual(JSON.parse(JSON.stringify(m)), m);
    });

    it('keeps one run\'s accelerators when a run reads it', () => {
      const m = tell([outcome('stockout', T0), T0], [outcome('stockout', T0, { accelerator: 'nvidia-a100-80gb' }), T0]);
      assert.deepEqual(sliceFor(m, ['nvidia-l4']).records.map((r) => r.accelerator), ['nvidia-l4']);
      assert.deepEqual(memoryFor(m, [offer('us-east1-b', 0.2)]).records, []);
    });
  });

  it('lets in only well-formed outcomes (signals come from outside)', () => {
    assert.equal(isZoneOutcome(outcome('stockout', T0)), true);
    assert.equal(isZoneOutcome({ ...outcome('stockout', T0), model: 'CHEAP' }), false);
    assert.equal(isZoneOutcome({ ...outcome('stockout', T0), kind: 'exploded' }), false);
    assert.equal(isZoneOutcome({ ...outcome('released', T0), lifetimeHours: -1 }), false);
    assert.equal(isZoneOutcome({ ...outcome('stockout', T0), zone: '' }), false);
    assert.equal(isZoneOutcome({ ...outcome('stockout', T0), at: 'yesterday' }), false);
    assert.equal(isZoneOutcome(null), false);
  });
});

describe('a run and the zone memory', () => {
  function attempt(n: number, outcome: Attempt['outcome'], extra: Partial<Attempt> = {}): Attempt {
    return { attempt: n, ref: { backend: 'gce', name: `vm-${n}`, zone: 'us-central1-a' }, offer: offer('us-central1-a', 0.2), outcome, released: true, ...extra };
  }

  it('tells a stockout, a preemption with how long the VM ran, and a released VM\'s lifetime; not quota or conflicts', () => {
    const ran = { startedAt: new Date(T0).toISOString(), stoppedAt: new Date(T0 + 2 * HOUR).toISOString() };
    assert.deepEqual(outcomeOf(attempt(1, AttemptOutcome.Stockout), T0), { ...L4, region: 'us-central1', resource: 'vm-1', kind: 'stockout', at: T0 });
    assert.deepEqual(outcomeOf(attempt(2, AttemptOutcome.Preempted, ran), T0 + 3 * HOUR), { ...L4, region: 'us-central1', resource: 'vm-2', kind: 'preempted', at: T0 + 2 * HOUR, lifetimeHours: 2 });
    assert.equal(outcomeOf(attempt(3, AttemptOutcome.Completed, ran), T0 + 3 * HOUR)?.kind, 'released');
    assert.equal(outcomeOf(attempt(4, AttemptOutcome.Completed), T0), undefined, 'a VM that never ran tells nothing');
    assert.equal(outcomeOf(attempt(5, AttemptOutcome.QuotaExceeded), T0), undefined);
    assert.equal(outcomeOf(attempt(6, AttemptOutcome.Conflict), T0), undefined);
  });

  it('tells each released attempt once', () => {
    const attempts = [attempt(1, AttemptOutcome.Stockout), attempt(2, AttemptOutcome.Running, { released: false })];
    const first = outcomesToTell(attempts, new Set(), T0);
    assert.deepEqual(first.attempts, [1]);
    assert.equal(first.outcomes.length, 1);
    assert.deepEqual(outcomesToTell(attempts, new Set([1]), T0).outcomes, []);
  });

  describe('placement', () => {
    const WORKFLOW = 'run-7';
    const EXEC = executionToken('first');
    const spec = parseSpec({ command: ['python', 'train.py'], checkpoint: { uri: 'gs://ckpt/run' }, resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] }, pricing: { mode: 'spot' }, recovery: { zoneCooldown: '30m' } });
    const OFFERS = [offer('us-central1-a', 0.2), offer('us-east1-b', 0.25), offer('europe-west4-a', 0.3)];
    const context = (nowMs: number): Context => ({ nowMs, workflowId: WORKFLOW, execution: EXEC, continueAsNewSuggested: false, attemptsAtStart: 0 });

    function firstTry(zoneMemory: ZoneMemory | undefined, nowMs: number): { zone: string; command: Command } {
      const run = { state: admitted(initialState(WORKFLOW, nowMs, undefined, undefined), nowMs) };
      stepOn(run, spec, { kind: 'start' }, context(nowMs));
      const event: RunEvent = { kind: 'offers', offers: OFFERS, ...(zoneMemory ? { zoneMemory } : {}) };
      const command = stepOn(run, spec, event, context(nowMs));
      return { zone: run.state.attempts[0]?.offer.zone, command };
    }

    const stockedOut = tell([outcome('stockout', T0, { resource: 'other-run-vm' }), T0]);

    it('skips the cheapest zone while another run\'s stockout there cools down', () => {
      assert.equal(firstTry(undefined, T0 + 60_000).zone, 'us-central1-a', 'without the memory the cheapest zone is first');
      assert.equal(firstTry(stockedOut, T0 + 60_000).zone, 'us-east1-b');
    });

    it('tries it again once the cooldown is over, and for another accelerator at once', () => {
      assert.equal(firstTry(stockedOut, T0 + 31 * 60_000).zone, 'us-central1-a');
      const a100 = tell([outcome('stockout', T0, { accelerator: 'nvidia-a100-80gb' }), T0]);
      assert.equal(firstTry(a100, T0 + 60_000).zone, 'us-central1-a');
    });

    it('ranks a cooling zone last rather than dropping it: the only zone is still tried', () => {
      const policy = { nowMs: T0 + 60_000, cooldownSeconds: 1800, expectedHours: 1, models: ['SPOT'] as const };
      assert.deepEqual(rankWithMemory(OFFERS, stockedOut, policy).map((o) => o.zone), ['us-east1-b', 'europe-west4-a', 'us-central1-a']);
      assert.deepEqual(rankWithMemory([OFFERS[0]], stockedOut, policy).map((o) => o.zone), ['us-central1-a']);
    });

    it('gives the auto policy the memory\'s stockouts as events and its spot history as a first state', () => {
      assert.deepEqual(rememberedEvents(stockedOut), [{ zone: 'us-central1-a', region: 'us-central1', provisioningModel: 'SPOT', kind: 'stockout', at: T0, accelerator: 'nvidia-l4' }]);
      const m = tell([outcome('preempted', T0, { resource: 'a', lifetimeHours: 2 }), T0], [outcome('released', T0, { resource: 'b', lifetimeHours: 2 }), T0]);
      const seeded = { stats: memoryStats(m, T0 + 6 * HOUR, T0 + 6 * HOUR) };
      assert.deepEqual(
        { upHours: seeded.stats.zones['us-central1-a'].upHours, preemptions: seeded.stats.zones['us-central1-a'].preemptions, last: seeded.stats.zones['us-central1-a'].last },
        { upHours: 2, preemptions: 0.5, last: null },
      );
      assert.deepEqual(memoryStats(undefined, T0, T0).zones, {});
    });
  });
});

describe('the fleet observer and the zone memory', () => {
  const ref = { backend: 'gce' as const, name: 'st-run-1-a1', zone: 'us-central1-a' };
  const owner = { run: 'run-1', execution: 'e'.repeat(14), attempt: 1 };
  const key = `${ref.zone}/${ref.name}`;
  function fleet(preempted: boolean | undefined): FleetMemory {
    const entry: WatchedResource = { ref, owner, lifecycle: 'terminated', preempted: preempted ?? false, agent: {}, absentLooks: 0 };
    return { resources: preempted === undefined ? {} : { [key]: entry }, tokens: 0, tokensAtMs: T0, budgetScale: 1 };
  }
  const listed = (extra: Partial<FleetResource>): FleetResource[] => [{ ref, owner, lifecycle: 'terminated', lastStartAt: new Date(T0).toISOString(), ...extra }];

  it('tells each preemption once, as it is first seen, with how long the VM ran', () => {
    const stopped = new Date(T0 + 2 * HOUR).toISOString();
    assert.deepEqual(fleetPreemptions(fleet(false), fleet(true), listed({ accelerator: 'nvidia-l4', provisioningModel: 'SPOT', lastStopAt: stopped }), T0 + 3 * HOUR), [
      { zone: ref.zone, accelerator: 'nvidia-l4', model: 'SPOT', kind: 'preempted', at: T0 + 2 * HOUR, resource: ref.name, lifetimeHours: 2 },
    ]);
    assert.equal(fleetPreemptions(fleet(undefined), fleet(true), listed({ accelerator: 'nvidia-l4' }), T0 + HOUR).length, 1, 'new to this observer and already preempted');
    assert.deepEqual(fleetPreemptions(fleet(true), fleet(true), listed({ accelerator: 'nvidia-l4' }), T0 + HOUR), [], 'already told');
    assert.deepEqual(fleetPreemptions(fleet(false), fleet(false), listed({ accelerator: 'nvidia-l4' }), T0 + HOUR), [], 'not preempted');
  });

  it('takes a VM still stopping (no stop recorded yet) to have run until now, and leaves one of unknown accelerator to its run', () => {
    const [told] = fleetPreemptions(fleet(false), fleet(true), listed({ accelerator: 'nvidia-l4', lastStopAt: new Date(T0 - HOUR).toISOString() }), T0 + HOUR);
    assert.equal(told.lifetimeHours, 1);
    assert.deepEqual(fleetPreemptions(fleet(false), fleet(true), listed({}), T0 + HOUR), []);
  });
});

describe('sterna zones', () => {
  it('prints exactly the named keys, null where the memory has no figure, and a table with the same facts', () => {
    const m = tell([outcome('stockout', T0, { resource: 'a' }), T0], [outcome('preempted', T0, { zone: 'us-east1-b', resource: 'b', lifetimeHours: 2 }), T0]);
    const rows = zonePriors(m, T0 + 60_000).map(zoneRow);
    assert.deepEqual(rows, [
      { zone: 'us-central1-a', accelerator: 'nvidia-l4', model: 'SPOT', nodes: 1, lastStockout: new Date(T0).toISOString(), preemptionsPerHour: null, medianSpotLifetimeHours: null, inCooldown: true },
      { zone: 'us-east1-b', accelerator: 'nvidia-l4', model: 'SPOT', nodes: 1, lastStockout: null, preemptionsPerHour: 0.5, medianSpotLifetimeHours: 2, inCooldown: false },
    ]);
    const table = zoneTable(rows);
    assert.deepEqual(table[0].split(/\s{2,}/), ['ZONE', 'ACCELERATOR', 'MODEL', 'NODES', 'LAST STOCKOUT', 'PREEMPTIONS/H', 'MEDIAN SPOT LIFETIME', 'COOLDOWN']);
    assert.deepEqual(table[1].split(/\s{2,}/), ['us-central1-a', 'nvidia-l4', 'SPOT', '1', new Date(T0).toISOString(), '-', '-', 'yes']);
    assert.deepEqual(table[2].split(/\s{2,}/), ['us-east1-b', 'nvidia-l4', 'SPOT', '1', '-', '0.50', '2.0 h', 'no']);
  });
});
