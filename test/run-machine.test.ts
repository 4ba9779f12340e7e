/**
 * The run's rules, server-less: the same pure machine the workflow drives, fed events by
 * hand with a hand-moved clock. Every recovery, limit and outcome rule is reached here.
 */
import { strict as assert } from 'node:assert';
import { FailureType } from '../workflows/failures';
import { executionToken, resourceName, runKey } from '../workflows/naming';
import { ENDINGS } from '../workflows/run/endings';
import { limitAtMs } from '../workflows/run/limits';
import { HISTORY_EVENTS_PER_EXECUTION, type Context } from '../workflows/run/machine';
import { AttemptOutcome, TimelineKind } from '../workflows/run/state';
import { budgetProblem, newDeadlineProblem } from '../workflows/run/validators';
import { ledger, resultOf } from '../workflows/run/views';
import { type RunSpecInput } from '../workflows/spec';
import type { Offer } from '../workflows/types';
import { EXEC, offerIn, RunHarness, specOf, T0 } from './helpers/run-harness';

const WORKFLOW = 'run-42';

const offer = (zone: string, price: number, model: 'SPOT' | 'STANDARD' = 'SPOT'): Offer => offerIn(zone, price, { provisioningModel: model });

const OFFERS = [offer('us-central1-a', 0.2), offer('us-east1-b', 0.25), offer('europe-west4-a', 0.3), offer('us-central1-a', 0.7, 'STANDARD')];

/** A run under test, with the context flags the driver passes. */
class Harness extends RunHarness {
  suggested = false;
  /** Events in the execution's history so far. */
  historyLength = 10;

  constructor(overrides: Partial<RunSpecInput> = {}) {
    super(WORKFLOW, specOf({ recovery: { pollSeconds: 5, zoneCooldown: '1h' }, ...overrides }));
  }

  override context(): Context {
    return { ...super.context(), continueAsNewSuggested: this.suggested, historyLength: this.historyLength };
  }

  /** start -> offers -> provisioned: attempt `n` trains. */
  running(offers = OFFERS): this {
    assert.deepEqual(this.send({ kind: 'start' }), { kind: 'find-capacity' });
    this.provisioned(offers);
    return this;
  }
}

