/**
 * The run's side of team admission through the pure machine, server-less: it asks before
 * it places, waits (asking again if its team stays silent), places once admitted, fails
 * with the team's named failure when refused; and the cost it publishes while it trains.
 */
import { strict as assert } from 'node:assert';
import { executionToken } from '../../workflows/naming';
import { COST_REFRESH_SECONDS, costMemoOf, costRefreshAt } from '../../workflows/run/cost-refresh';
import type { Action as Command, Context, RunEvent } from '../../workflows/run/protocol';
import { stepOn } from '../helpers/run-harness';
import { runTeamOf } from '../../workflows/run/team';
import { initialState, Phase, type RunState } from '../../workflows/run/state';
import { ledger } from '../../workflows/run/views';
import { parseSpec, type RunSpec, type RunSpecInput } from '../../workflows/spec';
import { ADMISSION_REASK_MS, admissionRequestOf } from '../../workflows/run/admission';

const T0 = Date.parse('2026-12-01T00:00:00Z');

const offer = { backend: 'gce' as const, zone: 'us-central1-a', region: 'us-central1', accelerator: 'nvidia-l4', acceleratorCount: 2, machineType: 'g2-standard-8', provisioningModel: 'SPOT' as const, pricePerHour: 0.37, onDemandPricePerHour: 1.1, quotaAvailable: true };
const attempt = (n: number, start: string, stop: string | undefined, outcome: 'preempted' | 'completed' | 'running') => ({
  attempt: n,
  ref: { backend: 'gce' as const, name: `r-${n}`, zone: offer.zone },
  offer,
  outcome,
  startedAt: start,
  stoppedAt: stop,
  released: stop !== undefined,
  createSettled: true,
});

class Run {
  readonly spec: RunSpec;
  state: RunState;
  now = T0;
  constructor(
    overrides: Partial<RunSpecInput> = {},
    /** The namespace it executes in (the workflow's info), when the test gives one. */
    private readonly namespace?: string,
  ) {
    this.spec = parseSpec({ command: ['train'], checkpoint: { uri: 'gs://ckpt/run' }, resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }, { type: 'nvidia-l4', count: 2 }] }, pricing: { mode: 'spot' }, ...overrides });
    this.state = { ...initialState('run-7', T0, this.spec.pricing.budgetUsd, undefined), checked: true };
  }
  send(event: RunEvent, atSeconds = 0): Command {
    this.now = T0 + atSeconds * 1000;
    const context: Context = { nowMs: this.now, workflowId: 'run-7', ...(this.namespace ? { namespace: this.namespace } : {}), execution: executionToken('r'), continueAsNewSuggested: false, attemptsAtStart: 0 };
    return stepOn(this, this.spec, event, context);
  }
}

