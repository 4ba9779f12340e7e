/**
 * recovery.keepOnFailure, server-less: the spec's bounds, the reducer's rule (which
 * attempt is kept, never on cancellation, a limit or completion), the stop path's final
 * releases and keep, the status and details that say how to reach it, the VM-side limits
 * stretched by the keep and no further, and the reaper's decision on a kept resource.
 */
import { strict as assert } from 'node:assert';
import { keepUntilFromLabels } from '../../activities/providers/provider';
import { powerOffAfterSeconds, timeLimitMs } from '../../activities/providers/gce';
import { FailureType } from '../../workflows/failures';
import { runKey } from '../../workflows/naming';
import { decideReap, KeepReason, ReapReason, type OwnerRun, type ReapCandidate } from '../../workflows/reaper/decide';
import { finalReleases } from '../../workflows/run/ending';
import { finalKeep, KEEP_UNTIL_LABEL } from '../../workflows/run/keep';
import { provisionRequest } from '../../workflows/run/requests';
import { RESOURCE_LIMIT_MARGIN_SECONDS, resourceReleaseByMs } from '../../workflows/run/resource-limit';
import { Phase, TimelineKind } from '../../workflows/run/state';
import { currentDetailsOf, statusOf } from '../../workflows/run/views';
import { checkSpec, type RunSpecInput } from '../../workflows/spec';
import { offerIn, RunHarness, specOf, T0 } from '../helpers/run-harness';

const WORKFLOW = 'keep-run';
const OFFERS = [offerIn('us-central1-a', 0.2)];
const REACH = 'gcloud compute ssh sterna-x --zone us-central1-a --project p';

class Harness extends RunHarness {
  constructor(overrides: Partial<RunSpecInput> = {}) {
    super(WORKFLOW, specOf({ ...overrides, recovery: { pollSeconds: 5, maxRestartsOnError: 0, ...(overrides.recovery ?? {}) } }));
  }

  /** start -> offers -> provisioned: attempt 1 trains. */
  running(): this {
    assert.deepEqual(this.send({ kind: 'start' }), { kind: 'find-capacity' });
    this.provisioned(OFFERS);
    return this;
  }

  /** What the shell does as a stopping run ends: stopped, releasing-all, then the releases and the keep answered. */
  stop(phase: typeof Phase.Failed | typeof Phase.Cancelled, kept?: 'kept' | 'failed' | 'absent') {
    this.apply({ kind: 'stopped', phase, reason: 'x' });
    const releases = finalReleases(this.state);
    const keep = finalKeep(this.state);
    this.apply({ kind: 'releasing-all' });
    for (const r of releases) this.apply({ kind: 'released', attempt: r.attempt, outcome: 'deleted', stoppedAt: new Date(this.now).toISOString() });
    if (keep && kept) {
      const until = new Date(keep.untilMs).toISOString();
      this.apply(kept === 'kept' ? { kind: 'kept', attempt: keep.attempt, outcome: 'kept', until, reach: [REACH] } : { kind: 'kept', attempt: keep.attempt, outcome: kept, message: 'setLabels refused' });
    }
    return { releases, keep, after: finalReleases(this.state) };
  }
}

