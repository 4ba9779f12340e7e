/**
 * A slice of the robustness table in bench/README.md (bench/robustness.ts), so a change
 * that loses what the table shows fails here: the 2-zone trace's V100 x1 group on its
 * native grid, R = 52 h, d = 0.05 h, seeds 1-3 with 8 windows each, as in the table; and one
 * gang row of the 16-node trace (below).
 */
import { strict as assert } from 'node:assert';
import { PairedVerdict } from '../bench/paired';
import { robustnessRows } from '../bench/robustness';
import { Memory } from '../bench/run';
import { View } from '../bench/simulate';
import { loadTrace } from '../bench/trace';

const TRACE = `${__dirname}/../../../shared/traces/aws-gpu-2zone-2022-10.json`;

describe('policy robustness (a slice of the table)', function () {
  this.timeout(120_000);
  const variants = [
    { view: View.Full, memory: Memory.Cold },
    { view: View.Live, memory: Memory.Cold },
    { view: View.Live, memory: Memory.Warm },
  ];
  const rows = robustnessRows({ trace: loadTrace(TRACE, 'p3.2xlarge'), deadlineHours: 52, changeoverHours: 0.05 }, [1, 2, 3], 8, variants);
  const row = (view: View, memory: Memory) => rows.find((r) => r.view === view && r.memory === memory)!;

  it('sterna meets every deadline in every view', () => {
    for (const r of rows) assert.equal(r.policies.sterna.deadlinesMet, r.windows, `${r.view}/${r.memory}`);
  });

  it('sterna is strictly the cheapest online policy in the full view and in the live view with warm memory', () => {
    for (const r of [row(View.Full, Memory.Cold), row(View.Live, Memory.Warm)]) {
      assert.ok(r.sternaCheapest, `${r.view}/${r.memory}: ${JSON.stringify(r.policies)}`);
      assert.ok(r.policies.sterna.mean < 1.25, `${r.view}/${r.memory}: sterna mean ${r.policies.sterna.mean}`);
    }
  });

  it('sterna is never significantly dearer than the best other policy, window by window', () => {
    for (const r of rows) assert.notEqual(r.versusBestOther.verdict, PairedVerdict.Dearer, `${r.view}/${r.memory}: ${JSON.stringify(r.versusBestOther)}`);
  });

  it('warm memory lowers sterna\'s mean against cold in the live view', () => {
    assert.ok(row(View.Live, Memory.Warm).policies.sterna.mean < row(View.Live, Memory.Cold).policies.sterna.mean);
  });
});

/**
 * The table's gang rows (bench/README.md): the 16-node trace with a gang of 8 (a zone has
 * capacity only where availableNodes >= 8, at 8 x the node's price, for the optimum and
 * every policy alike), native grid, R = 52 h, d = 0.2 h, seeds 1-3 with 8 windows each.
 */
describe('policy robustness, a gang row (a slice of the table)', function () {
  this.timeout(120_000);
  const GANG_TRACE = `${__dirname}/../../../shared/traces/aws-v100-3zone-16node-2023-08.json`;
  const variants = [
    { view: View.Full, memory: Memory.Cold },
    { view: View.Live, memory: Memory.Cold },
    { view: View.Live, memory: Memory.Warm },
  ];
  const rows = robustnessRows({ trace: loadTrace(GANG_TRACE, undefined, 8), deadlineHours: 52, changeoverHours: 0.2 }, [1, 2, 3], 8, variants);
  const row = (view: View, memory: Memory) => rows.find((r) => r.view === view && r.memory === memory)!;

  it('names the gang in its row', () => {
    for (const r of rows) {
      assert.equal(r.group, 'p3.2xlarge (V100 x1), gang of 8');
      assert.equal(r.nodes, 8);
    }
  });

  it('every policy meets every deadline in every view', () => {
    for (const r of rows) for (const [name, p] of Object.entries(r.policies)) assert.equal(p.deadlinesMet, r.windows, `${r.view}/${r.memory} ${name}`);
  });

  it('sterna is the cheapest online policy, window by window, in the full view and in the live view with warm memory', () => {
    for (const r of [row(View.Full, Memory.Cold), row(View.Live, Memory.Warm)]) {
      assert.ok(r.sternaCheapest, `${r.view}/${r.memory}: ${JSON.stringify(r.policies)}`);
      assert.equal(r.versusBestOther.verdict, PairedVerdict.Cheaper, `${r.view}/${r.memory}: ${JSON.stringify(r.versusBestOther)}`);
    }
  });

  it('sterna is never significantly dearer than the best other policy', () => {
    for (const r of rows) assert.notEqual(r.versusBestOther.verdict, PairedVerdict.Dearer, `${r.view}/${r.memory}: ${JSON.stringify(r.versusBestOther)}`);
  });
});
