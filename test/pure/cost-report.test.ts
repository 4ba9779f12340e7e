import { strict as assert } from 'node:assert';
import { costCsv, costReport, type RunCost } from '../../client/cost-report';
import { timeArgument } from '../../cli/cost';
import type { CostLine } from '../../workflows/run/cost-refresh';

const line = (zone: string, accelerator: string, hours: number, price: number, onDemand: number, gpus = 1, preemptions = 0): CostLine => ({
  zone,
  accelerator,
  provisioningModel: 'SPOT',
  gpus,
  attempts: 1,
  preemptions,
  runningSeconds: hours * 3600,
  gpuSeconds: hours * 3600 * gpus,
  costUsd: price * hours,
  onDemandCostUsd: onDemand * hours,
});

const run = (workflowId: string, team: string, lines: CostLine[], project?: string, namespace = 'default'): RunCost => ({
  namespace,
  workflowId,
  team,
  project,
  costUsd: lines.reduce((s, l) => s + l.costUsd, 0),
  onDemandCostUsd: lines.reduce((s, l) => s + l.onDemandCostUsd, 0),
  preemptions: lines.reduce((s, l) => s + l.preemptions, 0),
  lines,
  source: 'memo',
});

// Known costs: a 2-hour L4 run at $0.25/h that was preempted once and moved zones, a 4 x A100 hour at $4/h per VM.
const runs = [
  run('a', 'vision', [line('us-central1-a', 'nvidia-l4', 1, 0.25, 0.75, 1, 1), line('us-east1-b', 'nvidia-l4', 1, 0.25, 0.75)], 'detector'),
  run('b', 'nlp', [line('us-central1-a', 'nvidia-a100', 1, 4, 12, 4)], 'llm'),
  run('c', 'vision', [line('europe-west4-a', 'nvidia-l4', 0.5, 0.3, 0.8)]),
];

describe('cost report (pure)', () => {
  it('groups whole runs by team with spend, savings, GPU-hours, preemptions and runs', () => {
    const report = costReport(runs, 'team');
    assert.deepEqual(report.groups, [
      { group: 'nlp', runs: 1, costUsd: 4, onDemandCostUsd: 12, savingsUsd: 8, savingsRatio: 0.6667, gpuHours: 4, preemptions: 0 },
      { group: 'vision', runs: 2, costUsd: 0.65, onDemandCostUsd: 1.9, savingsUsd: 1.25, savingsRatio: 0.6579, gpuHours: 2.5, preemptions: 1 },
    ]);
    assert.deepEqual(report.total, { group: 'total', runs: 3, costUsd: 4.65, onDemandCostUsd: 13.9, savingsUsd: 9.25, savingsRatio: 0.6655, gpuHours: 6.5, preemptions: 1 });
  });

  it('splits a run across the zones and accelerators it paid for, and names runs without a project', () => {
    const zones = costReport(runs, 'zone').groups.map((g) => [g.group, g.runs, g.costUsd, g.preemptions]);
    assert.deepEqual(zones, [
      ['us-central1-a', 2, 4.25, 1],
      ['europe-west4-a', 1, 0.15, 0],
      ['us-east1-b', 1, 0.25, 0],
    ].sort((x, y) => (y[2] as number) - (x[2] as number)));
    assert.deepEqual(costReport(runs, 'accelerator').groups.map((g) => [g.group, g.runs, g.gpuHours]), [['nvidia-a100', 1, 4], ['nvidia-l4', 2, 2.5]]);
    assert.deepEqual(costReport(runs, 'project').groups.map((g) => g.group), ['llm', 'detector', '(none)']);
  });

  it('gives the same sums whatever order the runs were listed in, and writes CSV with a total row', () => {
    assert.deepEqual(costReport([...runs].reverse(), 'team'), costReport(runs, 'team'));
    assert.equal(costCsv(costReport(runs, 'team')), [
      'group,runs,costUsd,onDemandCostUsd,savingsUsd,savingsRatio,gpuHours,preemptions',
      'nlp,1,4,12,8,0.6667,4,0',
      'vision,2,0.65,1.9,1.25,0.6579,2.5,1',
      'total,3,4.65,13.9,9.25,0.6655,6.5,1',
      '',
    ].join('\n'));
  });

  it('groups by namespace, and counts two teams\' runs of the same workflow id as two runs', () => {
    const spread = [
      run('train', 'team-a', [line('us-central1-a', 'nvidia-l4', 2, 0.25, 0.75)], undefined, 'team-a'),
      run('train', 'team-b', [line('us-east1-b', 'nvidia-l4', 1, 0.25, 0.75)], undefined, 'team-b'),
      run('eval', 'team-b', [line('us-east1-b', 'nvidia-l4', 1, 0.5, 0.75)], undefined, 'team-b'),
    ];
    const report = costReport(spread, 'namespace');
    assert.deepEqual(report.groups.map((g) => [g.group, g.runs, g.costUsd]), [['team-b', 2, 0.75], ['team-a', 1, 0.5]]);
    assert.deepEqual([report.total.runs, report.total.costUsd], [3, 1.25]);
    assert.equal(costReport(spread, 'zone').total.runs, 3);
  });

  it('reads --since as an ISO time or a duration ago', () => {
    const now = Date.parse('2026-12-03T12:00:00Z');
    assert.equal(timeArgument('7d', now).toISOString(), '2026-11-26T12:00:00.000Z');
    assert.equal(timeArgument('2026-12-01T00:00:00Z', now).toISOString(), '2026-12-01T00:00:00.000Z');
    assert.throws(() => timeArgument('last week', now), /expected an ISO 8601 time/);
  });
});
