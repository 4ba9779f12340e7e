import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { CostReport } from '../../client/cost-report';
import { micro } from '../../client/cost-report';
import { costQuery } from '../../client/cost';
import { statusQuery } from '../../workflows/messages';
import type { RunSpecInput } from '../../workflows/spec';
import { eventually } from '../helpers/processes';
import { ScriptedProvider } from '../helpers/scripted-provider';
import { sternaTestWorker, testEnv, testServerAddress, uniqueTaskQueue } from '../helpers/temporal';

const cli = join(__dirname, '..', '..', 'cli', 'main.js');

async function sterna(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { namespace } = await testEnv();
  const env = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: namespace };
  return new Promise((resolve) =>
    execFile(process.execPath, [cli, ...args], { env, timeout: 90_000, maxBuffer: 1 << 20 }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr })),
  );
}

const spec = (project: string, overrides: Partial<RunSpecInput> = {}): RunSpecInput => ({
  command: ['python', 'train.py'],
  checkpoint: { uri: 'gs://ckpt/run' },
  resources: { accelerators: [{ type: 'nvidia-l4', count: 2 }] },
  pricing: { mode: 'spot' },
  recovery: { pollSeconds: 0.2, zoneCooldown: '1h' },
  labels: { project },
  ...overrides,
});

describe('which executions sterna cost reads', () => {
  it('leaves out the executions a run continued from: its latest carries the whole ledger, so they would count twice', () => {
    assert.equal(costQuery({}), 'WorkflowType = "trainingRun" AND ExecutionStatus != "ContinuedAsNew"');
    assert.equal(costQuery({ query: 'SternaTeam = "ml"' }), 'WorkflowType = "trainingRun" AND ExecutionStatus != "ContinuedAsNew" AND (SternaTeam = "ml")');
  });
});

describe('sterna cost reports what the runs cost (dev server, scripted cloud)', function () {
  this.timeout(240_000);

  it('matches the runs\' own ledgers exactly, by project, and by team (the namespace they ran in)', async () => {
    // Expensive prices so seconds of training cost whole dollars; one run is preempted once, one fails.
    const provider = new ScriptedProvider(
      [
        { zone: 'us-central1-a', spot: 36, onDemand: 108 },
        { zone: 'us-east1-b', spot: 40, onDemand: 110 },
      ],
      { kind: 'exit', code: 0, afterPolls: 4 },
    ).script('us-central1-a', { kind: 'exit', code: 0, afterPolls: 4 }, { kind: 'preempt', step: 10, afterPolls: 3 }, { kind: 'exit', code: 3, afterPolls: 3 });
    const taskQueue = uniqueTaskQueue('cost');
    const worker = await sternaTestWorker(taskQueue, { gce: provider });
    const env = await testEnv();
    await worker.runUntil(async () => {
      const start = (id: string, s: RunSpecInput) => env.client.workflow.start('trainingRun', { taskQueue, workflowId: `${taskQueue}-${id}`, args: [s] });
      // One at a time, so each meets the zone script meant for it.
      const ids: Record<string, string> = {};
      for (const [id, project, s] of [
        ['ml-1', 'ml', {}],
        ['ml-2', 'ml', {}],
        ['nlp-1', 'nlp', { recovery: { pollSeconds: 0.2, noRetryExitCodes: [3] } }],
      ] as [string, string, Partial<RunSpecInput>][]) {
        const run = await start(id, spec(project, s));
        await run.result().catch(() => undefined);
        ids[id] = run.workflowId;
      }
      // The ledger each run itself answers with (a failed run has no result, but its status has the same ledger).
      const ledger: Record<string, { cost: number; onDemand: number; preemptions: number }> = {};
      for (const id of Object.values(ids)) {
        const status = await env.client.workflow.getHandle(id).query(statusQuery);
        ledger[id] = { cost: status.costUsd, onDemand: status.onDemandCostUsd, preemptions: status.preemptions };
      }
      assert.equal(ledger[ids['ml-2']].preemptions, 1);
      assert.ok(Object.values(ledger).every((l) => l.cost > 0));

      const query = `TaskQueue = "${taskQueue}"`;
      const report = await eventually('visibility lists the three runs with their memos', async () => {
        const out = await sterna(['cost', '--by', 'project', '--json', '--query', query]);
        assert.equal(out.code, 0, out.stderr);
        const parsed = JSON.parse(out.stdout) as CostReport;
        return parsed.total.runs === 3 ? parsed : undefined;
      });
      const sum = (...runs: string[]) => micro(runs.sort().reduce((s, id) => s + ledger[id].cost, 0));
      const onDemand = (...runs: string[]) => micro(runs.sort().reduce((s, id) => s + ledger[id].onDemand, 0));
      const ml = report.groups.find((g) => g.group === 'ml')!;
      const nlp = report.groups.find((g) => g.group === 'nlp')!;
      assert.deepEqual([ml.runs, ml.costUsd, ml.onDemandCostUsd, ml.preemptions], [2, sum(ids['ml-1'], ids['ml-2']), onDemand(ids['ml-1'], ids['ml-2']), 1]);
      assert.deepEqual([nlp.runs, nlp.costUsd, nlp.onDemandCostUsd, nlp.preemptions], [1, sum(ids['nlp-1']), onDemand(ids['nlp-1']), 0]);
      assert.equal(report.total.costUsd, sum(...Object.values(ids)));
      assert.ok(ml.gpuHours > 0 && ml.savingsUsd > 0, 'two-GPU spot runs: GPU-hours counted, savings against on-demand');

      // One namespace, one team: every run is its namespace's, whatever its labels.
      const byTeam = await sterna(['cost', '--by', 'team', '--json', '--query', query]);
      assert.equal(byTeam.code, 0, byTeam.stderr);
      const teams = (JSON.parse(byTeam.stdout) as CostReport).groups;
      assert.deepEqual(teams.map((g) => [g.group, g.runs, g.costUsd]), [[env.namespace, 3, sum(...Object.values(ids))]]);

      const csv = await sterna(['cost', '--by', 'zone', '--csv', '--query', query]);
      assert.equal(csv.code, 0, csv.stderr);
      assert.deepEqual(csv.stdout.trim().split('\n').map((l) => l.split(',')[0]).sort(), ['group', 'total', 'us-central1-a', 'us-east1-b']);
    });
  });
});
