import { strict as assert } from 'node:assert';
import { WorkflowFailedError, WorkflowNotFoundError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { getTeam, setTeamLimits } from '../../client';
import { statusQuery } from '../../workflows/messages';
import type { RunResult } from '../../workflows/run/views';
import type { RunSpecInput } from '../../workflows/spec';
import type { trainingRun } from '../../workflows/run/training-run';
import { join } from 'node:path';
import { teamWorkflowId, type TeamInput } from '../../workflows/teams/contract';
import { allEvents, saveHistory } from '../helpers/histories';
import { eventually } from '../helpers/processes';
import { ScriptedProvider } from '../helpers/scripted-provider';
import { sternaTestWorker, testEnv, uniqueTaskQueue } from '../helpers/temporal';

const spec = (overrides: Partial<RunSpecInput> = {}): RunSpecInput => ({
  command: ['python', 'train.py'],
  checkpoint: { uri: 'gs://ckpt/run' },
  resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
  pricing: { mode: 'spot' },
  recovery: { pollSeconds: 0.2 },
  ...overrides,
});

/** Each run trains for this many looks (0.2 s apart) unless its zone is scripted otherwise. */
const QUICK = { kind: 'exit', code: 0, afterPolls: 3 } as const;
const LONG = { kind: 'exit', code: 0, afterPolls: 40 } as const;

type Run = WorkflowHandle<typeof trainingRun>;

/**
 * The team: the dev server's one namespace (`default`), since a run's team is the namespace
 * it runs in (one namespace for runs and fleet here: tenancy mode `single`).
 */
let TEAM = 'default';

describe('team budgets, GPU quotas and priority queueing (dev server, scripted cloud)', function () {
  this.timeout(240_000);

  before(async () => {
    TEAM = (await testEnv()).namespace ?? TEAM;
  });

  async function withTeam<T>(provider: ScriptedProvider, body: (ctx: { taskQueue: string; start: (id: string, s: RunSpecInput) => Promise<Run> }) => Promise<T>): Promise<T> {
    const taskQueue = uniqueTaskQueue('team');
    const worker = await sternaTestWorker(taskQueue, { gce: provider });
    const env = await testEnv();
    const start = (id: string, s: RunSpecInput) => env.client.workflow.start('trainingRun', { taskQueue, workflowId: `${taskQueue}-${id}`, args: [s] }) as Promise<Run>;
    return worker.runUntil(body({ taskQueue, start }));
  }

  const admission = async (run: Run) => (await run.query(statusQuery)).admission?.status;
  const admitted = (run: Run) => eventually(`${run.workflowId} admitted`, async () => ((await admission(run)) === 'admitted' ? true : undefined));
  const queued = (run: Run) => eventually(`${run.workflowId} queued`, async () => ((await admission(run)) === 'queued' ? true : undefined));
  /** The run ids in the order their VMs were created. */
  const creationOrder = (provider: ScriptedProvider) => provider.created.map((name) => provider.vms.get(name)!.request.agent.runId);

  it('queues a run while the team is at its GPU quota, starts it when one finishes, and records spend equal to the runs\' ledgers', async () => {
    const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 }], QUICK).script('us-central1-a', LONG);
    await withTeam(provider, async ({ taskQueue, start }) => {
      const env = await testEnv();
      await setTeamLimits(env.client, TEAM, { maxGpus: 1 }, { taskQueue });
      const first = await start('first', spec());
      await admitted(first);
      const second = await start('second', spec());
      await queued(second);
      assert.notEqual((await first.describe()).status.name, 'COMPLETED', 'the first run still holds the GPU while the second waits');
      assert.equal(provider.created.length, 1, 'nothing provisioned for the queued run');
      const view = await getTeam(env.client, TEAM, { taskQueue });
      assert.deepEqual([view.runningGpus, view.queue.map((q) => q.runId)], [1, [second.workflowId]]);

      const results: RunResult[] = [await first.result(), await second.result()];
      assert.deepEqual(creationOrder(provider), [first.workflowId, second.workflowId]);
      const admittedAt = (await second.query(statusQuery)).timeline.find((t) => t.kind === 'admitted')!.at;
      const releasedAt = (await first.query(statusQuery)).timeline.find((t) => t.kind === 'released')!.at;
      assert.ok(Date.parse(admittedAt) >= Date.parse(releasedAt), `admitted at ${admittedAt}, only after the first released its VM at ${releasedAt}`);

      const team = await eventually('both runs ended at the team', async () => {
        const v = await getTeam(env.client, TEAM, { taskQueue });
        return v.running.length === 0 && v.runs.length === 2 ? v : undefined;
      });
      // Each run's recorded spend is its ledger total, to the last bit; the period's is their sum.
      const byRun = Object.fromEntries(team.runs.map((r) => [r.runId, r.spentUsd]));
      assert.deepEqual(byRun, { [first.workflowId]: results[0].totalCostUsd, [second.workflowId]: results[1].totalCostUsd });
      assert.ok(results.every((r) => r.totalCostUsd > 0));
      assert.equal(team.spentUsd, results[0].totalCostUsd + results[1].totalCostUsd);
      // Re-record (test/pure/replay-histories.test.ts): a run that queued, and the team that queued it.
      const record = process.env.STERNA_RECORD_HISTORIES;
      if (record) {
        await saveHistory(join(record, 'team-run-queued-then-admitted.binpb'), second.workflowId);
        await saveHistory(join(record, 'team-ledger.binpb'), teamWorkflowId(taskQueue, TEAM));
      }
    });
  });

  it('lets a higher-priority run overtake a lower one queued before it', async () => {
    const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 }], QUICK).script('us-central1-a', LONG);
    await withTeam(provider, async ({ taskQueue, start }) => {
      const env = await testEnv();
      await setTeamLimits(env.client, TEAM, { maxGpus: 1 }, { taskQueue });
      const running = await start('running', spec());
      await admitted(running);
      const low = await start('low', spec({ priority: 5 }));
      await queued(low);
      const high = await start('high', spec({ priority: 1 }));
      await queued(high);
      assert.deepEqual((await getTeam(env.client, TEAM, { taskQueue })).queue.map((q) => [q.runId, q.position]), [
        [high.workflowId, 1],
        [low.workflowId, 2],
      ]);
      await Promise.all([running.result(), low.result(), high.result()]);
      assert.deepEqual(creationOrder(provider), [running.workflowId, high.workflowId, low.workflowId]);
    });
  });

  it('drops a queued run that was terminated (no finally ran) when it cannot be told, and admits the next', async () => {
    const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 }], QUICK).script('us-central1-a', LONG);
    await withTeam(provider, async ({ taskQueue, start }) => {
      const env = await testEnv();
      await setTeamLimits(env.client, TEAM, { maxGpus: 1 }, { taskQueue });
      const running = await start('running', spec());
      await admitted(running);
      const gone = await start('gone', spec({ priority: 1 }));
      await queued(gone);
      const next = await start('next', spec());
      await queued(next);
      await gone.terminate('gone without a word to its team');
      await Promise.all([running.result(), next.result()]);
      assert.deepEqual(creationOrder(provider), [running.workflowId, next.workflowId]);
      const team = await getTeam(env.client, TEAM, { taskQueue });
      assert.deepEqual([team.running, team.queue], [[], []]);
    });
  });

  it("gives a terminated running run's GPUs to the next at its sweep, asking the server, without waking the live runs", async () => {
    // Every run trains until cancelled here: only the sweep can free the terminated run's GPU.
    const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 }], { kind: 'exit', code: 0, afterPolls: 1_000 });
    await withTeam(provider, async ({ taskQueue, start }) => {
      const env = await testEnv();
      const teamId = teamWorkflowId(taskQueue, TEAM);
      await env.client.workflow.start('teamLedger', { taskQueue, workflowId: teamId, args: [{ team: TEAM, sweepSeconds: 2 } satisfies TeamInput] });
      await setTeamLimits(env.client, TEAM, { maxGpus: 2 }, { taskQueue });
      const live = await start('live', spec());
      const gone = await start('gone', spec());
      await Promise.all([admitted(live), admitted(gone)]);
      const next = await start('next', spec());
      await queued(next);
      await gone.terminate('gone without a word to its team');
      await admitted(next);
      const team = await getTeam(env.client, TEAM, { taskQueue });
      assert.deepEqual(team.running.map((h) => h.runId).sort(), [live.workflowId, next.workflowId].sort());
      // The sweeps asked the server; the live run heard one admission, its own.
      const admissions = (await allEvents(env.client, live.workflowId)).filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'admission');
      assert.equal(admissions.length, 1);
      await Promise.all([live.cancel(), next.cancel()]);
    });
  });

  it('refuses a run that would exceed the team budget with BudgetExceeded naming the team', async () => {
    const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 }], QUICK);
    await withTeam(provider, async ({ taskQueue, start }) => {
      const env = await testEnv();
      await setTeamLimits(env.client, TEAM, { budgetUsd: 1, period: 'day' }, { taskQueue });
      const run = await start('costly', spec({ pricing: { mode: 'spot', budgetUsd: 5 } }));
      const err = await run.result().then(
        () => assert.fail('expected BudgetExceeded'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure, String(err));
      assert.equal(err.cause.type, 'BudgetExceeded');
      assert.match(err.cause.message, new RegExp(String.raw`^team ${TEAM}: day budget \$1\.00 \(period from \S+\) would be exceeded: spent \$0\.00, this run may spend \$5\.00`));
      assert.equal(provider.created.length, 0, 'nothing was provisioned');
      assert.deepEqual((await getTeam(env.client, TEAM, { taskQueue })).queue, []);
      if (process.env.STERNA_RECORD_HISTORIES) await saveHistory(join(process.env.STERNA_RECORD_HISTORIES, 'team-run-refused.binpb'), run.workflowId);
    });
  });

  it('refuses a run whose spec names another team than its namespace (InvalidSpec), and no ledger is charged', async () => {
    const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 }], QUICK);
    await withTeam(provider, async ({ taskQueue, start }) => {
      const env = await testEnv();
      await setTeamLimits(env.client, TEAM, { maxGpus: 4 }, { taskQueue });
      const run = await start('claims-vision', spec({ labels: { team: 'vision' } }));
      const err = await run.result().then(
        () => assert.fail('expected InvalidSpec'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof WorkflowFailedError, String(err));
      // The run's failure carries the activity's, which says why and what to do.
      const causes: { message: string; type?: string }[] = [];
      for (let e = err as (Error & { type?: string }) | undefined; e; e = e.cause as typeof e) causes.push({ message: e.message, type: e.type });
      const refusal = causes.find((c) => c.message.includes(`names team vision, but it executes in namespace ${TEAM}`));
      assert.ok(refusal, JSON.stringify(causes));
      assert.equal(refusal.type, 'InvalidSpec');
      assert.match(refusal.message, /drop the team label/);
      assert.equal(provider.created.length, 0, 'nothing was provisioned');
      // Its namespace's ledger never heard of it, and no ledger was started for the team it named.
      const team = await getTeam(env.client, TEAM, { taskQueue });
      assert.ok(!JSON.stringify(team).includes(run.workflowId), JSON.stringify(team));
      const named = await env.client.workflow.getHandle(teamWorkflowId(taskQueue, 'vision')).describe().then(
        () => 'started',
        (e: unknown) => (e instanceof WorkflowNotFoundError ? 'not found' : e),
      );
      assert.equal(named, 'not found', 'the named team\'s ledger does not exist');
      // It shows as what it is: a run of its namespace's team.
      assert.deepEqual((await run.describe()).searchAttributes.SternaTeam, [TEAM]);
    });
  });

  it('a run without a team label, or naming its namespace, is its namespace\'s team: charged there, and shown so', async () => {
    const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 }], QUICK);
    await withTeam(provider, async ({ taskQueue, start }) => {
      const env = await testEnv();
      const plain = await start('plain', spec({ labels: {} }));
      const naming = await start('naming', spec({ labels: { team: TEAM } }));
      const results = await Promise.all([plain.result(), naming.result()]);
      const team = await eventually('both runs ended at the team', async () => {
        const v = await getTeam(env.client, TEAM, { taskQueue });
        return v.runs.filter((r) => !r.running).length === 2 ? v : undefined;
      });
      assert.deepEqual(team.runs.map((r) => r.runId).sort(), [plain.workflowId, naming.workflowId].sort());
      assert.equal(team.spentUsd, results[0].totalCostUsd + results[1].totalCostUsd);
      for (const run of [plain, naming]) {
        assert.deepEqual((await run.describe()).searchAttributes.SternaTeam, [TEAM], 'the workflow shows its namespace as its team');
        assert.equal((await run.query(statusQuery)).admission?.team, TEAM, 'the ledger answered its namespace');
      }
    });
  });

  it('releases queued runs when the budget is raised by update', async () => {
    const provider = new ScriptedProvider([{ zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 }], QUICK).script('us-central1-a', { kind: 'exit', code: 0, afterPolls: 1_000_000 });
    await withTeam(provider, async ({ taskQueue, start }) => {
      const env = await testEnv();
      await setTeamLimits(env.client, TEAM, { budgetUsd: 10, period: 'week' }, { taskQueue });
      const big = await start('big', spec({ pricing: { mode: 'spot', budgetUsd: 8 } }));
      await admitted(big);
      const waiting = await start('waiting', spec({ pricing: { mode: 'spot', budgetUsd: 5 } }));
      await queued(waiting);
      const raised = await setTeamLimits(env.client, TEAM, { budgetUsd: 20 }, { taskQueue });
      assert.deepEqual(raised.limits, { budget: { usd: 20, period: 'week' } });
      assert.deepEqual(raised.running.map((r) => r.runId).sort(), [big.workflowId, waiting.workflowId].sort(), 'admitted by the update itself');
      await waiting.result();
      assert.equal((await big.describe()).status.name, 'RUNNING', 'the big run still trains: the raise, not its end, let the other in');
      await big.cancel();
      await big.result().catch(() => undefined);
      await eventually('the cancelled run gave its GPU back', async () => ((await getTeam(env.client, TEAM, { taskQueue })).running.length === 0 ? true : undefined));
    });
  });
});
