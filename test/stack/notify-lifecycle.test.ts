/**
 * Notifications end to end: real runs on the GCE emulator, a worker in its own process,
 * and a local HTTP server standing in for the webhooks (the run's, named by an env://
 * ref, and its team's, in Slack format). Each kind must reach the receiver under exactly
 * one idempotency key, also when the worker is SIGKILLed while a request is in flight.
 */
import { strict as assert } from 'node:assert';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runReaperOnce } from '../../activities/reaper';
import { runKey } from '../../workflows/naming';
import { statusQuery } from '../../workflows/messages';
import type { NotifyEvent } from '../../workflows/run/notify';
import { eventually, type Spawned } from '../helpers/processes';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';

interface Received {
  path: string;
  key: string;
  body: Record<string, unknown>;
}

/** A webhook receiver that records every request, and can leave one unanswered. */
class Receiver {
  readonly received: Received[] = [];
  private server!: Server;
  private holds: { match: (r: Received) => boolean; arrived: (r: Received) => void }[] = [];
  private held: ServerResponse[] = [];

  async start(): Promise<number> {
    this.server = createServer((req, res) => void this.take(req, res));
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as AddressInfo).port;
  }

  private async take(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const r: Received = { path: req.url ?? '', key: String(req.headers['idempotency-key']), body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> };
    this.received.push(r);
    const hold = this.holds.findIndex((h) => h.match(r));
    if (hold >= 0) {
      // Received and processed, but the answer never leaves: the sender cannot know.
      this.holds.splice(hold, 1)[0].arrived(r);
      this.held.push(res);
      return;
    }
    res.writeHead(200).end('ok');
  }

  /** The first request matching `match` is left unanswered; resolves when it arrives. */
  holdFirst(match: (r: Received) => boolean): Promise<Received> {
    return new Promise((arrived) => this.holds.push({ match, arrived }));
  }

  /** What one run sent to one path: the event of each key, and how often each key came. */
  of(runId: string, path: string): { events: Map<string, NotifyEvent>; times: Map<string, number> } {
    const events = new Map<string, NotifyEvent>();
    const times = new Map<string, number>();
    for (const r of this.received.filter((r) => r.path === path && r.key.startsWith(`${runId}/`))) {
      const event = (path === '/team' ? r.body.sterna : r.body) as NotifyEvent;
      const earlier = events.get(r.key);
      if (earlier) assert.deepEqual(event, earlier, `a repeat of ${r.key} carries the same event`);
      events.set(r.key, event);
      times.set(r.key, (times.get(r.key) ?? 0) + 1);
    }
    return { events, times };
  }

  async stop(): Promise<void> {
    for (const res of this.held) res.destroy();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** Each kind under exactly one key, for both webhooks, and the kinds are `expected`. */
function assertEachOnce(receiver: Receiver, runId: string, expected: string[]): Map<string, NotifyEvent> {
  for (const path of ['/run', '/team']) {
    const { events } = receiver.of(runId, path);
    const kinds = [...events.values()].map((e) => e.kind);
    assert.deepEqual([...kinds].sort(), [...expected].sort(), `${path}: one key per kind (${[...events.keys()].join(', ')})`);
    for (const [key, event] of events) assert.equal(key, `${runId}/${event.kind}/${key.split('/').at(-1)}`);
  }
  return receiver.of(runId, '/run').events;
}

function find(events: Map<string, NotifyEvent>, kind: string): NotifyEvent {
  const event = [...events.values()].find((e) => e.kind === kind);
  assert.ok(event, `a ${kind} event`);
  return event;
}

describe('notifications at a local webhook, from real runs', function () {
  // Liveness bounds, not timings: each run here starts a worker process and, in CI, shares two cores with two other suites.
  this.timeout(900_000);
  const receiver = new Receiver();
  let stack: Stack;
  let worker: Spawned;
  let env: NodeJS.ProcessEnv;
  const notify = { webhooks: [{ ref: 'env://STERNA_WEBHOOK_TEST' }] };
  /** Every run's team: the stack's one namespace. */
  const team = () => stack.env.namespace ?? 'default';

  before(async () => {
    const port = await receiver.start();
    stack = await startStack({ timeFactor: 10 });
    env = {
      STERNA_WEBHOOK_TEST: `http://127.0.0.1:${port}/run`,
      // A team's webhooks are keyed by its namespace: here the stack's one, whose team every run is.
      STERNA_NOTIFY_TEAMS: JSON.stringify({ [team()]: [{ url: `http://127.0.0.1:${port}/team`, format: 'slack' }] }),
      STERNA_NOTIFY_UI_URL: 'http://ui.test:8233',
    };
    worker = stack.spawnWorker(env);
  });
  after(async () => {
    await worker?.kill('SIGTERM');
    await stack?.stop();
    await receiver.stop();
  });

  it('tells started, preempted (with the count) and completed once each, also when the worker is SIGKILLed mid-delivery', async () => {
    const run = await stack.start(exampleSpec({ notify }));
    const held = receiver.holdFirst((r) => r.path === '/run' && r.key.startsWith(`${run.workflowId}/preempted/`));
    const s = await eventually('a checkpoint', async () => {
      const s = await run.query(statusQuery);
      return s.phase === 'training' && (s.lastCheckpoint?.step ?? 0) > 40 ? s : undefined;
    }, 480_000);
    const [vm] = (await stack.provider.listRunResources(runKey(run.workflowId))).map((r) => r.name);
    await stack.emulator.preempt(s.zone!, vm);
    const request = await held;
    await worker.kill('SIGKILL');
    worker = stack.spawnWorker(env);
    const result = await run.result();
    assert.equal(result.status, 'completed');
    const events = assertEachOnce(receiver, run.workflowId, ['started', 'preempted', 'completed']);
    assert.ok((receiver.of(run.workflowId, '/run').times.get(request.key) ?? 0) >= 2, 'the request in flight at the SIGKILL was sent again, with its key');
    assert.equal(find(events, 'preempted').count, 1);
    assert.equal(find(events, 'completed').phase, 'completed');
    assert.equal((find(events, 'completed') as NotifyEvent & { url: string }).url, `http://ui.test:8233/namespaces/${stack.env.namespace}/workflows/${run.workflowId}`);
    const slack = receiver.received.find((r) => r.path === '/team' && r.key === `${run.workflowId}/completed/1`)!;
    assert.match(String(slack.body.text), new RegExp(String.raw`^Sterna run <http:\/\/ui\.test:8233\/.*\|logreg-example> \(team ${team()}\) completed for \$`));
  });

  it('tells restarted after a failure, then failed with the named failure', async () => {
    const run = await stack.start(exampleSpec({ notify, command: ['sh', '-c', 'exit 3'], recovery: { maxRestartsOnError: 1, pollSeconds: 0.3 } }));
    await run.result().catch(() => undefined);
    const events = assertEachOnce(receiver, run.workflowId, ['started', 'restarted', 'failed']);
    assert.deepEqual(find(events, 'restarted').failure, { message: 'exit code 3' });
    assert.equal(find(events, 'failed').failure?.type, 'UserCodeFailed');
  });

  it('tells 80% and 100% of the budget, then failed with BudgetExceeded', async () => {
    const run = await stack.start(exampleSpec({ notify, pricing: { mode: 'spot', budgetUsd: 0.0005 } }));
    await run.result().catch(() => undefined);
    const events = assertEachOnce(receiver, run.workflowId, ['started', 'budget-80', 'budget-100', 'failed']);
    assert.ok(find(events, 'budget-80').costUsd >= 0.0004 - 1e-9);
    assert.equal(find(events, 'failed').failure?.type, 'BudgetExceeded');
  });

  it("tells the deadline at risk by the policy's estimate, then failed with DeadlineMissed", async () => {
    // 4,000 steps take 100 s: past the deadline whatever the machine's load.
    const command = ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', '4000', '--step-ms', '25'];
    const run = await stack.start(exampleSpec({ notify, command, time: { deadlineAfter: '20s', expectedDuration: '1h' } }));
    await run.result().catch(() => undefined);
    // Started is told only if an attempt came up before the deadline: the run's own timeline says.
    const cameUp = (await run.query(statusQuery)).timeline.some((e) => e.kind === 'running');
    const events = assertEachOnce(receiver, run.workflowId, ['deadline-at-risk', 'failed', ...(cameUp ? ['started'] : [])]);
    const risk = find(events, 'deadline-at-risk');
    assert.ok(risk.estimate!.remainingWorkSeconds > risk.estimate!.secondsToDeadline);
    assert.equal(find(events, 'failed').failure?.type, 'DeadlineMissed');
  });

  it("tells reaped when the reaper deletes a terminated run's VM", async () => {
    const run = await stack.start(exampleSpec({ notify }));
    await eventually('training', async () => ((await run.query(statusQuery)).phase === 'training' ? true : undefined), 240_000);
    const [vm] = (await stack.provider.listRunResources(runKey(run.workflowId))).map((r) => r.name);
    await eventually('started, told', () => (receiver.of(run.workflowId, '/team').events.size > 0 ? true : undefined));
    await run.terminate('leaves its VM behind');
    const pass = await runReaperOnce(stack.env.client, { taskQueue: stack.taskQueue, input: { graceSeconds: 0, backends: ['gce'] } });
    assert.ok(pass.reaped.some((r) => r.ref.name === vm && r.outcome === 'deleted'));
    const events = assertEachOnce(receiver, run.workflowId, ['started', 'reaped']);
    const reaped = find(events, 'reaped');
    assert.equal(reaped.key, `${run.workflowId}/reaped/${vm}`);
    assert.deepEqual([reaped.resource?.name, reaped.resource?.reason, reaped.team, reaped.phase], [vm, 'closed', team(), 'terminated']);
  });
});
