import { strict as assert } from 'node:assert';
import { executionToken, isOwnedBy, resourceLabels, resourceName, runKey } from '../../workflows/naming';
import { rankOffers, type ZoneEvent } from '../../workflows/placement';
import { chooseModels } from '../../workflows/pricing';
import type { Offer } from '../../workflows/types';

const GCE_NAME = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
const LABEL_VALUE = /^[a-z0-9_-]{0,63}$/;

function offer(zone: string, price: number, model: 'SPOT' | 'STANDARD' = 'SPOT'): Offer {
  return { backend: 'gce', zone, region: zone.slice(0, -2), accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: model, pricePerHour: price, onDemandPricePerHour: 0.7, quotaAvailable: true };
}

describe('idempotent names', () => {
  const exec = executionToken('0193a5c2-7d51-7c3e-9f1e-6b1f2d3c4e5f');

  it('derives valid, stable, distinct GCE names from any workflow id', () => {
    for (const id of ['run-1', 'Team A / Llama FT #7', 'x'.repeat(300), '---', 'ünïcødé']) {
      const name = resourceName(id, exec, 3);
      assert.match(name, GCE_NAME, name);
      assert.equal(name, resourceName(id, exec, 3), 'stable');
      assert.notEqual(name, resourceName(id, exec, 4), 'attempts differ');
      assert.match(runKey(id), LABEL_VALUE);
    }
    assert.notEqual(resourceName('a'.repeat(100) + '1', exec, 1), resourceName('a'.repeat(100) + '2', exec, 1), 'truncation keeps ids apart');
  });

  it('gives a reused workflow id new names: the execution token is part of every name', () => {
    const other = executionToken('0193a5c2-7d51-7c3e-9f1e-000000000000');
    assert.match(exec, LABEL_VALUE);
    assert.notEqual(exec, other);
    assert.notEqual(resourceName('run-1', exec, 1), resourceName('run-1', other, 1));
  });

  it('labels each resource with its run, execution and attempt next to the cost labels', () => {
    const owner = { run: runKey('run-1'), execution: exec, attempt: 2 };
    const labels = resourceLabels(owner, { team: 'ml' });
    assert.deepEqual(labels, { team: 'ml', 'sterna-run': runKey('run-1'), 'sterna-exec': exec, 'sterna-attempt': '2' });
    assert.ok(isOwnedBy(labels, owner));
    assert.ok(!isOwnedBy(labels, { ...owner, attempt: 3 }), 'another attempt');
    assert.ok(!isOwnedBy(labels, { ...owner, execution: executionToken('x') }), 'another execution of the same workflow id');
    assert.ok(!isOwnedBy({ ...labels, 'sterna-exec': undefined as never }, owner), 'no token');
    assert.ok(!isOwnedBy(undefined, owner), 'no labels');
  });
});

describe('placement', () => {
  const policy = { nowMs: 1_000_000_000, cooldownSeconds: 600, expectedHours: 2, models: ['SPOT', 'STANDARD'] as const };

  it('tries the cheapest offer first', () => {
    const ranked = rankOffers([offer('us-east1-b', 0.3), offer('us-central1-a', 0.2), offer('europe-west4-a', 0.25)], [], policy);
    assert.deepEqual(ranked.map((o) => o.zone), ['us-central1-a', 'europe-west4-a', 'us-east1-b']);
  });

  it('skips a zone that preempted this run until its cooldown passes, then penalises it', () => {
    const events: ZoneEvent[] = [{ zone: 'us-central1-a', region: 'us-central1', provisioningModel: 'SPOT', kind: 'preempted', at: policy.nowMs - 60_000 }];
    const offers = [offer('us-central1-a', 0.2), offer('us-east1-b', 0.21)];
    assert.deepEqual(rankOffers(offers, events, policy).map((o) => o.zone), ['us-east1-b']);
    const later = { ...policy, nowMs: policy.nowMs + 600_000 };
    assert.deepEqual(rankOffers(offers, events, later).map((o) => o.zone), ['us-east1-b', 'us-central1-a'], 'a recent failure still costs more than a 5% price gap');
    const muchLater = { ...policy, nowMs: policy.nowMs + 6 * 3600_000 };
    assert.deepEqual(rankOffers(offers, events, muchLater).map((o) => o.zone), ['us-central1-a', 'us-east1-b'], 'and is forgiven in time');
  });

  it('drops offers over the price cap, out of quota or of an unwanted model', () => {
    const offers = [offer('a-1-a', 0.9), { ...offer('b-1-a', 0.2), quotaAvailable: false }, offer('c-1-a', 0.7, 'STANDARD'), offer('d-1-a', 0.3)];
    assert.deepEqual(rankOffers(offers, [], { ...policy, maxPricePerHour: 0.5 }).map((o) => o.zone), ['d-1-a']);
    assert.deepEqual(rankOffers(offers, [], { ...policy, models: ['STANDARD'] }).map((o) => o.zone), ['c-1-a']);
  });
});

describe('spot or on-demand', () => {
  it('follows the user when the mode is spot or on-demand', () => {
    assert.deepEqual(chooseModels('spot'), ['SPOT']);
    assert.deepEqual(chooseModels('on-demand'), ['STANDARD']);
  });
  it('in auto mode without a deadline tries spot first, then on-demand', () => {
    assert.deepEqual(chooseModels('auto'), ['SPOT', 'STANDARD']);
  });
});
