import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { loadTrace, availableAt } from '../../emulator/trace';
import { observation } from '../../workflows/auto-policy';
import { statusQuery } from '../../workflows/messages';
import { rankOffers } from '../../workflows/placement';
import { sternaPolicy } from '../../workflows/policy';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';

const TRACE = join(__dirname, '..', '..', '..', '..', 'shared', 'traces', 'aws-v100-9zone-2023-02.json');

/** A tick where the cheapest spot zone has no capacity but others do. */
function interestingTick(): number {
  const trace = loadTrace(TRACE);
  const byPrice = [...trace.entries].sort((a, b) => (typeof a.spotPrice === 'number' ? a.spotPrice : 0) - (typeof b.spotPrice === 'number' ? b.spotPrice : 0));
  for (let tick = 0; tick < trace.ticks; tick++) {
    const up = trace.entries.filter((e) => availableAt(e, tick) && availableAt(e, tick + 1));
    if (!availableAt(byPrice[0], tick) && up.length >= 3) return tick;
  }
  throw new Error('no such tick in the trace');
}

describe('auto mode on a replayed spot trace', function () {
  this.timeout(240_000);
  let stack: Stack;
  const tick = interestingTick();
  before(async () => {
    // Time factor 1: a trace tick (195 s) outlasts the run, so availability holds still.
    stack = await startStack({ trace: TRACE, traceStartTick: tick, timeFactor: 1 });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  it('runs where the deadline-aware policy decides, asking it again after each stockout', async () => {
    const spec = exampleSpec({
      resources: { accelerators: [{ type: 'nvidia-tesla-v100', count: 1 }] },
      pricing: { mode: 'auto' },
      time: { deadlineAfter: '3h', expectedDuration: '1h' },
    });
    const offers = await stack.provider.findOffers({ accelerators: [{ type: 'nvidia-tesla-v100', count: 1 }], provisioningModels: ['SPOT', 'STANDARD'] });
    const run = await stack.start(spec);
    const result = await run.result();
    const { timeline } = await run.query(statusQuery);
    const decisions = timeline.filter((e) => e.kind === 'policy-choice').map((e) => [e.model === 'SPOT' ? 'spot' : 'on-demand', e.zone]);
    assert.ok(decisions.length >= 1, 'the policy was asked');

    // The first choice is exactly what the policy says for what the run knew then.
    const now = Date.now();
    const first = sternaPolicy.decide(sternaPolicy.initialState(), observation({
      offers,
      events: [],
      placement: { nowMs: now, cooldownSeconds: 1800, expectedHours: 1, models: ['SPOT', 'STANDARD'] },
      nowMs: now,
      runStartMs: now,
      deadlineMs: now + 3 * 3600_000,
      remainingWorkSeconds: 3600,
      changeoverSeconds: 120,
      stepSeconds: 300,
      current: { kind: 'idle' },
    })).action;
    assert.deepEqual(decisions[0], [first.kind, first.kind === 'idle' ? undefined : first.zone]);

    // Every attempt is the decision just before it, and the run ends where spot was up.
    const attempts = result.attempts.map((a) => [a.provisioningModel === 'SPOT' ? 'spot' : 'on-demand', a.zone]);
    assert.deepEqual(attempts, decisions);
    const trace = loadTrace(TRACE);
    const last = result.attempts[result.attempts.length - 1];
    assert.equal(last.outcome, 'completed');
    if (last.provisioningModel === 'SPOT') assert.ok(availableAt(trace.entries.find((e) => e.zone === last.zone)!, tick), `${last.zone} has spot at tick ${tick}`);
    for (const a of result.attempts.slice(0, -1)) {
      assert.equal(a.outcome, 'stockout');
      assert.ok(!availableAt(trace.entries.find((e) => e.zone === a.zone)!, tick), `${a.zone} really had no spot at tick ${tick}`);
    }
    assert.ok(rankOffers(offers, [], { nowMs: now, cooldownSeconds: 1800, expectedHours: 1, models: ['SPOT'] }).length > 0);
  });
});
