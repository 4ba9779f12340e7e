/**
 * What a run tells its webhooks, server-less: the pure decision (run/notify.ts) fed by
 * the same machine the workflow drives, the spec's webhook rules, and the payloads.
 */
import { strict as assert } from 'node:assert';
import { payloadFor, uiLink } from '../../activities/notify/payload';
import { loadWorkerConfig } from '../../config/worker-config';
import type { Action as Command, Effect, RunEvent } from '../../workflows/run/protocol';
import { mayNotify, notificationsDue, notifyWakeAtMs, type NotifyEvent } from '../../workflows/run/notify';
import { Phase } from '../../workflows/run/state';
import { checkSpec, type RunSpecInput } from '../../workflows/spec';
import type { Offer } from '../../workflows/types';
import { offerIn, RunHarness, specOf, T0 } from '../helpers/run-harness';

const WORKFLOW = 'run-7';
const OFFERS: Offer[] = ['us-central1-a', 'us-east1-b', 'europe-west4-a'].map((zone) => offerIn(zone, 0.36));

/** The reducer, stepped as the workflow steps it, and the notifications its steps hand to delivery. */
class Run extends RunHarness {
  /** Every notification handed to delivery, in order. */
  readonly told: NotifyEvent[] = [];

  constructor(overrides: Partial<RunSpecInput> = {}) {
    // It runs in namespace `ml`, its team (its ledger said so at admission).
    super(WORKFLOW, specOf({ recovery: { pollSeconds: 5, zoneCooldown: '1h', maxRestartsOnError: 2 }, ...overrides }), 'ml');
  }

  /** One step of the loop; what it notified is told. */
  override send(event: RunEvent): Command {
    super.send(event);
    this.collect(this.effects);
    return this.last;
  }

  /** The run ends so (after its releases): what its end notifies. */
  end(ended: Extract<RunEvent, { kind: 'ended' }>): NotifyEvent[] {
    return this.collect(this.apply(ended));
  }

  private collect(effects: readonly Effect[]): NotifyEvent[] {
    const due = effects.flatMap((e) => (e.kind === 'notify' ? e.events : []));
    this.told.push(...due);
    return due;
  }

  /** Provisions whatever the machine asks for next; attempt `n` stages. */
  override provisioned(offers = OFFERS): number {
    return super.provisioned(offers);
  }

  kinds(): string[] {
    return this.told.map((e) => e.key);
  }
}

/** A run that asks its team for admission first, as a team run does on a worker with teams. */
class TeamRun extends Run {
  override context() {
    return { ...super.context(), teamAdmission: true };
  }
}