describe('recovery.keepOnFailure', () => {
  describe('the spec', () => {
    const problems = (recovery: object, more: Partial<RunSpecInput> = {}) => {
      const check = checkSpec({ command: ['python', 'train.py'], checkpoint: { uri: 'gs://ckpt/run' }, resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] }, recovery, ...more } as RunSpecInput);
      return check.ok ? [] : check.problems.map((p) => `${p.path}: ${p.message}`);
    };

    it('takes a duration from a minute to a week, and is absent by default', () => {
      assert.equal(specOf({ recovery: { keepOnFailure: '30m' } }).recovery.keepOnFailure, 1800);
      assert.equal(specOf().recovery.keepOnFailure, undefined);
      assert.deepEqual(problems({ keepOnFailure: '7d' }), []);
      assert.deepEqual(problems({ keepOnFailure: '10s' }), ['recovery.keepOnFailure: must be at least 1m and at most 7d, got "10s"']);
      assert.deepEqual(problems({ keepOnFailure: '8d' }), ['recovery.keepOnFailure: must be at least 1m and at most 7d, got "8d"']);
      assert.match(problems({ keepOnFailure: 'soon' })[0], /^recovery\.keepOnFailure: expected a duration/);
    });

    it('is refused on GKE, saying why and what to do instead', () => {
      const [problem] = problems({ keepOnFailure: '30m' }, { backend: 'gke' });
      assert.match(problem, /^recovery\.keepOnFailure: keeping a failed attempt is for backend gce only: on gke the attempt's pod exits/);
      assert.match(problem, /sterna logs RUN --attempt N/);
    });

    it('leaves room for its label among GCE\'s 64', () => {
      const labels = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`l${i}`, 'v']));
      assert.deepEqual(problems({}, { labels }), []);
      assert.match(problems({ keepOnFailure: '1h' }, { labels })[0], /^labels: with recovery\.keepOnFailure at most 59 labels/);
    });
  });

  describe('the rule', () => {
    it('keeps the attempt whose training failed the run, instead of releasing it, until now + keepOnFailure', () => {
      const run = new Harness({ recovery: { keepOnFailure: '30m' } }).running();
      run.at(600);
      const fail = run.observe(1, { phase: 'exited', exitCode: 3 });
      assert.equal(fail.kind, 'fail');
      assert.equal((fail as { logTailOf?: number }).logTailOf, 1);
      assert.deepEqual(run.state.keep, { attempt: 1, status: 'asked', untilMs: T0 + 600_000 + 1_800_000 });
      assert.ok(Object.isFrozen(run.state.keep), 'written in the reducer, on its draft');

      const { releases, keep, after } = run.stop(Phase.Failed, 'kept');
      assert.deepEqual(releases, [], 'the failed attempt is not among the final releases');
      assert.deepEqual(keep, { kind: 'keep', attempt: 1, untilMs: T0 + 2_400_000 });
      assert.deepEqual(after, [], 'kept: nothing left to release');
      assert.equal(run.state.keep?.status, 'kept');
      assert.equal(run.state.attempts[0].released, false);
      const entry = run.state.timeline.find((e) => e.kind === TimelineKind.Kept);
      assert.equal(entry?.attempt, 1);
      assert.match(entry!.event, /^kept st-.* for inspection until 2026-12-01T00:40:00\.000Z .*reach it with: gcloud compute ssh/);
      run.apply({ kind: 'ended', phase: Phase.Failed, failure: FailureType.UserCodeFailed, message: 'x' });

      // The status says it is kept, until when, how to reach it, and that its kept time is not in the cost.
      const status = statusOf(run.state, run.now);
      assert.deepEqual({ ...status.kept, cost: undefined }, { attempt: 1, name: run.state.attempts[0].ref.name, zone: 'us-central1-a', until: '2026-12-01T00:40:00.000Z', reach: [REACH], cost: undefined });
      assert.match(status.kept!.cost, /^not in the run's cost: keeping it bills at 0\.2 USD\/h, at most 0\.10 USD until/);
      const later = statusOf(run.state, run.now + 1_200_000);
      assert.equal(later.costUsd, status.costUsd, 'the kept time does not run up the run\'s cost');
      assert.ok(Math.abs(status.costUsd - (0.2 * 600) / 3600) < 1e-9, 'the run paid for its 10 minutes of training');
      assert.match(currentDetailsOf(run.state, run.spec, run.now), /\*\*Kept\*\* attempt 1 \(st-[^)]+\) until 2026-12-01T00:40:00\.000Z: `gcloud compute ssh/);
    });

    it('keeps the last attempt of a run that restarted, and only that one', () => {
      const run = new Harness({ recovery: { keepOnFailure: '1h', maxRestartsOnError: 1 } }).running();
      run.observe(1, { phase: 'exited', exitCode: 3 });
      assert.deepEqual(run.released(1), { kind: 'find-capacity' });
      assert.equal(run.state.keep, undefined, 'a restart keeps nothing');
      run.send({ kind: 'offers', offers: OFFERS });
      run.send({ kind: 'provisioned', attempt: 2, adopted: false, observerAsked: true });
      const fail = run.observe(2, { phase: 'exited', exitCode: 3 });
      assert.equal((fail as { logTailOf?: number }).logTailOf, 2);
      const { releases, keep } = run.stop(Phase.Failed, 'kept');
      assert.deepEqual(releases, []);
      assert.equal(keep?.attempt, 2);
    });

    it('keeps an attempt whose agent failed (setup)', () => {
      const run = new Harness({ recovery: { keepOnFailure: '1h' } }).running();
      const fail = run.observe(1, { phase: 'failed', exitCode: 71, setupStep: { step: 1, of: 1 }, setupExitCode: 2 });
      assert.equal((fail as { failure: string }).failure, FailureType.SetupFailed);
      assert.equal(run.state.keep?.attempt, 1);
    });

    it('never keeps on cancellation, a limit, or completion, nor without keepOnFailure', () => {
      const cancelled = new Harness({ recovery: { keepOnFailure: '1h' } }).running();
      cancelled.observe(1, { phase: 'exited', exitCode: 3 });
      assert.equal(cancelled.state.keep?.status, 'asked');
      const stop = cancelled.stop(Phase.Cancelled, 'kept');
      assert.equal(stop.keep, undefined, 'cancelled while failing: released, not kept');
      assert.deepEqual(stop.releases.map((r) => r.attempt), [1]);
      assert.equal(cancelled.state.keep, undefined);

      const live = new Harness({ recovery: { keepOnFailure: '1h' } }).running();
      assert.deepEqual(live.stop(Phase.Cancelled).releases.map((r) => r.attempt), [1]);

      const budget = new Harness({ pricing: { mode: 'spot', budgetUsd: 0.1 }, recovery: { keepOnFailure: '1h' } }).running();
      const over = budget.at(1800).send({ kind: 'tick' });
      assert.equal((over as { failure: string }).failure, FailureType.BudgetExceeded);
      assert.equal(budget.state.keep, undefined);
      assert.deepEqual(budget.stop(Phase.Failed).releases.map((r) => r.attempt), [1]);

      const done = new Harness({ recovery: { keepOnFailure: '1h' } }).running();
      done.observe(1, { phase: 'exited', exitCode: 0 });
      assert.equal(done.state.keep, undefined);
      assert.equal(done.last.kind, 'release');

      const plain = new Harness().running();
      plain.observe(1, { phase: 'exited', exitCode: 3 });
      assert.equal(plain.state.keep, undefined);
      assert.deepEqual(plain.stop(Phase.Failed).releases.map((r) => r.attempt), [1]);
    });

    it('releases the attempt after all when it could not be kept', () => {
      for (const outcome of ['failed', 'absent'] as const) {
        const run = new Harness({ recovery: { keepOnFailure: '1h' } }).running();
        run.observe(1, { phase: 'exited', exitCode: 3 });
        const { releases, after } = run.stop(Phase.Failed, outcome);
        assert.deepEqual(releases, []);
        assert.deepEqual(after.map((r) => r.attempt), [1], `${outcome}: released after all`);
        assert.equal(run.state.keep?.status, 'not-kept');
        assert.match(run.state.timeline.at(-1)!.event, /^not kept: .*released like the others/);
        assert.equal(statusOf(run.state, run.now).kept, undefined);
      }
    });
  });

  describe('the VM-side limits', () => {
    it('stretches the resource limit\'s margin to the keep, and no further', () => {
      const plain = new Harness({ time: { deadlineAfter: '2h' } });
      const kept = new Harness({ time: { deadlineAfter: '2h' }, recovery: { keepOnFailure: '1h' } });
      const short = new Harness({ time: { deadlineAfter: '2h' }, recovery: { keepOnFailure: '5m' } });
      const deadline = T0 + 7_200_000;
      assert.equal(resourceReleaseByMs(plain.state, plain.spec, T0), deadline + RESOURCE_LIMIT_MARGIN_SECONDS * 1000);
      assert.equal(resourceReleaseByMs(kept.state, kept.spec, T0), deadline + 3_600_000, 'an attempt failing at the deadline is kept its full hour');
      assert.equal(resourceReleaseByMs(short.state, short.spec, T0), deadline + RESOURCE_LIMIT_MARGIN_SECONDS * 1000, 'a keep shorter than the margin changes nothing');
    });

    it('asks the agent to wait as long as the keep before powering off, only for runs that keep', () => {
      const kept = new Harness({ recovery: { keepOnFailure: '1h' } }).running();
      const plain = new Harness().running();
      const request = (run: Harness) => provisionRequest(run.spec, run.state, run.state.attempts[0], run.owner(1), run.now);
      assert.equal(request(kept).keepOnFailureSeconds, 3600);
      assert.equal('keepOnFailureSeconds' in request(plain), false, 'a run without it asks for what it always did');
      assert.equal(powerOffAfterSeconds(600, 3600), 3600);
      assert.equal(powerOffAfterSeconds(600, 120), 600);
      assert.equal(powerOffAfterSeconds(600, undefined), 600);
    });

    it('reads a VM\'s own time limit from its scheduling', () => {
      assert.equal(timeLimitMs({ scheduling: { terminationTime: '2026-12-01T02:00:00Z' } }), Date.parse('2026-12-01T02:00:00Z'));
      assert.equal(timeLimitMs({ scheduling: { maxRunDuration: { seconds: 3600 } }, lastStartTimestamp: '2026-12-01T00:00:00Z' }), T0 + 3_600_000);
      assert.equal(timeLimitMs({ scheduling: {} }), undefined);
    });
  });

  describe('the reaper', () => {
    const NOW = T0 + 3_600_000;
    const candidate = (keepUntil?: number): ReapCandidate => ({
      ref: { backend: 'gce', name: 'sterna-x', zone: 'us-central1-a' },
      owner: { run: runKey(WORKFLOW), execution: 'e1', attempt: 1 },
      workflowId: WORKFLOW,
      createdAt: new Date(T0).toISOString(),
      ...(keepUntil !== undefined ? { keepUntil } : {}),
    });
    const closed: OwnerRun = { found: true, open: false, status: 'FAILED', execution: 'e1', attempt: 1 };
    const decide = (c: ReapCandidate, owner: OwnerRun | undefined) => {
      const d = decideReap(c, owner, NOW, 600);
      return d.reap ? `reap:${d.reason}` : `keep:${d.reason}`;
    };
    const seconds = (ms: number) => Math.floor(ms / 1000);

    it('leaves a kept resource of an ended run alone until its keep-until, then deletes it', () => {
      assert.equal(decide(candidate(seconds(NOW + 60_000)), closed), `keep:${KeepReason.Kept}`);
      assert.equal(decide(candidate(seconds(NOW + 60_000)), { found: false }), `keep:${KeepReason.Kept}`, 'its run forgotten (retention): still kept until then');
      assert.equal(decide(candidate(seconds(NOW + 60_000)), { ...closed, open: true, status: 'RUNNING', execution: 'e2' }), `keep:${KeepReason.Kept}`, 'a new run reusing the workflow id');
      assert.equal(decide(candidate(seconds(NOW)), closed), `reap:${ReapReason.Closed}`);
      assert.equal(decide(candidate(seconds(NOW - 60_000)), closed), `reap:${ReapReason.Closed}`);
    });

    it('reaps an unlabelled resource of a closed run as before, and ignores a keep-until no keep could have written', () => {
      assert.equal(decide(candidate(), closed), `reap:${ReapReason.Closed}`);
      assert.equal(decide(candidate(seconds(NOW + 8 * 24 * 3_600_000)), closed), `reap:${ReapReason.Closed}`);
    });

    it('judges a kept resource of its own still-open run as that run\'s', () => {
      const open: OwnerRun = { ...closed, open: true, status: 'RUNNING' };
      assert.equal(decide(candidate(seconds(NOW + 60_000)), open), `keep:${KeepReason.Live}`);
    });

    it('reads the label only as a plain count of seconds', () => {
      assert.equal(keepUntilFromLabels({ [KEEP_UNTIL_LABEL]: '1796083200' }), 1796083200);
      for (const bad of ['', '0', '-1', '17e8', '2026-12-01', '1'.repeat(13)]) assert.equal(keepUntilFromLabels({ [KEEP_UNTIL_LABEL]: bad }), undefined, bad);
      assert.equal(keepUntilFromLabels({}), undefined);
    });
  });
});
