/**
 * The zone memory keeps a gang's attempts apart from single VMs' (per node count), and a
 * run of N nodes reads only what says something of N nodes: stockouts of no more nodes,
 * running time and preemptions of no fewer.
 */
import { strict as assert } from 'node:assert';
import { AttemptOutcome, type Attempt } from '../../workflows/run/state';
import type { Offer } from '../../workflows/types';
import { outcomeOf } from '../../workflows/zones/from-run';
import { emptyMemory, isZoneOutcome, keyOf, record, zonePrior, type ZoneMemory, type ZoneOutcome } from '../../workflows/zones/memory';
import { memoryStats, rankWithMemory, rememberedEvents } from '../../workflows/zones/prior';
import { offerIn } from '../helpers/run-harness';

const T0 = Date.parse('2026-12-01T00:00:00Z');
const KEY = { zone: 'us-central1-a', accelerator: 'nvidia-l4', model: 'SPOT' } as const;

function outcome(kind: ZoneOutcome['kind'], resource: string, extra: Partial<ZoneOutcome> = {}): ZoneOutcome {
  return { ...KEY, region: 'us-central1', kind, at: T0, resource, ...extra };
}

function tell(...outcomes: ZoneOutcome[]): ZoneMemory {
  return outcomes.reduce((m, o) => record(m, o, T0), emptyMemory());
}

/** A spot L4 offer of `nodes` nodes (absent: one VM), priced for all of them as the GCE provider prices a gang. */
function offer(zone: string, price: number, nodes?: number): Offer {
  return offerIn(zone, price * (nodes ?? 1), { onDemandPricePerHour: 0.7 * (nodes ?? 1), ...(nodes !== undefined ? { nodes } : {}) });
}

describe('zone memory: gangs are remembered per node count', () => {
  it('a gang\'s attempt tells its node count; a single VM\'s tells none (as before gangs were told apart)', () => {
    const attempt = (o: Offer): Attempt => ({ attempt: 1, ref: { backend: 'gce', name: 'run-a1', zone: o.zone }, offer: o, outcome: AttemptOutcome.Stockout, released: true });
    assert.equal(outcomeOf(attempt(offer('us-central1-a', 0.2, 8)), T0)?.nodes, 8);
    assert.equal('nodes' in outcomeOf(attempt(offer('us-central1-a', 0.2)), T0)!, false);
    assert.ok(isZoneOutcome(outcome('stockout', 'a', { nodes: 4 })));
    assert.equal(isZoneOutcome(outcome('stockout', 'a', { nodes: 0 })), false, 'a gang of no node is refused');
    assert.equal(isZoneOutcome(outcome('stockout', 'a', { nodes: 2.5 })), false);
  });

  it('keeps a gang\'s record apart from the single VMs\' of the same zone x accelerator x model', () => {
    const m = tell(outcome('stockout', 'gang', { nodes: 8 }), outcome('preempted', 'vm', { lifetimeHours: 3 }));
    assert.deepEqual(m.records.map(keyOf).sort(), ['us-central1-a/nvidia-l4/SPOT', 'us-central1-a/nvidia-l4/SPOT/x8']);
    assert.equal(zonePrior(m, KEY, T0).stockouts, 0, 'one VM: no stockout of its own');
    assert.equal(zonePrior(m, { ...KEY, nodes: 8 }, T0).stockouts, 1);
    assert.equal(zonePrior(m, { ...KEY, nodes: 8 }, T0).nodes, 8);
  });

  it('a stockout of M nodes is read by runs of M or more: none for M, none for more; it says nothing of fewer', () => {
    const m = tell(outcome('stockout', 'gang-of-4', { nodes: 4 }));
    assert.deepEqual(rememberedEvents(m, 1), [], 'one VM may still fit where four did not');
    assert.deepEqual(rememberedEvents(m, 2), []);
    assert.equal(rememberedEvents(m, 4).length, 1);
    assert.equal(rememberedEvents(m, 16).length, 1);
    assert.equal(rememberedEvents(m).length, 0, 'a reader that names no size is a single VM');
    // Placement: the cooling zone goes last for the gang of 8, not for a single VM's offers.
    const policy = { nowMs: T0 + 60_000, cooldownSeconds: 1800, expectedHours: 1, models: ['SPOT'] as const };
    const zones = (os: Offer[]) => rankWithMemory(os, m, policy).map((o) => o.zone);
    assert.deepEqual(zones([offer('us-central1-a', 0.2, 8), offer('us-east1-b', 0.3, 8)]), ['us-east1-b', 'us-central1-a']);
    assert.deepEqual(zones([offer('us-central1-a', 0.2), offer('us-east1-b', 0.3)]), ['us-central1-a', 'us-east1-b']);
  });

  it('a single VM\'s stockout is read by every gang: no capacity for one is none for more', () => {
    const m = tell(outcome('stockout', 'vm'));
    assert.equal(rememberedEvents(m, 1).length, 1);
    assert.equal(rememberedEvents(m, 8).length, 1);
  });

  it('capacity a gang of M held (its hours and preemptions) is read by runs of M or fewer; a gang of more reads none of a smaller one\'s', () => {
    const m = tell(outcome('preempted', 'gang-of-8', { nodes: 8, lifetimeHours: 4 }), outcome('released', 'vm', { lifetimeHours: 2 }));
    const seeded = (nodes: number) => {
      const z = memoryStats(m, T0, T0, nodes).zones['us-central1-a'];
      return z === undefined ? undefined : { upHours: z.upHours, preemptions: z.preemptions };
    };
    assert.deepEqual(seeded(1), { upHours: 6, preemptions: 1 }, 'one VM: its own 2 h and the gang of 8\'s 4 h and preemption');
    assert.deepEqual(seeded(8), { upHours: 4, preemptions: 1 }, 'a gang of 8: its size\'s only');
    assert.deepEqual(seeded(16), undefined, 'a gang of 16: nothing here says 16 nodes ran');
    assert.deepEqual(memoryStats(m, T0, T0), memoryStats(m, T0, T0, 1));
  });
});