describe('the run machine (pure, no server)', () => {
  describe('placement', () => {
    it('checks before anything else, once, and fails at once, naming each problem and its fix, when the run cannot succeed', () => {
      const run = new Harness();
      run.state.checked = undefined;
      run.state.admission = undefined;
      assert.deepEqual(run.send({ kind: 'start' }), { kind: 'check' });
      const findings = [
        { check: 'codec-key', ok: true },
        { check: 'quota:GPUS_ALL_REGIONS', ok: false, problem: "the project's GPUS_ALL_REGIONS quota is 0", fix: 'request a GPUS_ALL_REGIONS quota of at least 1' },
        { check: 'quota:us-east1:PREEMPTIBLE_NVIDIA_L4_GPUS', ok: true, problem: 'no spot quota in us-east1 (placement skips it)' },
      ];
      const stop = run.send({ kind: 'checked', findings });
      assert.equal(stop.kind, 'fail');
      assert.equal((stop as { failure: string }).failure, FailureType.ChecksFailed);
      assert.equal((stop as { message: string }).message, "the run cannot succeed as things stand, so nothing was created: quota:GPUS_ALL_REGIONS: the project's GPUS_ALL_REGIONS quota is 0 (to fix: request a GPUS_ALL_REGIONS quota of at least 1)");
      assert.equal(run.state.attempts.length, 0);

      const ok = new Harness();
      ok.state.checked = undefined;
      assert.deepEqual(ok.send({ kind: 'start' }), { kind: 'check' });
      assert.deepEqual(ok.send({ kind: 'checked', findings: findings.filter((f) => f.ok) }), { kind: 'find-capacity' });
      assert.match(ok.state.timeline.find((e) => e.kind === TimelineKind.Checked)!.event, /^checks before the run: 2 of 2 passed; quota:us-east1:PREEMPTIBLE_NVIDIA_L4_GPUS: no spot quota/);
      assert.deepEqual(ok.send({ kind: 'start' }), { kind: 'find-capacity' }, 'a continued execution does not check again');

      // A check the API could not answer for now (a 503, a timeout) is no answer about the run: it goes on.
      const outage = new Harness();
      outage.state.checked = undefined;
      outage.send({ kind: 'start' });
      const unanswered = [{ check: 'gce:project', ok: false, transient: true, problem: 'the Compute API failed (503)', fix: 'retry' }];
      assert.deepEqual(outage.send({ kind: 'checked', findings: unanswered }), { kind: 'find-capacity' });
      assert.match(outage.state.timeline.find((e) => e.kind === TimelineKind.Checked)!.event, /gce:project: the Compute API failed \(503\)/);

      const unchecked = new Harness();
      unchecked.state.checked = undefined;
      unchecked.send({ kind: 'start' });
      assert.deepEqual(unchecked.send({ kind: 'checked' }), { kind: 'find-capacity' }, 'a worker that cannot check lets the run go on');
    });

    it('fails before any attempt when the storage says a dataset is missing; an unknown answer places as before', () => {
      const datasets = [
        { uri: 'gs://my-data/train.csv', path: 'train.csv' },
        { uri: 'gs://my-data/gone.csv', path: 'gone.csv' },
      ];
      const run = new Harness({ datasets });
      run.send({ kind: 'start' });
      const stop = run.send({ kind: 'offers', offers: OFFERS, datasets: [{ uri: 'gs://my-data/train.csv', exists: true }, { uri: 'gs://my-data/gone.csv', exists: false, problem: 'no object gs://my-data/gone.csv' }] });
      assert.equal(stop.kind, 'fail');
      assert.equal((stop as { failure: string }).failure, FailureType.InvalidSpec);
      assert.match((stop as { message: string }).message, /^datasets\[1\]\.uri gs:\/\/my-data\/gone\.csv: no object gs:\/\/my-data\/gone\.csv; /);
      assert.equal(run.state.attempts.length, 0);

      const unknown = new Harness({ datasets });
      unknown.send({ kind: 'start' });
      const placed = unknown.send({ kind: 'offers', offers: OFFERS, datasets: [{ uri: 'gs://my-data/gone.csv', problem: 'the storage API did not answer' }] });
      assert.deepEqual(placed, { kind: 'provision', attempt: 1 });
    });

    it('says on the timeline whether a create that may have been in flight landed late or could no longer land', () => {
      const run = new Harness().running();
      run.send({ kind: 'released', attempt: 1, outcome: 'deleted', createWatch: { outcome: 'landed-late', until: '2026-01-01T00:02:00.000Z', afterSeconds: 74 } });
      const late = run.state.timeline.filter((e) => e.kind === TimelineKind.Released).at(-1)!;
      assert.equal(late.createWatch, 'landed-late');
      assert.match(late.event, /deleted \(its create landed late, 74 s after the release began/);
      const never = new Harness().running();
      never.send({ kind: 'released', attempt: 1, outcome: 'absent', createWatch: { outcome: 'deadline-passed', until: '2026-01-01T00:02:00.000Z' } });
      const absent = never.state.timeline.filter((e) => e.kind === TimelineKind.Released).at(-1)!;
      assert.equal(absent.createWatch, 'deadline-passed');
      assert.match(absent.event, /never created .*until 2026-01-01T00:02:00\.000Z, after which none can/);
    });

    it('finds capacity, then provisions the cheapest offer under this execution\'s name', () => {
      const run = new Harness();
      assert.deepEqual(run.send({ kind: 'start' }), { kind: 'find-capacity' });
      assert.deepEqual(run.send({ kind: 'offers', offers: OFFERS }), { kind: 'provision', attempt: 1 });
      assert.equal(run.state.attempts[0].offer.zone, 'us-central1-a');
      assert.equal(run.state.attempts[0].ref.name, resourceName(WORKFLOW, EXEC, 1));
      assert.equal(run.state.phase, 'provisioning');
    });

    it('fails NoCapacity naming resources.accelerators when nothing is offered', () => {
      const run = new Harness();
      run.send({ kind: 'start' });
      const command = run.send({ kind: 'offers', offers: [] });
      assert.equal(command.kind, 'fail');
      assert.equal((command as { failure: string }).failure, FailureType.NoCapacity);
      assert.match((command as { message: string }).message, /^resources\.accelerators: /);
    });

    it('fails NoCapacity naming pricing.maxPricePerHour when every offer costs more', () => {
      const run = new Harness({ pricing: { mode: 'spot', maxPricePerHour: 0.1 } });
      run.send({ kind: 'start' });
      const command = run.send({ kind: 'offers', offers: OFFERS });
      assert.equal(command.kind, 'fail');
      assert.match((command as { message: string }).message, /^pricing\.maxPricePerHour \$0\.1\/h is below every offer; the cheapest is \$0\.2000\/h/);
    });

    it('after a stockout releases the attempt (the create answered), records the zone, tries the next zone', () => {
      const run = new Harness();
      run.send({ kind: 'start' });
      run.send({ kind: 'offers', offers: OFFERS });
      assert.deepEqual(run.send({ kind: 'provision-failed', attempt: 1, failure: FailureType.Stockout, message: 'no capacity' }), { kind: 'release', attempt: 1, createMayBeInFlight: false, beside: true });
      assert.deepEqual(run.released(1, 'absent'), { kind: 'provision', attempt: 2 });
      assert.equal(run.state.attempts[1].offer.zone, 'us-east1-b');
      assert.deepEqual(run.state.zoneEvents.map((e) => [e.zone, e.kind]), [['us-central1-a', 'stockout']]);
      assert.equal(run.state.attempts[0].outcome, AttemptOutcome.Stockout);
      assert.equal(ledger(run.state, run.now).totalCostUsd, 0, 'a create that never ran costs nothing');
    });

    it('waits and looks again when every offer of a round failed', () => {
      const run = new Harness({ placement: { zones: { allow: ['us-central1-a'] } } });
      run.send({ kind: 'start' });
      run.send({ kind: 'offers', offers: [OFFERS[0]] });
      run.send({ kind: 'provision-failed', attempt: 1, failure: FailureType.Stockout, message: 'no capacity' });
      assert.deepEqual(run.released(1, 'absent'), { kind: 'wait', untilMs: T0 + 30_000 });
      assert.deepEqual(run.at(10).send({ kind: 'tick' }), { kind: 'wait', untilMs: T0 + 30_000 });
      assert.deepEqual(run.at(30).send({ kind: 'tick' }), { kind: 'find-capacity' });
    });

    it('never reuses a name held by something not its own, and stops after three such conflicts', () => {
      const run = new Harness();
      run.send({ kind: 'start' });
      run.send({ kind: 'offers', offers: OFFERS });
      for (const attempt of [1, 2]) {
        run.send({ kind: 'provision-failed', attempt, failure: FailureType.ResourceConflict, message: 'not ours' });
        assert.deepEqual(run.released(attempt, 'not-ours'), { kind: 'provision', attempt: attempt + 1 });
      }
      const third = run.send({ kind: 'provision-failed', attempt: 3, failure: FailureType.ResourceConflict, message: 'not ours' });
      assert.equal(third.kind, 'fail');
      assert.equal((third as { failure: string }).failure, FailureType.ResourceConflict);
      assert.deepEqual(new Set(run.state.attempts.map((a) => a.ref.name)).size, 3, 'three different names');
    });

    it('fails the run on a provision failure no other offer can fix (InvalidSpec)', () => {
      const run = new Harness();
      run.send({ kind: 'start' });
      run.send({ kind: 'offers', offers: OFFERS });
      assert.deepEqual(run.send({ kind: 'provision-failed', attempt: 1, failure: FailureType.InvalidSpec, message: 'bad image' }), { kind: 'fail', failure: FailureType.InvalidSpec, message: 'bad image' });
    });
  });

  describe('following an attempt', () => {
    it('holds nothing while training: waits, and looks only when nothing was heard for a poll interval', () => {
      const run = new Harness().running();
      assert.deepEqual(run.last, { kind: 'wait', untilMs: T0 + 5000 });
      run.at(3);
      assert.deepEqual(run.observe(1, { phase: 'training', step: 10 }), { kind: 'wait', untilMs: T0 + 8000 }, 'an observation postpones the look');
      assert.deepEqual(run.at(8).send({ kind: 'tick' }), { kind: 'look', attempt: 1 });
    });

    it('asks for the fleet observer, never looks while it speaks, and looks and asks again once it falls silent', () => {
      // A pinned checkpoint interval: no live-interval timer among the waits below.
      const run = Object.assign(new Harness({ checkpoint: { uri: 'gs://ckpt/run', interval: '10m' } }), { answersObserverAsks: false });
      run.send({ kind: 'start' });
      run.send({ kind: 'offers', offers: OFFERS });
      run.send({ kind: 'provisioned', attempt: 1, startedAt: new Date(T0).toISOString(), adopted: false });
      const mine = { run: runKey(WORKFLOW), execution: EXEC, attempt: 1 };
      assert.deepEqual(run.last, { kind: 'ensure-observer' }, 'a provisioned run asks for the observer');
      assert.deepEqual(run.send({ kind: 'observer-asked' }), { kind: 'wait', untilMs: T0 + 5000 }, 'not heard yet: it looks at the poll interval');
      // The observer promises a signal at least every 300 s: the run waits twice that before looking itself.
      assert.deepEqual(run.at(2).observe(1, { phase: 'training' }, mine, 'observer', 300), { kind: 'wait', untilMs: T0 + 602_000 });
      assert.deepEqual(run.at(500).observe(1, { phase: 'training', step: 3 }, mine, 'observer', 300), { kind: 'wait', untilMs: T0 + 1_100_000 });
      // Silent for 600 s: the observer may be dead. Ask for it again, and look.
      assert.deepEqual(run.at(1100).send({ kind: 'tick' }), { kind: 'ensure-observer' });
      assert.deepEqual(run.send({ kind: 'observer-asked' }), { kind: 'look', attempt: 1 });
      // Until it speaks again, the run looks once a minute (not every poll interval: at thousands of runs that is the quota).
      assert.deepEqual(run.observe(1, { phase: 'training' }), { kind: 'wait', untilMs: T0 + 1_160_000 });
      assert.deepEqual(run.at(1160).send({ kind: 'tick' }), { kind: 'look', attempt: 1 });
      assert.deepEqual(run.at(1161).observe(1, { phase: 'training' }, mine, 'observer', 300), { kind: 'wait', untilMs: T0 + 1_761_000 }, 'heard again: no looks');
    });

    it('does not ask for the observer when the worker asked as it provisioned, until the observer stays silent too long', () => {
      const run = Object.assign(new Harness(), { answersObserverAsks: false });
      run.send({ kind: 'start' });
      run.send({ kind: 'offers', offers: OFFERS });
      assert.deepEqual(run.send({ kind: 'provisioned', attempt: 1, startedAt: new Date(T0).toISOString(), adopted: false, observerAsked: true }), { kind: 'wait', untilMs: T0 + 5000 }, 'not heard yet: it looks at the poll interval, without asking');
      assert.deepEqual(run.at(5).send({ kind: 'tick' }), { kind: 'look', attempt: 1 });
      // Never heard for twice the observer's longest silence (300 s): the run asks for itself.
      assert.deepEqual(run.at(600).send({ kind: 'tick' }), { kind: 'ensure-observer' });
    });

    it('ignores observations of another resource or another execution', () => {
      const run = new Harness().running();
      run.observe(1, { phase: 'exited', exitCode: 0 }, { run: runKey(WORKFLOW), execution: executionToken('other-execution'), attempt: 1 });
      assert.equal(run.state.attempts[0].outcome, AttemptOutcome.Running);
      run.send({ kind: 'observed', via: 'observer', observation: { name: 'victim-db', owner: { run: runKey(WORKFLOW), execution: EXEC, attempt: 1 }, at: '', snapshot: { lifecycle: 'gone', preempted: false } } });
      assert.equal(run.state.attempts[0].outcome, AttemptOutcome.Running);
    });

    it('records staging, then only newer checkpoints', () => {
      const run = new Harness().running();
      assert.equal(run.state.phase, 'staging');
      run.observe(1, { phase: 'training', stagedBytes: 1234 });
      assert.equal(run.state.phase, 'training');
      run.observe(1, { phase: 'training', step: 50, checkpoint: { step: 40, sha256: 'a'.repeat(64), uri: 'gs://c/step-40' } });
      run.observe(1, { phase: 'training', step: 55, checkpoint: { step: 30, sha256: 'b'.repeat(64), uri: 'gs://c/step-30' } });
      assert.equal(run.state.lastCheckpoint?.step, 40);
      assert.equal(run.state.step, 55);
      assert.deepEqual(run.state.timeline.filter((e) => e.kind === TimelineKind.Checkpoint).map((e) => e.step), [40]);
    });

    it('completes: release, then the result with the ledger', () => {
      const run = new Harness().running();
      run.at(3600);
      assert.deepEqual(run.observe(1, { phase: 'exited', exitCode: 0, step: 100 }), { kind: 'release', attempt: 1, createMayBeInFlight: false });
      assert.deepEqual(run.released(1), { kind: 'complete' });
      const result = resultOf(run.state, run.now);
      assert.equal(result.finalStep, 100);
      assert.deepEqual(result.attempts.map((a) => a.outcome), ['completed']);
      assert.ok(Math.abs(result.totalCostUsd - 0.2) < 1e-9, `one hour at $0.2: ${result.totalCostUsd}`);
    });

    it('follows a reclaimed VM through its notice, then resumes elsewhere from the last checkpoint', () => {
      const run = new Harness().running();
      run.observe(1, { phase: 'training', checkpoint: { step: 60, sha256: 'a'.repeat(64), uri: 'gs://c/step-60' } });
      run.send({ kind: 'notice', name: resourceName(WORKFLOW, EXEC, 1), reason: 'shutdown hook' });
      assert.equal(run.observe(1, { lifecycle: 'stopping', preempted: true }).kind, 'wait', 'draining, not lost');
      assert.deepEqual(run.observe(1, { lifecycle: 'terminated', preempted: true, checkpoint: { step: 64, sha256: 'c'.repeat(64), uri: 'gs://c/step-64' } }), { kind: 'release', attempt: 1, createMayBeInFlight: false, beside: true });
      assert.equal(run.state.lastCheckpoint?.step, 64, 'the final checkpoint of the notice period is kept');
      assert.deepEqual(run.released(1), { kind: 'find-capacity' });
      assert.equal(run.state.preemptions, 1);
      assert.deepEqual(run.send({ kind: 'offers', offers: OFFERS }), { kind: 'provision', attempt: 2 });
      assert.notEqual(run.state.attempts[1].offer.zone, 'us-central1-a', 'the zone that preempted cools down');
      assert.equal(run.state.attempts[1].resumedFromStep, 64);
      assert.deepEqual(run.state.timeline.filter((e) => e.kind === TimelineKind.PreemptionNotice).length, 1);
    });

    it('gives up with Preempted after recovery.maxPreemptions', () => {
      const run = new Harness({ recovery: { maxPreemptions: 1, zoneCooldown: 0.01 } }).running();
      run.observe(1, { lifecycle: 'terminated', preempted: true });
      run.released(1);
      run.send({ kind: 'offers', offers: OFFERS });
      run.send({ kind: 'provisioned', attempt: 2, adopted: false, observerAsked: true });
      const command = run.observe(2, { lifecycle: 'gone', preempted: false });
      assert.equal(command.kind, 'fail');
      assert.equal((command as { failure: string }).failure, FailureType.Preempted);
    });

    it('restarts a failed command up to maxRestartsOnError, never one listed in noRetryExitCodes', () => {
      const run = new Harness({ recovery: { maxRestartsOnError: 1, noRetryExitCodes: [7] } }).running();
      run.observe(1, { phase: 'exited', exitCode: 3 });
      assert.deepEqual(run.released(1), { kind: 'find-capacity' });
      assert.equal(run.state.restarts, 1);
      run.send({ kind: 'offers', offers: OFFERS });
      run.send({ kind: 'provisioned', attempt: 2, adopted: false, observerAsked: true });
      const second = run.observe(2, { phase: 'exited', exitCode: 3 });
      assert.equal((second as { failure: string }).failure, FailureType.UserCodeFailed);
      assert.match((second as { message: string }).message, /after 1 restarts/);

      const listed = new Harness({ recovery: { noRetryExitCodes: [7] } }).running();
      const stop = listed.observe(1, { phase: 'exited', exitCode: 7 });
      assert.match((stop as { message: string }).message, /exit code 7 is listed in recovery\.noRetryExitCodes/);
    });

    it('ends the run at once on exit 126 or 127 (NotRunnable)', () => {
      for (const [exitCode, says] of [[127, /program "python" was not found \(exit code 127\)/], [126, /program "python" cannot execute \(exit code 126/]] as const) {
        const run = new Harness({ command: ['python', 'train.py'] });
        run.running();
        const stop = run.observe(1, { phase: 'exited', exitCode });
        assert.equal(stop.kind, 'fail');
        assert.equal((stop as { failure: string }).failure, FailureType.UserCodeFailed);
        assert.match((stop as { message: string }).message, says);
        assert.deepEqual((stop as { details: unknown }).details, { exitCode });
        assert.equal(run.state.attempts[0].outcome, AttemptOutcome.NotRunnable);
        assert.equal(run.state.restarts, 0);
      }
      assert.equal(ENDINGS[AttemptOutcome.NotRunnable].failure, FailureType.UserCodeFailed);
    });

    it('names the agent\'s own failure during staging', () => {
      const run = new Harness({ recovery: { maxRestartsOnError: 0 } }).running();
      const command = run.observe(1, { phase: 'failed', exitCode: 66 });
      assert.match((command as { message: string }).message, /staging a dataset failed/);
    });
  });

  describe('limits', () => {
    it('stops at the budget, at the price of the live attempt, and wakes for it', () => {
      const run = new Harness({ pricing: { mode: 'spot', budgetUsd: 0.1 } }).running();
      assert.equal(limitAtMs(run.state, run.spec, run.state.attempts[0], run.now), T0 + 1_800_000, '$0.1 at $0.2/h lasts 30 minutes');
      assert.equal(run.at(1799).send({ kind: 'tick' }).kind, 'look');
      run.at(1800);
      const command = run.send({ kind: 'tick' });
      assert.equal((command as { failure: string }).failure, FailureType.BudgetExceeded);
    });

    it('stops at the deadline and at time.maxRunDuration', () => {
      const late = new Harness({ time: { deadlineAfter: '1h' } }).running();
      assert.equal((late.at(3600).send({ kind: 'tick' }) as { failure: string }).failure, FailureType.DeadlineMissed);
      const long = new Harness({ time: { maxRunDuration: '30m' } }).running();
      const command = long.at(1800).send({ kind: 'tick' });
      assert.match((command as { message: string }).message, /time\.maxRunDuration/);
    });

    it('validates updates: budget above what is spent, deadline ahead', () => {
      const run = new Harness().running();
      run.at(3600);
      assert.match(budgetProblem(run.state, 0.1, run.now)!, /below the \$0\.2000 already spent/);
      assert.match(budgetProblem(run.state, -1, run.now)!, /positive number/);
      assert.equal(budgetProblem(run.state, 5, run.now), undefined);
      assert.match(newDeadlineProblem('2001-01-01T00:00:00Z', run.now)!, /^deadline 2001-01-01T00:00:00Z is not in the future/);
      assert.equal(newDeadlineProblem(new Date(run.now + 60_000).toISOString(), run.now), undefined);
    });
  });

  describe('history', () => {
    it('continues as new when the server suggests it, but only once an ended attempt is released', () => {
      const run = new Harness();
      run.send({ kind: 'start' });
      run.send({ kind: 'offers', offers: OFFERS });
      run.suggested = true;
      assert.deepEqual(run.send({ kind: 'provision-failed', attempt: 1, failure: FailureType.Stockout, message: 'no capacity' }), { kind: 'release', attempt: 1, createMayBeInFlight: false, beside: true });
      assert.deepEqual(run.released(1, 'absent'), { kind: 'continue-as-new' });
      run.suggested = false;
      run.send({ kind: 'start' });
      run.send({ kind: 'provisioned', attempt: 2, adopted: false, observerAsked: true });
      run.suggested = true;
      assert.deepEqual(run.send({ kind: 'tick' }), { kind: 'continue-as-new' }, 'a training attempt is handed over');
    });

    it('continues as new at its own history budget, not only at the server\'s suggestion', () => {
      const run = new Harness().running();
      run.historyLength = HISTORY_EVENTS_PER_EXECUTION - 1;
      assert.equal(run.send({ kind: 'tick' }).kind, 'wait', 'under the budget: the run waits for news');
      run.historyLength = HISTORY_EVENTS_PER_EXECUTION;
      assert.deepEqual(run.send({ kind: 'tick' }), { kind: 'continue-as-new' }, 'at the budget the training attempt is handed over');

      const suggested = new Harness().running();
      suggested.suggested = true;
      assert.deepEqual(suggested.send({ kind: 'tick' }), { kind: 'continue-as-new' });
    });

    it('past its budget, releases a preempted attempt before it continues as new: this execution finishes what it started', () => {
      const run = new Harness().running();
      run.historyLength = HISTORY_EVENTS_PER_EXECUTION + 50;
      const preempted = run.observe(1, { lifecycle: 'terminated', preempted: true, checkpoint: { step: 64, sha256: 'c'.repeat(64), uri: 'gs://c/step-64' } });
      assert.deepEqual(preempted, { kind: 'release', attempt: 1, createMayBeInFlight: false, beside: true });
      assert.equal(run.send({ kind: 'releasing', attempt: 1 }).kind, 'find-capacity', 'not continue-as-new: a release in flight is this execution\'s to finish');
      assert.deepEqual(run.released(1, 'deleted'), { kind: 'continue-as-new' });
    });
  });

  describe('releases beside the next placement', () => {
    const beside = () => new Harness().running();
    const preempted = (run: Harness) => run.observe(1, { lifecycle: 'terminated', preempted: true, checkpoint: { step: 64, sha256: 'c'.repeat(64), uri: 'gs://c/step-64' } });

    it('places the replacement of a preempted VM while its release runs, and bills it to when it stopped', () => {
      const run = beside();
      run.at(600);
      assert.deepEqual(preempted(run), { kind: 'release', attempt: 1, createMayBeInFlight: false, beside: true });
      assert.deepEqual(run.send({ kind: 'releasing', attempt: 1 }), { kind: 'find-capacity' });
      assert.deepEqual(run.send({ kind: 'offers', offers: OFFERS }), { kind: 'provision', attempt: 2 });
      assert.equal(run.state.attempts[1].resumedFromStep, 64);
      run.send({ kind: 'provisioned', attempt: 2, adopted: false, observerAsked: true });
      assert.equal(run.send({ kind: 'released', attempt: 1, outcome: 'deleted', stoppedAt: new Date(T0 + 600_000).toISOString() }).kind, 'wait');
      assert.deepEqual(
        run.state.attempts.map((a) => [a.attempt, a.released, a.stoppedAt]),
        [
          [1, true, new Date(T0 + 600_000).toISOString()],
          [2, false, undefined],
        ],
      );
    });

    it('completes only once every release is done, and never continues as new with one in flight', () => {
      const run = beside();
      preempted(run);
      run.suggested = true;
      assert.deepEqual(run.send({ kind: 'releasing', attempt: 1 }), { kind: 'find-capacity' }, 'not continue-as-new: this execution owns the release');
      run.suggested = false;
      run.send({ kind: 'offers', offers: OFFERS });
      run.send({ kind: 'provisioned', attempt: 2, adopted: false, observerAsked: true });
      assert.deepEqual(run.observe(2, { phase: 'exited', exitCode: 0, step: 300 }), { kind: 'release', attempt: 2, createMayBeInFlight: false }, 'the last attempt is released in the run\'s own time');
      assert.deepEqual(run.released(2), { kind: 'wait' }, 'attempt 1 is still being released');
      assert.deepEqual(run.released(1), { kind: 'complete' });
    });

    it('asks again for a release that failed, and a continued execution asks again for one the last left in flight', () => {
      const run = beside();
      preempted(run);
      run.send({ kind: 'releasing', attempt: 1 });
      assert.deepEqual(run.send({ kind: 'release-failed', attempt: 1, message: 'deadline exceeded' }), { kind: 'release', attempt: 1, createMayBeInFlight: false, beside: true });
      assert.ok(run.state.timeline.some((e) => e.kind === TimelineKind.Released && e.attempt === 1 && /failed/.test(e.event)));
      run.send({ kind: 'releasing', attempt: 1 });
      assert.equal(run.state.attempts[0].releasing, true);
      assert.deepEqual(run.send({ kind: 'start' }), { kind: 'release', attempt: 1, createMayBeInFlight: false, beside: true });
    });

    it("ends a preempted attempt when its agent says it exited with its final checkpoint, before the VM is down", () => {
      const exited = { lifecycle: 'stopping' as const, preempted: true, phase: 'exited' as const, exitCode: 143, checkpoint: { step: 70, sha256: 'e'.repeat(64), uri: 'gs://c/step-70' } };
      const run = new Harness().running();
      assert.equal(run.observe(1, { lifecycle: 'stopping', preempted: true, phase: 'uploading' }).kind, 'wait', 'still writing');
      assert.deepEqual(run.observe(1, exited), { kind: 'release', attempt: 1, createMayBeInFlight: false, beside: true });
      assert.equal(run.state.lastCheckpoint?.step, 70);
      assert.equal(run.state.preemptions, 1);
    });

    it('waits for the release where the guest may still write: a switch, a stop, the completed attempt', () => {
      const besides = Object.entries(ENDINGS)
        .filter(([, rule]) => rule.releaseBeside)
        .map(([ending]) => ending)
        .sort();
      assert.deepEqual(besides, [AttemptOutcome.Conflict, AttemptOutcome.Failed, AttemptOutcome.ImageUnavailable, AttemptOutcome.NotRunnable, AttemptOutcome.Preempted, AttemptOutcome.QuotaExceeded, AttemptOutcome.RunDurationReached, AttemptOutcome.SetupFailed, AttemptOutcome.Stockout, AttemptOutcome.WaitExpired, AttemptOutcome.WorkdirUnavailable].sort());
    });
  });

  it('has a rule for every way an attempt can end', () => {
    const endings = Object.values(AttemptOutcome).filter((o) => o !== AttemptOutcome.Running);
    assert.deepEqual(Object.keys(ENDINGS).sort(), [...endings].sort());
  });
});
