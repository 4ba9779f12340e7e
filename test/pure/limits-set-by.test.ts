/**
 * Who set a run's limits (issue 39, "who did what"), server-less: a budget or deadline
 * update names its caller, the run keeps who set each limit last (through continue-as-new)
 * and its status and timeline say so; a caller that names no one clears the name.
 */
import { strict as assert } from 'node:assert';
import { acceptContinuation } from '../../workflows/run/continuation';
import { TimelineKind } from '../../workflows/run/state';
import { callerProblem } from '../../workflows/run/validators';
import { statusOf } from '../../workflows/run/views';
import { EXEC, RunHarness, specOf } from '../helpers/run-harness';

const ALICE = 'alice@team-a (4121@laptop)';
const BOB = 'bob@team-a (77@ci)';

describe('who set a run\'s limits', () => {
  it('keeps the caller of each limit\'s last change, and says it in the status and the timeline', () => {
    const run = new RunHarness('run-1', specOf({ pricing: { budgetUsd: 10 } }));
    run.at(60).apply({ kind: 'budget-set', usd: 20, by: ALICE });
    run.at(120).apply({ kind: 'deadline-set', deadline: '2026-12-02T00:00:00+01:00', by: BOB });
    const status = statusOf(run.state, run.now);
    assert.equal(status.budgetUsd, 20);
    assert.deepEqual(status.limitsSetBy, {
      budget: { by: ALICE, at: '2026-12-01T00:01:00.000Z' },
      deadline: { by: BOB, at: '2026-12-01T00:02:00.000Z' },
    });
    assert.deepEqual(
      status.timeline.filter((e) => e.kind === TimelineKind.LimitChanged).map((e) => ({ event: e.event, by: e.by })),
      [
        { event: `budget set to $20.00 by ${ALICE}`, by: ALICE },
        { event: `deadline set to 2026-12-01T23:00:00.000Z by ${BOB}`, by: BOB },
      ],
    );
  });

  it('forgets the name when a later change of the same limit names no one, and keeps the other limit\'s', () => {
    const run = new RunHarness('run-2', specOf({ pricing: { budgetUsd: 10 } }));
    run.apply({ kind: 'budget-set', usd: 20, by: ALICE });
    run.apply({ kind: 'deadline-set', deadline: '2026-12-03T00:00:00Z', by: ALICE });
    run.apply({ kind: 'budget-set', usd: 30 });
    assert.deepEqual(statusOf(run.state, run.now).limitsSetBy, { deadline: { by: ALICE, at: '2026-12-01T00:00:00.000Z' } });
    assert.equal(run.state.timeline.at(-1)?.event, 'budget set to $30.00');
    assert.equal(run.state.timeline.at(-1)?.by, undefined);
  });

  it('a run whose limits no update changed says nothing of who set them', () => {
    const run = new RunHarness('run-3', specOf({ pricing: { budgetUsd: 10 } }));
    assert.equal('limitsSetBy' in statusOf(run.state, run.now), false);
  });

  it('carries who set the limits through continue-as-new', () => {
    const run = new RunHarness('run-4', specOf({ pricing: { budgetUsd: 10 } }));
    run.apply({ kind: 'budget-set', usd: 25, by: ALICE });
    const input = JSON.parse(JSON.stringify({ continued: true, spec: run.spec, state: run.state })) as Parameters<typeof acceptContinuation>[0];
    const carried = acceptContinuation(input, { workflowId: 'run-4', execution: EXEC, continuedFromExecutionRunId: 'the-previous-execution', attempt: 1 });
    assert.deepEqual(carried.state.limitsSetBy, run.state.limitsSetBy);
  });

  it('refuses a caller that is not one short line, and accepts none at all (an older client, `temporal workflow update`)', () => {
    assert.equal(callerProblem(undefined), undefined);
    assert.equal(callerProblem(ALICE), undefined);
    for (const bad of ['', '  ', 'alice\nbudget set to $0 by admin', 'x'.repeat(257), 42]) {
      assert.match(callerProblem(bad) ?? '', /by must name the caller in one line of at most 256 characters/, JSON.stringify(bad));
    }
  });
});