describe('notifications (pure, no server)', () => {
  it('tells started once, each preemption with its count, each restart with its failure, and completed', () => {
    const run = new Run();
    run.send({ kind: 'start' });
    assert.deepEqual(run.told, [], 'nothing before an attempt is up');
    let attempt = run.provisioned();
    run.at(10).observe(attempt, { phase: 'training', step: 5 });
    run.at(20).observe(attempt, { lifecycle: 'terminated', preempted: true });
    run.released(attempt);
    attempt = run.at(30).provisioned();
    run.at(40).observe(attempt, { phase: 'exited', exitCode: 3 });
    run.released(attempt);
    attempt = run.at(50).provisioned();
    run.at(60).observe(attempt, { phase: 'exited', exitCode: 0 });
    assert.equal(run.released(attempt).kind, 'complete');
    run.end({ kind: 'ended', phase: Phase.Completed });
    assert.deepEqual(run.kinds(), ['run-7/started/1', 'run-7/preempted/1', 'run-7/restarted/1', 'run-7/completed/1']);
    const [started, preempted, restarted, completed] = run.told.slice() as NotifyEvent[];
    assert.deepEqual([started.team, started.zone, started.attempt, started.phase], ['ml', run.state.attempts[0].offer.zone, 1, 'staging']);
    assert.deepEqual([preempted.count, preempted.zone], [1, run.state.attempts[0].offer.zone]);
    assert.deepEqual([restarted.count, restarted.failure], [1, { message: 'exit code 3' }]);
    assert.equal(completed.phase, 'completed');
    assert.ok(completed.costUsd > 0);
  });

  it('listens for a team run until the worker that carried its admission says the team has no webhooks; a run with its own always', () => {
    const run = new TeamRun();
    run.send({ kind: 'start' });
    assert.equal(mayNotify(run.spec, run.state), true, 'before the ask: the team may have webhooks');
    run.send({ kind: 'admission-asked', teamWebhooks: false });
    assert.equal(run.state.admission?.teamWebhooks, false);
    assert.equal(mayNotify(run.spec, run.state), false, 'no one listens: the run sends nothing');
    const asked = new TeamRun();
    asked.send({ kind: 'start' });
    asked.send({ kind: 'admission-asked', teamWebhooks: true });
    assert.equal(mayNotify(asked.spec, asked.state), true);
    const old = new TeamRun();
    old.send({ kind: 'start' });
    old.send({ kind: 'admission-asked' });
    assert.equal(mayNotify(old.spec, old.state), true, 'a run recorded before the answer listens as it did');
    const own = new TeamRun({ notify: { webhooks: [{ url: 'https://hooks.example.com/run' }] } });
    own.send({ kind: 'start' });
    own.send({ kind: 'admission-asked', teamWebhooks: false });
    assert.equal(mayNotify(own.spec, own.state), true);
  });

  it('a step replayed from the same state hands out the same keys, and never one already handed out', () => {
    const run = new Run();
    run.send({ kind: 'start' });
    run.provisioned();
    const copy = structuredClone(run.state);
    copy.notify = undefined;
    assert.deepEqual(notificationsDue(copy, run.spec, { kind: 'step' }, run.now, undefined).map((e) => e.key), ['run-7/started/1']);
    assert.deepEqual(notificationsDue(run.state, run.spec, { kind: 'step' }, run.now, run.state.notify), []);
  });

  it('warns at 80% and at 100% of the budget, waking for each at the live price, and re-arms when the budget is raised', () => {
    // $0.36/h: 80% of $0.01 is spent after 80 s, all of it after 100 s.
    const run = new Run({ pricing: { mode: 'spot', budgetUsd: 0.01 } });
    run.send({ kind: 'start' });
    run.provisioned();
    assert.equal(notifyWakeAtMs(run.state, run.spec, run.now, run.state.notify), T0 + 80_000);
    run.at(79).observe(1, { phase: 'training' });
    assert.deepEqual(run.kinds(), ['run-7/started/1']);
    run.at(80).send({ kind: 'tick' });
    assert.deepEqual(run.kinds().slice(1), ['run-7/budget-80/1']);
    assert.equal(notifyWakeAtMs(run.state, run.spec, run.now, run.state.notify), T0 + 100_000);
    run.apply({ kind: 'budget-set', usd: 0.02 });
    run.at(100).send({ kind: 'tick' });
    assert.deepEqual(run.kinds().slice(2), [], 'the raised budget is at 50%');
    run.at(160).send({ kind: 'tick' });
    assert.deepEqual(run.kinds().slice(2), ['run-7/budget-80/2']);
    const cmd = run.at(200).send({ kind: 'tick' });
    assert.deepEqual(run.kinds().slice(3), ['run-7/budget-100/2']);
    assert.equal(cmd.kind, 'fail', 'the limit stops the run at the same step');
    run.end({ kind: 'ended', phase: Phase.Failed, failure: 'BudgetExceeded', message: 'spent $0.02' });
    assert.deepEqual(run.told.at(-1)!.failure, { type: 'BudgetExceeded', message: 'spent $0.02' });
  });

  it('warns when the deadline is at risk by the policy\'s estimate: not while training keeps pace, but once nothing trains', () => {
    const run = new Run({ pricing: { mode: 'spot' }, time: { deadlineAfter: '2h', expectedDuration: '1h' } });
    run.send({ kind: 'start' });
    run.provisioned();
    run.at(1800).observe(1, { phase: 'training' });
    assert.deepEqual(run.kinds(), ['run-7/started/1'], '1 h of slack while it trains');
    run.at(1800).observe(1, { lifecycle: 'terminated', preempted: true });
    run.released(1);
    // 30 min trained, 30 min of work left, 90 min to go: at risk once slack < 2 min, at 1:28.
    const wake = notifyWakeAtMs(run.state, run.spec, run.now, run.state.notify);
    assert.equal(wake, T0 + (7200 - 1800 - 120) * 1000);
    run.at(5279).send({ kind: 'tick' });
    assert.ok(!run.kinds().some((k) => k.includes('deadline')));
    run.at(5280).send({ kind: 'tick' });
    const risk = run.told.at(-1)!;
    assert.equal(risk.key, `run-7/deadline-at-risk/${(T0 + 7_200_000) / 1000}`);
    assert.deepEqual(risk.estimate, { remainingWorkSeconds: 1800, secondsToDeadline: 1920 });
  });

  it('tells failed with the named failure, once', () => {
    const run = new Run();
    run.send({ kind: 'start' });
    const ended = { kind: 'ended', phase: Phase.Failed, failure: 'NoCapacity', message: 'no zone offers nvidia-l4' } as const;
    assert.deepEqual(run.end(ended).map((e) => [e.key, e.failure?.type]), [['run-7/failed/1', 'NoCapacity']]);
    assert.deepEqual(run.end(ended), []);
  });

  describe('where notifications go', () => {
    const base = { command: ['x'], checkpoint: { uri: 'gs://bkt/c' }, resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] } };
    const problems = (webhooks: unknown[]) => {
      const check = checkSpec({ ...base, notify: { webhooks } });
      return check.ok ? [] : check.problems.map((p) => `${p.path}: ${p.message}`);
    };

    it('takes plain URLs without secrets, and refs to STERNA_WEBHOOK_* worker variables', () => {
      assert.deepEqual(problems([{ url: 'https://hooks.example.com/sterna' }, { ref: 'env://STERNA_WEBHOOK_ML', format: 'slack', on: ['failed', 'completed'] }]), []);
    });

    it('refuses a URL carrying a secret in history, pointing at ref instead', () => {
      for (const url of ['https://hooks.slack.com/services/T0/B0/XXXX', 'https://example.com/hook?token=abc', 'https://user:pw@example.com/hook']) {
        const [problem] = problems([{ url }]);
        assert.match(problem, /^notify\.webhooks\.0\.url: this URL carries .* give ref: "env:\/\/STERNA_WEBHOOK_<NAME>" instead$/);
      }
    });

    it('names the field for a bad ref, a missing target or an unknown kind', () => {
      assert.match(problems([{ ref: 'env://HOME' }])[0], /^notify\.webhooks\.0\.ref: a reference to a worker environment variable/);
      assert.match(problems([{ format: 'slack' }])[0], /^notify\.webhooks\.0: give exactly one of url and ref$/);
      assert.match(problems([{ url: 'https://a.example/x', on: ['exploded'] }])[0], /^notify\.webhooks\.0\.on\.0: /);
    });

    it('reads the team webhooks and the UI link from the worker environment, naming the variable when bad', () => {
      const config = loadWorkerConfig({ STERNA_GCE_PROJECT: 'my-project', STERNA_NOTIFY_TEAMS: '{"ml":[{"url":"https://hooks.slack.com/services/T/B/X","format":"slack"}]}', STERNA_NOTIFY_UI_URL: 'https://temporal.example.com' });
      assert.deepEqual(config.notify, { teams: { ml: [{ url: 'https://hooks.slack.com/services/T/B/X', format: 'slack' }] }, uiBaseUrl: 'https://temporal.example.com' });
      assert.throws(() => loadWorkerConfig({ STERNA_GCE_PROJECT: 'my-project', STERNA_NOTIFY_TEAMS: '{ml:' }), /STERNA_NOTIFY_TEAMS: JSON such as/);
    });
  });

  it('formats the event as JSON or as a Slack message linking to the web UI', () => {
    const run = new Run({ name: 'llama-ft' });
    run.send({ kind: 'start' });
    run.provisioned();
    const url = uiLink('https://ui.example/', 'default', 'run-7');
    assert.equal(url, 'https://ui.example/namespaces/default/workflows/run-7');
    const event = { ...run.told[0], url };
    assert.deepEqual(payloadFor('json', event), event);
    assert.deepEqual(payloadFor('slack', event), { text: 'Sterna run <https://ui.example/namespaces/default/workflows/run-7|llama-ft> (team ml) started', sterna: event });
  });
});