describe('a run\'s team admission (pure machine)', () => {
  it('asks its team before placing, waits while queued, and places once admitted', () => {
    // The run executes in namespace `vision`: its ledger (the askAdmission activity) says so.
    const run = new Run({ priority: 2, pricing: { mode: 'spot', budgetUsd: 12 } });
    assert.deepEqual(run.send({ kind: 'start' }), { kind: 'ask-admission' });
    assert.equal(run.state.phase, Phase.Queued);
    assert.deepEqual(admissionRequestOf(run.spec, run.state), { runId: 'run-7', gpus: 2, reserveUsd: 12, priority: 2, askedAt: T0 });
    assert.deepEqual(run.send({ kind: 'admission-asked', teamWebhooks: false, team: 'vision' }), { kind: 'wait', untilMs: T0 + ADMISSION_REASK_MS });
    assert.deepEqual(run.send({ kind: 'admission', decision: { runId: 'run-7', outcome: 'queued', team: 'vision', position: 2, reason: 'the team holds 4 of its 4 GPUs' } }, 5), { kind: 'wait', untilMs: T0 + ADMISSION_REASK_MS });
    assert.deepEqual(run.state.admission, { team: 'vision', teamWebhooks: false, status: 'queued', askedAt: T0, firstAskedAt: T0, position: 2 });
    // Silence: it asks again (the team dedupes), keeping its place by its first ask.
    assert.deepEqual(run.send({ kind: 'tick' }, ADMISSION_REASK_MS / 1000), { kind: 'ask-admission' });
    assert.equal(admissionRequestOf(run.spec, run.state).askedAt, T0);
    run.send({ kind: 'admission-asked', teamWebhooks: false, team: 'vision' }, ADMISSION_REASK_MS / 1000);
    assert.deepEqual(run.send({ kind: 'admission', decision: { runId: 'run-7', outcome: 'admitted', team: 'vision' } }, 700), { kind: 'find-capacity' });
    assert.deepEqual(run.state.timeline.map((t) => t.kind), ['run-started', 'queued', 'queued', 'admitted']);
  });

  it('fails with the team\'s refusal, its failure type and message unchanged', () => {
    const run = new Run();
    run.send({ kind: 'start' });
    run.send({ kind: 'admission-asked', team: 'default' });
    const refused = run.send({ kind: 'admission', decision: { runId: 'run-7', outcome: 'refused', team: 'default', failure: 'BudgetExceeded', message: 'team default: month budget $1.00 …', details: { team: 'default' } } });
    assert.deepEqual(refused, { kind: 'fail', failure: 'BudgetExceeded', message: 'team default: month budget $1.00 …', details: { team: 'default' } });
    assert.equal(run.state.admission?.team, 'default', 'a run in the dev server\'s namespace belongs to its team, `default`');
  });

  it('is the namespace it runs in, never its label: it shows and reports as that team from its first step', () => {
    const run = new Run({ labels: { team: 'team-a' } }, 'team-a');
    run.send({ kind: 'start' });
    assert.equal(run.state.namespace, 'team-a');
    assert.equal(runTeamOf(run.state), 'team-a', 'its namespace, before the ledger says so');
    assert.equal(run.state.admission?.team, undefined, 'the charged team is the ledger\'s to say');
    run.send({ kind: 'admission-asked', teamWebhooks: false, team: 'team-a' });
    assert.equal(run.state.admission?.team, 'team-a');
    run.send({ kind: 'admission', decision: { runId: 'run-7', outcome: 'admitted', team: 'team-a' } });
    assert.equal(runTeamOf(run.state), 'team-a');
    assert.equal(costMemoOf(run.state, run.spec, run.now).team, 'team-a');
    // A label is not a team: in the dev server's namespace, the team is `default`, like any other.
    const labelled = new Run({ labels: { team: 'vision' } }, 'default');
    labelled.send({ kind: 'start' });
    assert.equal(runTeamOf(labelled.state), 'default');
    assert.equal(costMemoOf(labelled.state, labelled.spec, labelled.now).team, 'default');
  });

  it('kept before it knew its namespace, it is the team its ledger answered, and no team before that (never its label)', () => {
    const run = new Run({ labels: { team: 'vision' } });
    run.send({ kind: 'start' });
    assert.equal(runTeamOf(run.state), undefined);
    run.send({ kind: 'admission-asked', teamWebhooks: false, team: 'team-a' });
    assert.equal(runTeamOf(run.state), 'team-a');
  });

  it('takes its team from the ledger\'s admission when that comes before the ask\'s own answer', () => {
    const run = new Run();
    run.send({ kind: 'start' });
    assert.deepEqual(run.send({ kind: 'admission', decision: { runId: 'run-7', outcome: 'admitted', team: 'team-b' } }), { kind: 'find-capacity' });
    assert.equal(runTeamOf(run.state), 'team-b');
  });

  it('does not ask once an attempt exists', () => {
    const run = new Run();
    run.state.attempts.push(attempt(1, '2026-12-01T00:00:00Z', undefined, 'running'));
    run.state.phase = Phase.Training;
    assert.equal(run.send({ kind: 'tick' }).kind, 'ensure-observer');
    assert.equal(run.state.admission, undefined);
  });

  it('wakes at least every COST_REFRESH_SECONDS while billed, and its memo carries the ledger\'s exact totals', () => {
    assert.equal(costRefreshAt(undefined, T0), T0 + COST_REFRESH_SECONDS * 1000);
    assert.equal(costRefreshAt(T0 + 10_000, T0), T0 + 10_000);
    // Its label names `vision`, but its ledger answered `ml` (its namespace): the memo says `ml`.
    const run = new Run({ labels: { team: 'vision', project: 'detector' } });
    run.state.admission = { team: 'ml', status: 'admitted', askedAt: T0, firstAskedAt: T0 };
    run.state.attempts.push(attempt(1, '2026-12-01T00:00:00Z', '2026-12-01T00:17:13Z', 'preempted'), attempt(2, '2026-12-01T00:20:00Z', '2026-12-01T01:03:01Z', 'completed'));
    run.state.preemptions = 1;
    const memo = costMemoOf(run.state, run.spec, T0);
    const costs = ledger(run.state, T0);
    assert.equal(memo.costUsd, costs.totalCostUsd);
    assert.equal(memo.onDemandCostUsd, costs.onDemandCostUsd);
    assert.deepEqual([memo.team, memo.project, memo.preemptions, memo.lines.length, memo.lines[0].attempts, memo.lines[0].preemptions, memo.lines[0].gpuSeconds], ['ml', 'detector', 1, 1, 2, 1, 2 * (1033 + 2581)]);
  });
});
