/**
 * What the world hears of a run's steps (workflows/run/effects.ts), server-less: each
 * step's effects as the reducer returns them, the ones the shell carries out beside its
 * action. Notifications have their own file (notify.test.ts).
 */
import { strict as assert } from 'node:assert';
import { SternaPhase } from '../../workflows/search-attributes';
import { SPEND_REPORT_MS } from '../../workflows/run/effects';
import type { Effect } from '../../workflows/run/protocol';
import { Phase } from '../../workflows/run/state';
import { offerIn, RunHarness, specOf } from '../helpers/run-harness';

const OFFERS = [offerIn('us-central1-a', 0.36), offerIn('us-east1-b', 0.4)];

function ofKind<K extends Effect['kind']>(effects: readonly Effect[], kind: K): Extract<Effect, { kind: K }>[] {
  return effects.filter((e): e is Extract<Effect, { kind: K }> => e.kind === kind);
}

describe('a run\'s effects (pure, no server)', () => {
  it('publishes what the web UI shows at every step, the phase among its columns', () => {
    const run = new RunHarness('run-7', specOf());
    run.send({ kind: 'start' });
    const [shown] = ofKind(run.effects, 'publish');
    assert.ok(shown.attributes.some((a) => a.key.name === SternaPhase.name && a.value === Phase.FindingCapacity), JSON.stringify(shown.attributes));
    run.provisioned(OFFERS);
    assert.equal(ofKind(run.effects, 'publish').at(-1)!.attributes.find((a) => a.key.name === SternaPhase.name)?.value, Phase.Staging);
    assert.match(ofKind(run.effects, 'publish').at(-1)!.details, /\*\*Phase\*\* staging in us-central1-a/);
  });

  it('tells the memories how an attempt ended once, at its release, and never again', () => {
    const run = new RunHarness('run-7', specOf());
    run.send({ kind: 'start' });
    const attempt = run.at(10).provisioned(OFFERS);
    run.at(3610).observe(attempt, { lifecycle: 'terminated', preempted: true });
    assert.deepEqual(ofKind(run.effects, 'tell-memories'), [], 'not before it is released');
    run.released(attempt);
    const [told] = ofKind(run.effects, 'tell-memories');
    assert.deepEqual(
      told.outcomes.map((o) => [o.zone, o.kind, o.resource]),
      [['us-central1-a', 'preempted', run.state.attempts[0].ref.name]],
    );
    run.released(attempt);
    assert.deepEqual(ofKind(run.effects, 'tell-memories'), [], 'a repeated release tells nothing');
  });

  it('reports an admitted run\'s spend to its team when an attempt\'s line is final and every ten minutes while one is billed', () => {
    // Its label names `vision`; its namespace, `ml`, is its team, as its ledger answered.
    const run = new RunHarness('run-7', specOf({ labels: { team: 'vision' } }), 'ml');
    run.send({ kind: 'start' });
    const attempt = run.provisioned(OFFERS);
    assert.equal(ofKind(run.effects, 'report-spend').length, 1, 'the first billed step reports');
    run.at(60).observe(attempt, { phase: 'training', step: 1 });
    assert.deepEqual(ofKind(run.effects, 'report-spend'), [], 'not again within ten minutes');
    run.at(SPEND_REPORT_MS / 1000 + 1).send({ kind: 'tick' });
    const [report] = ofKind(run.effects, 'report-spend');
    assert.equal(report.team, 'ml');
    assert.ok(Math.abs(report.totalUsd - (0.36 * (SPEND_REPORT_MS / 1000 + 1)) / 3600) < 1e-9, String(report.totalUsd));
    run.at(SPEND_REPORT_MS / 1000 + 30).observe(attempt, { lifecycle: 'terminated', preempted: true });
    run.released(attempt);
    assert.equal(ofKind(run.effects, 'report-spend').length, 1, 'the released attempt\'s final line is reported at once');
  });

  it('as the run ends: its team gets its GPUs back with its final spend, and the cost report its memo; an update beside only shows', () => {
    // Its label names `vision`; its namespace, `ml`, is its team, as its ledger answered.
    const run = new RunHarness('run-7', specOf({ labels: { team: 'vision' } }), 'ml');
    run.send({ kind: 'start' });
    const attempt = run.provisioned(OFFERS);
    const update = run.apply({ kind: 'budget-set', usd: 50 });
    assert.deepEqual(update.map((e) => e.kind), ['publish']);
    run.at(100).observe(attempt, { phase: 'exited', exitCode: 0, step: 10 });
    assert.equal(run.released(attempt).kind, 'complete');
    const ended = run.apply({ kind: 'ended', phase: Phase.Completed });
    const [team] = ofKind(ended, 'team-ended');
    const [memo] = ofKind(ended, 'cost-memo');
    assert.equal(team.team, 'ml');
    assert.equal(memo.memo.costUsd, team.totalUsd);
    assert.equal(memo.memo.phase, Phase.Completed);
    assert.deepEqual(memo.memo.lines.map((l) => [l.zone, l.attempts]), [['us-central1-a', 1]]);
  });
});
