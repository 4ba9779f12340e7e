import { strict as assert } from 'node:assert';
import { Period, periodEnd, periodStart } from '../../workflows/teams/period';
import { admissionOf, applyLimits, enqueue, limitsProblem, newTeamState, recordSpend, release, rollOver, settle, spentThisPeriod, teamView, type AdmissionRequest, type TeamState } from '../../workflows/teams/rules';

const T0 = Date.parse('2026-12-02T10:00:00Z'); // a Wednesday

function ask(state: TeamState, runId: string, over: Partial<AdmissionRequest> = {}, at = T0) {
  enqueue(state, { runId, gpus: 1, reserveUsd: 0, priority: 3, askedAt: at, ...over });
  return settle(state, at);
}

const outcomes = (decisions: ReturnType<typeof settle>) => decisions.map((d) => `${d.runId}:${d.outcome}`);

describe('team admission rules (pure)', () => {
  it('cuts periods at UTC midnight, Monday and the first of the month', () => {
    assert.equal(new Date(periodStart(Period.Day, T0)).toISOString(), '2026-12-02T00:00:00.000Z');
    assert.equal(new Date(periodStart(Period.Week, T0)).toISOString(), '2026-11-30T00:00:00.000Z');
    assert.equal(new Date(periodStart(Period.Month, T0)).toISOString(), '2026-12-01T00:00:00.000Z');
    assert.equal(new Date(periodEnd(Period.Month, periodStart(Period.Month, T0))).toISOString(), '2027-01-01T00:00:00.000Z');
    assert.equal(new Date(periodStart(Period.Week, Date.parse('2026-11-29T23:59:59Z'))).toISOString(), '2026-11-23T00:00:00.000Z', 'a Sunday belongs to the week before');
  });

  it('admits runs while the team is under its GPU quota and queues the rest', () => {
    const s = newTeamState('ml', T0);
    applyLimits(s, { maxGpus: 2 }, T0);
    assert.deepEqual(outcomes(ask(s, 'a')), ['a:admitted']);
    assert.deepEqual(outcomes(ask(s, 'b')), ['b:admitted']);
    const third = ask(s, 'c');
    assert.deepEqual(outcomes(third), ['c:queued']);
    assert.match((third[0] as { reason: string }).reason, /holds 2 of its 2 GPUs/);
    assert.deepEqual(outcomes(settle(s, T0 + 1)), [], 'a queued run is told once');
    release(s, 'a', 1.5);
    assert.deepEqual(outcomes(settle(s, T0 + 2)), ['c:admitted']);
  });

  it('answers for each run as the ledger stands, the only admission a run acts on: admitted, queued where it waits, refused, or unknown', () => {
    const s = newTeamState('ml', T0);
    applyLimits(s, { maxGpus: 1, budgetUsd: 10 }, T0);
    ask(s, 'running');
    ask(s, 'waiting', {}, T0 + 1);
    ask(s, 'too-dear', { reserveUsd: 50 }, T0 + 2);
    assert.deepEqual(admissionOf(s, 'running'), { runId: 'running', outcome: 'admitted', team: 'ml', gpus: 1 });
    assert.deepEqual(admissionOf(s, 'waiting'), { runId: 'waiting', outcome: 'queued', team: 'ml', position: 1, reason: 'the team holds 1 of its 1 GPUs' });
    assert.equal(admissionOf(s, 'too-dear')?.outcome, 'refused', 'a refused run that asks again hears the same');
    assert.equal(admissionOf(s, 'never-asked'), undefined);
    release(s, 'running', 0);
    settle(s, T0 + 3);
    assert.equal(admissionOf(s, 'waiting')?.outcome, 'admitted');
  });

  it('orders the queue by priority, then by age, and never lets a later run jump a blocked one', () => {
    const s = newTeamState('ml', T0);
    applyLimits(s, { maxGpus: 2 }, T0);
    ask(s, 'running', { gpus: 2 });
    ask(s, 'old-low', { priority: 4 }, T0 + 1);
    ask(s, 'new-high', { priority: 1 }, T0 + 2);
    ask(s, 'older-big-high', { priority: 1, gpus: 2 }, T0 + 1);
    assert.deepEqual(teamView(s).queue.map((q) => q.runId), ['older-big-high', 'new-high', 'old-low']);
    release(s, 'running', 0);
    // The big urgent run goes first; the small ones behind it wait even though one would fit.
    assert.deepEqual(outcomes(settle(s, T0 + 3)), ['older-big-high:admitted']);
    release(s, 'older-big-high', 0);
    assert.deepEqual(outcomes(settle(s, T0 + 4)), ['new-high:admitted', 'old-low:admitted']);
  });

  it('refuses a run that would exceed the budget, naming the team, period and amounts', () => {
    const s = newTeamState('vision', T0);
    applyLimits(s, { budgetUsd: 10, period: Period.Week }, T0);
    ask(s, 'a', { reserveUsd: 4 });
    recordSpend(s, 'a', 4);
    release(s, 'a', 7);
    const [refused] = ask(s, 'b', { reserveUsd: 5 });
    assert.equal(refused.outcome, 'refused');
    if (refused.outcome !== 'refused') return;
    assert.equal(refused.failure, 'BudgetExceeded');
    assert.match(refused.message, /team vision: week budget \$10\.00 \(period from 2026-11-30T00:00:00\.000Z\) would be exceeded: spent \$7\.00, this run may spend \$5\.00/);
    assert.deepEqual(refused.details, { team: 'vision', period: 'week', periodStart: '2026-11-30T00:00:00.000Z', budgetUsd: 10, spentUsd: 7, runBudgetUsd: 5 });
    assert.deepEqual(outcomes(ask(s, 'c', { reserveUsd: 3 })), ['c:admitted'], 'what is left still fits a smaller run');
  });

  it('queues a run that only running reservations keep out, and admits it when the budget is raised', () => {
    const s = newTeamState('nlp', T0);
    applyLimits(s, { budgetUsd: 10, period: Period.Day }, T0);
    ask(s, 'a', { reserveUsd: 8 });
    assert.deepEqual(outcomes(ask(s, 'b', { reserveUsd: 5 })), ['b:queued']);
    assert.equal(limitsProblem({ budgetUsd: -1 }, s.limits), 'budgetUsd must be a number of USD above 0 and at most 10000000 (or null to remove the budget), got -1');
    applyLimits(s, { budgetUsd: 20 }, T0);
    assert.deepEqual(outcomes(settle(s, T0 + 1)), ['b:admitted']);
    assert.deepEqual(s.limits, { budget: { usd: 20, period: 'day' } });
  });

  it('counts spend exactly per run, keeps it across the period and starts again at zero in the next', () => {
    const s = newTeamState('ml', T0);
    applyLimits(s, { budgetUsd: 100, period: Period.Day }, T0);
    ask(s, 'a');
    ask(s, 'b');
    recordSpend(s, 'a', 0.1);
    recordSpend(s, 'b', 0.2);
    release(s, 'a', 0.30000000000000004);
    assert.deepEqual(teamView(s).runs, [
      { runId: 'a', spentUsd: 0.30000000000000004, running: false },
      { runId: 'b', spentUsd: 0.2, running: true },
    ]);
    assert.equal(spentThisPeriod(s), 0.30000000000000004 + 0.2);
    assert.equal(rollOver(s, T0 + 86_400_000), true);
    assert.equal(spentThisPeriod(s), 0, 'b spent its 0.2 in the closed day');
    recordSpend(s, 'b', 0.5);
    assert.equal(spentThisPeriod(s), 0.5 - 0.2);
    assert.deepEqual(s.history.map((h) => [h.start, h.spentUsd]), [['2026-12-02T00:00:00.000Z', 0.30000000000000004 + 0.2]]);
  });

  it('refuses a run larger than the quota, a run cancelled while queued leaves the queue, and an ask is idempotent', () => {
    const s = newTeamState('ml', T0);
    applyLimits(s, { maxGpus: 1 }, T0);
    const [big] = ask(s, 'big', { gpus: 4 });
    assert.equal(big.outcome === 'refused' && big.failure, 'QuotaExceeded');
    ask(s, 'a');
    assert.deepEqual(enqueue(s, { runId: 'a', gpus: 1, reserveUsd: 0, priority: 3, askedAt: T0 }), { runId: 'a', outcome: 'admitted', team: 'ml' });
    ask(s, 'b');
    release(s, 'b', 0);
    assert.deepEqual(teamView(s).queue, []);
    assert.equal(limitsProblem({ maxGpus: 1.5 }, s.limits)?.startsWith('maxGpus must be a whole number'), true);
    assert.equal(limitsProblem({ period: 'year', budgetUsd: 1 }, s.limits), 'period must be one of day, week, month, got "year"');
    assert.equal(limitsProblem({ gpus: 1 }, s.limits), 'unknown field gpus; a team has budgetUsd, period and maxGpus');
  });
});
