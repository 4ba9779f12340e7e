/**
 * `node build/bench/robustness.js [--windows 30] [--out file.json]`: the robustness table
 * of bench/README.md. Every trace and instance group in ../shared/traces, seeds 1-3, the
 * native grid and one 3x coarser, R in {52, 70} h, d in {0.05, 0.2} h, C = 48 h, under
 * each view and memory. Windows of the three seeds are pooled in a row; the optimum of a
 * window is computed once and shared by every view.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { DEFAULT_FLEX, type FlexOptions } from './flex';
import { type PairedDifference, PairedVerdict, pairedDifference, pairedVerdict } from './paired';
import { OPTIMAL, PAIR, onlinePolicies } from './policies';
import type { ThresholdPair } from './hindsight';
import { ticksFor } from './problem';
import { type BenchOptions, type BenchResult, type FlexSummary, Memory, type Variant, flexSummary, runBenchVariants } from './run';
import { View } from './simulate';
import { readTraceFile } from '../config/spot-trace';
import { type Trace, countsNodes, drySpells, groupLabel, narrowTrace, resample } from './trace';

export interface RobustnessCase {
  trace: Trace;
  deadlineHours: number;
  changeoverHours: number;
  /** Offer the flex-start tier (the rows' ratios are then to the optimum with it). */
  flex?: FlexOptions;
  /** Also run one fixed pair of the two-threshold family (full-view rows; `pair`). */
  thresholds?: ThresholdPair;
}

export interface RobustnessRow {
  trace: string;
  /** The instance group, and for a gang its size (`p3.2xlarge (V100 x1), gang of 8`). */
  group: string;
  /** A gang of this many nodes (absent: one). */
  nodes?: number;
  gridSeconds: number;
  deadlineHours: number;
  changeoverHours: number;
  view: View;
  memory: Memory;
  windows: number;
  /** Per online policy: mean and p95 of cost / optimum over the pooled windows, and deadlines met. */
  policies: Record<string, { mean: number; p95: number; deadlinesMet: number }>;
  /** sterna's mean is strictly below every other online policy's. */
  sternaCheapest: boolean;
  /**
   * sterna against the other online policy with the lowest mean (the best other), window by window: sterna's
   * ratio minus its, with a 95% bootstrap interval (windows resampled in blocks of trace time, traceBlocks),
   * and whether the windows tell them apart.
   */
  versusBestOther: PairedDifference & { policy: string; verdict: PairedVerdict };
  /** sterna's mean in this view minus its mean in the full view (same memory). */
  gapToFull: number;
  /** What the row's windows sample: how many independent stretches of the trace, and which market-wide outages. */
  sample: WindowSample;
  /** With the flex-start tier: its effect over the pooled windows. */
  flex?: FlexSummary;
  /** With `--thresholds`, full-view rows: the fixed pair's mean and p95 of cost / optimum, and deadlines met. */
  pair?: { mean: number; p95: number; deadlinesMet: number };
}

const ONLINE = onlinePolicies.map((p) => p.name);

function percentile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)];
}

/**
 * The block of trace time each window starts in, one window (`windowTicks`) long: windows
 * of one block (of any seed) share most of their capacity, so the paired comparison
 * resamples them together.
 */
function traceBlocks(starts: readonly number[], windowTicks: number): number[] {
  return starts.map((t) => Math.floor(t / windowTicks));
}

/**
 * The windows overlap (a row's 90 cover each hour of a trace 4-10 times), so a row samples
 * far fewer market events than windows: `blocks` is how many blocks of trace time
 * (traceBlocks) its windows start in; the dry spells are the trace's (at the row's grid),
 * those any window overlaps, and how many windows overlap none.
 */
export interface WindowSample {
  blocks: number;
  drySpells: number;
  drySpellsOfAnHour: number;
  drySpellsSeen: number;
  windowsWithoutDrySpell: number;
}

function windowSample(c: RobustnessCase, starts: readonly number[], windowTicks: number, blocks: readonly number[]): WindowSample {
  const spells = drySpells(c.trace);
  const overlaps = (start: number) => spells.filter((s) => s.startTick < start + windowTicks && s.startTick + s.ticks > start);
  return {
    blocks: new Set(blocks).size,
    drySpells: spells.length,
    drySpellsOfAnHour: spells.filter((s) => (s.ticks * c.trace.gapSeconds) / 3600 >= 1).length,
    drySpellsSeen: new Set(starts.flatMap(overlaps)).size,
    windowsWithoutDrySpell: starts.filter((t) => overlaps(t).length === 0).length,
  };
}

/** One row per variant for one case, pooling the seeds' windows. */
export function robustnessRows(c: RobustnessCase, seeds: readonly number[], windows: number, variants: readonly Variant[]): RobustnessRow[] {
  const options = (seed: number): BenchOptions => ({ jobHours: 48, deadlineHours: c.deadlineHours, changeoverHours: c.changeoverHours, windows, seed, flex: c.flex, thresholds: c.thresholds });
  const perSeed: BenchResult[][] = seeds.map((seed) => runBenchVariants(c.trace, options(seed), variants));
  // Every variant runs on the same windows: what they sample is the case's, worked out once.
  const starts = perSeed.flatMap((results) => results[0].windows.map((w) => w.startTick));
  const { deadlineTicks } = ticksFor(options(seeds[0]), c.trace.gapSeconds / 3600);
  const blocks = traceBlocks(starts, deadlineTicks);
  const sample = windowSample(c, starts, deadlineTicks, blocks);
  const rows = variants.map((v, i) => {
    const ws = perSeed.flatMap((results) => results[i].windows);
    const ratios = new Map(ONLINE.map((name) => [name, ws.map((w) => w.policies[name].cost / w.optimalCost)]));
    const summary = (name: string, r: number[]) => ({ mean: r.reduce((a, b) => a + b, 0) / r.length, p95: percentile(r, 0.95), deadlinesMet: ws.filter((w) => w.policies[name].deadlineMet).length });
    const policies = Object.fromEntries(ONLINE.map((name) => [name, summary(name, ratios.get(name)!)]));
    const pair = ws[0].policies[PAIR] === undefined ? undefined : summary(PAIR, ws.map((w) => w.policies[PAIR].cost / w.optimalCost));
    const sterna = policies.sterna.mean;
    const bestOther = ONLINE.filter((n) => n !== 'sterna').reduce((best, n) => (policies[n].mean < policies[best].mean ? n : best));
    const paired = pairedDifference(ratios.get('sterna')!, ratios.get(bestOther)!, blocks);
    return {
      trace: c.trace.name,
      group: groupLabel(c.trace),
      ...(c.trace.nodes > 1 ? { nodes: c.trace.nodes } : {}),
      gridSeconds: c.trace.gapSeconds,
      deadlineHours: c.deadlineHours,
      changeoverHours: c.changeoverHours,
      view: v.view,
      memory: v.memory,
      windows: ws.length,
      policies,
      sternaCheapest: ONLINE.every((n) => n === 'sterna' || policies[n].mean > sterna),
      versusBestOther: { policy: bestOther, ...paired, verdict: pairedVerdict(paired) },
      gapToFull: 0,
      sample,
      ...(c.flex ? { flex: flexSummary(ws, c.flex) } : {}),
      ...(pair ? { pair } : {}),
    };
  });
  for (const r of rows) {
    const full = rows.find((f) => f.view === View.Full && f.memory === r.memory);
    r.gapToFull = full === undefined ? NaN : r.policies.sterna.mean - full.policies.sterna.mean;
  }
  return rows;
}

const f3 = (x: number) => x.toFixed(3);
const signed = (x: number) => (x >= 0 ? '+' : '') + f3(x);

/** "+0.012 [+0.003, +0.020] vs eager-next-region, dearer": a tie is said as such, a loss in bold. */
function pairedCell(p: RobustnessRow['versusBestOther']): string {
  const cell = `${signed(p.mean)} [${signed(p.low)}, ${signed(p.high)}] vs ${p.policy}, ${p.verdict}`;
  return p.verdict === PairedVerdict.Dearer ? `**${cell}**` : cell;
}

/** The cells that name a row's setting, first in both tables. */
const SETTING_HEAD = ['trace (instances)', 'grid s', 'R h', 'd h', 'view', 'memory'];
function settingCells(r: RobustnessRow): string[] {
  return [`${r.trace} (${r.group})`, String(r.gridSeconds), String(r.deadlineHours), String(r.changeoverHours), r.view, r.memory];
}

export function formatRows(rows: readonly RobustnessRow[]): string {
  const names = ONLINE.filter((n) => n !== 'on-demand');
  const head = [...SETTING_HEAD, ...names.map((n) => `${n} mean / p95`), 'deadlines (all policies)', 'sterna cheapest', 'sterna - best other, paired [95% CI]', 'sterna - full'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const r of rows) {
    const met = ONLINE.map((n) => r.policies[n].deadlinesMet);
    const cells = [
      ...settingCells(r),
      ...names.map((n) => `${f3(r.policies[n].mean)} / ${f3(r.policies[n].p95)}`),
      met.every((m) => m === r.windows) ? `${r.windows}/${r.windows}` : met.map((m, i) => `${ONLINE[i]} ${m}/${r.windows}`).join(', '),
      r.sternaCheapest ? 'yes' : '**no**',
      pairedCell(r.versusBestOther),
      r.view === View.Full ? '-' : signed(r.gapToFull),
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

/**
 * Per view and memory, over its rows: where sterna is strictly cheapest, the paired
 * verdicts, each baseline's and sterna's mean (averaged over the rows), sterna's worst row
 * mean and p95, its gap to the full view, and whether every policy met every deadline.
 */
export function formatSummary(rows: readonly RobustnessRow[]): string {
  const names = ONLINE.filter((n) => n !== 'on-demand');
  const head = ['view / memory', 'sterna strictly cheapest', 'sterna vs best other, paired: cheaper / tie / dearer', ...names, 'sterna worst row mean / worst p95', 'sterna - full (avg)', 'deadlines'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  const groups = [...new Set(rows.map((r) => `${r.view} / ${r.memory}`))];
  for (const g of groups) {
    const rs = rows.filter((r) => `${r.view} / ${r.memory}` === g);
    const avg = (f: (r: RobustnessRow) => number) => rs.reduce((a, r) => a + f(r), 0) / rs.length;
    const count = (v: PairedVerdict) => rs.filter((r) => r.versusBestOther.verdict === v).length;
    const dearer = count(PairedVerdict.Dearer);
    const met = rs.every((r) => ONLINE.every((n) => r.policies[n].deadlinesMet === r.windows));
    const cells = [
      g,
      `${rs.filter((r) => r.sternaCheapest).length} / ${rs.length}`,
      `${count(PairedVerdict.Cheaper)} / ${count(PairedVerdict.Tie)} / ${dearer > 0 ? `**${dearer}**` : 0}`,
      ...names.map((n) => (n === 'sterna' ? `**${f3(avg((r) => r.policies[n].mean))}**` : f3(avg((r) => r.policies[n].mean)))),
      `${f3(Math.max(...rs.map((r) => r.policies.sterna.mean)))} / ${Math.max(...rs.map((r) => r.policies.sterna.p95)).toFixed(2)}`,
      rs[0].view === View.Full ? '-' : signed(avg((r) => r.gapToFull)),
      met ? 'all met' : '**not all met**',
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

/**
 * With `--thresholds`: per full-view row, the fixed pair against sterna and the best other
 * online policy, and whether it is cheaper than sterna. A pair fitted to one row (the
 * README's hindsight table) either holds on the others or was fitted.
 */
export function formatPairRows(rows: readonly RobustnessRow[], thresholds: ThresholdPair): string {
  const name = `threshold pair (wait ${thresholds.waitChangeovers} d, hold ${thresholds.holdChangeovers} d)`;
  const head = [...SETTING_HEAD, 'sterna mean / p95', `${name} mean / p95`, 'best other online mean / p95', 'pair cheaper than sterna', 'pair deadlines'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  const withPair = rows.filter((r) => r.pair !== undefined);
  for (const r of withPair) {
    const pair = r.pair!;
    const other = r.policies[r.versusBestOther.policy];
    const cells = [
      ...settingCells(r),
      `${f3(r.policies.sterna.mean)} / ${f3(r.policies.sterna.p95)}`,
      `${f3(pair.mean)} / ${f3(pair.p95)}`,
      `${f3(other.mean)} / ${f3(other.p95)} (${r.versusBestOther.policy})`,
      pair.mean < r.policies.sterna.mean ? 'yes' : 'no',
      `${pair.deadlinesMet}/${r.windows}`,
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  const cheaper = withPair.filter((r) => r.pair!.mean < r.policies.sterna.mean).length;
  lines.push('', `The pair is cheaper than sterna in ${cheaper} of ${withPair.length} full-view rows.`);
  return lines.join('\n');
}

/** What each setting's windows sample (WindowSample), once per trace group, grid and R. */
export function formatSamples(rows: readonly RobustnessRow[]): string {
  const lines = ['| trace (instances) | grid s | R h | windows | blocks of trace time | dry spells in the trace (1 h or more) | dry spells the windows overlap | windows overlapping none |', '|---|---|---|---|---|---|---|---|'];
  const seen = new Set<string>();
  for (const r of rows) {
    const key = `${r.trace} (${r.group}) | ${r.gridSeconds} | ${r.deadlineHours}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const s = r.sample;
    lines.push(`| ${key} | ${r.windows} | ${s.blocks} | ${s.drySpells} (${s.drySpellsOfAnHour}) | ${s.drySpellsSeen} | ${s.windowsWithoutDrySpell} |`);
  }
  return lines.join('\n');
}

/** The flex-start table: per row, the optimum and sterna with and without the tier, and deadlines. */
export function formatFlexRows(rows: readonly RobustnessRow[]): string {
  const head = [...SETTING_HEAD, 'optimum with / without flex', 'sterna without flex / its optimum', 'sterna with flex / its optimum', 'sterna without flex / optimum with', 'sterna saving from flex', 'deadlines with / without', 'requests (expired)'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const r of rows) {
    const f = r.flex;
    if (f === undefined) continue;
    const cells = [
      ...settingCells(r),
      f3(f.optimumRatio),
      f3(f.sternaWithoutFlex),
      f3(f.sternaWithFlex),
      f3(f.sternaWithoutVsFlexOptimum),
      `${(100 * f.sternaSavings).toFixed(1)}%`,
      `${f.deadlinesWithFlex}/${f.windows} / ${f.deadlinesWithoutFlex}/${f.windows}`,
      `${f.flexRequests} (${f.flexExpired})`,
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

/** Per view and memory: the flex table's columns averaged over its rows, deadlines summed. */
export function formatFlexSummary(rows: readonly RobustnessRow[]): string {
  const head = ['view / memory', 'rows', 'optimum with / without flex', 'sterna without flex / its optimum', 'sterna with flex / its optimum', 'sterna without flex / optimum with', 'sterna saving from flex', 'deadlines with / without', 'requests (expired)'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  const groups = [...new Set(rows.map((r) => `${r.view} / ${r.memory}`))];
  for (const g of groups) {
    const fs = rows.filter((r) => `${r.view} / ${r.memory}` === g && r.flex).map((r) => r.flex!);
    const avg = (f: (x: FlexSummary) => number) => fs.reduce((a, x) => a + f(x), 0) / fs.length;
    const sum = (f: (x: FlexSummary) => number) => fs.reduce((a, x) => a + f(x), 0);
    lines.push(
      `| ${[g, fs.length, f3(avg((x) => x.optimumRatio)), f3(avg((x) => x.sternaWithoutFlex)), f3(avg((x) => x.sternaWithFlex)), f3(avg((x) => x.sternaWithoutVsFlexOptimum)), `${(100 * avg((x) => x.sternaSavings)).toFixed(1)}%`, `${sum((x) => x.deadlinesWithFlex)}/${sum((x) => x.windows)} / ${sum((x) => x.deadlinesWithoutFlex)}/${sum((x) => x.windows)}`, `${sum((x) => x.flexRequests)} (${sum((x) => x.flexExpired)})`].join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

/**
 * Every instance group of every trace file in `dir`, on the native grid and one `coarse`
 * times coarser; for each gang size in `nodes` above 1, the same on the files that count
 * nodes (availableNodes). Sizes asked for (`asked`, not the default) above 1 with no such
 * file among `files` are an error.
 */
export function robustnessTraces(dir: string, files: readonly string[], coarse: number, nodes: readonly number[] = [1], asked = false): Trace[] {
  const traces: Trace[] = [];
  const gangs = nodes.filter((n) => n > 1);
  let counted = false;
  for (const name of files) {
    const file = readTraceFile(join(dir, name));
    const sizes = countsNodes(file) ? nodes : nodes.filter((n) => n === 1);
    counted ||= countsNodes(file);
    for (const n of sizes) {
      for (const group of narrowTrace(file).groups) {
        const trace = narrowTrace(file, group, n);
        traces.push(trace, resample(trace, trace.gapSeconds * coarse));
      }
    }
  }
  if (asked && gangs.length > 0 && !counted) throw new Error(`--nodes ${gangs.join(',')}: none of ${files.join(', ')} counts nodes (availableNodes), so no gang can be placed; add a file that does (e.g. aws-v100-3zone-16node-2023-08.json) or use --nodes 1`);
  return traces;
}

function main(): void {
  const count = (v: string) => {
    const x = Number(v);
    if (!Number.isInteger(x) || x < 1) throw new InvalidArgumentError('expected a whole number >= 1');
    return x;
  };
  const list = (v: string) => v.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  const pairOf = (v: string): ThresholdPair => {
    const parts = list(v).map(Number);
    const [wait, hold] = parts;
    if (parts.length !== 2 || !(wait >= 0) || !(hold >= 0)) throw new InvalidArgumentError('expected two numbers >= 0, in changeovers: wait,hold (e.g. 2.5,8)');
    return { waitChangeovers: wait, holdChangeovers: hold };
  };
  const command = new Command('bench:robustness')
    .description('The robustness table: every trace group, seeds, two grids, R, d, views and memories')
    .option('--traces <dir>', 'trace directory', '../shared/traces')
    .option('--files <list>', 'trace files', list, ['aws-v100-9zone-2023-02.json', 'aws-gpu-2zone-2022-10.json', 'aws-v100-3zone-16node-2023-08.json'])
    .option('--nodes <list>', 'gang sizes: 1 on every file, each size above 1 on the files that count nodes (availableNodes)', (v) => list(v).map(Number), [1, 4, 8, 16])
    .option('--windows <n>', 'windows per seed', count, 30)
    .option('--seeds <list>', 'seeds', (v) => list(v).map(Number), [1, 2, 3])
    .option('--coarse <k>', 'the coarser grid, in native ticks', count, 3)
    .option('--views <list>', 'views', list, [View.Full, View.Live, View.Fleet])
    .option('--memories <list>', 'memories', list, [Memory.Cold, Memory.Warm])
    .option('--out <file>', 'write the rows as JSON')
    .option('--flex', 'offer the flex-start tier: the flex table (optimum and sterna with and without it) instead')
    .option('--flex-wait-hours <h>', 'flex-start: mean wait for capacity (each zone within x2 of it)', Number, DEFAULT_FLEX.meanWaitHours)
    .option('--flex-max-wait-hours <h>', 'flex-start: a request\'s wait window', Number, DEFAULT_FLEX.maxWaitHours)
    .option('--deadlines <list>', 'R values, hours', (v) => list(v).map(Number), [52, 70])
    .option('--changeovers <list>', 'd values, hours', (v) => list(v).map(Number), [0.05, 0.2])
    .option('--native-only', 'only the native grid')
    .option('--thresholds <wait,hold>', 'also run the two-threshold family with this one pair, in changeovers (full-view rows): its own table', pairOf)
    .parse();
  const o = command.opts<{ traces: string; files: string[]; nodes: number[]; windows: number; seeds: number[]; coarse: number; views: View[]; memories: Memory[]; out?: string; flex?: boolean; flexWaitHours: number; flexMaxWaitHours: number; deadlines: number[]; changeovers: number[]; nativeOnly?: boolean; thresholds?: ThresholdPair }>();
  const flex = o.flex === true ? { meanWaitHours: o.flexWaitHours, maxWaitHours: o.flexMaxWaitHours } : undefined;
  if (flex && !(flex.meanWaitHours > 0 && flex.maxWaitHours > 0)) throw new Error('--flex-wait-hours and --flex-max-wait-hours must be positive numbers');
  for (const v of o.views) if (!Object.values(View).includes(v)) throw new Error(`--views: ${v} is not one of ${Object.values(View).join(', ')}`);
  for (const n of o.nodes) if (!Number.isInteger(n) || n < 1) throw new Error(`--nodes: ${n} is not a whole number of nodes >= 1`);
  for (const m of o.memories) if (!Object.values(Memory).includes(m)) throw new Error(`--memories: ${m} is not one of ${Object.values(Memory).join(', ')}`);
  const variants = o.views.flatMap((view) => o.memories.map((memory) => ({ view, memory })));
  const rows: RobustnessRow[] = [];
  for (const trace of robustnessTraces(o.traces, o.files, o.nativeOnly === true ? 1 : o.coarse, o.nodes, command.getOptionValueSource('nodes') !== 'default').filter((t, i, all) => all.indexOf(t) === i)) {
    for (const deadlineHours of o.deadlines) {
      for (const changeoverHours of o.changeovers) {
        const started = performance.now();
        const batch = robustnessRows({ trace, deadlineHours, changeoverHours, flex, thresholds: o.thresholds }, o.seeds, o.windows, variants);
        rows.push(...batch);
        console.error(`${trace.name} ${groupLabel(trace)} ${trace.gapSeconds}s R${deadlineHours} d${changeoverHours}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
        if (o.out !== undefined) writeFileSync(o.out, `${JSON.stringify(rows)}\n`);
      }
    }
  }
  if (flex) {
    console.log(`${formatFlexSummary(rows)}\n\n${formatFlexRows(rows)}`);
    return;
  }
  console.log(formatRows(rows));
  const cheapest = rows.filter((r) => r.sternaCheapest).length;
  const verdicts = Object.values(PairedVerdict).map((v) => `${rows.filter((r) => r.versusBestOther.verdict === v).length} ${v}`);
  console.log(`\nsterna strictly cheapest online policy in ${cheapest} of ${rows.length} rows; against the best other online policy, window by window (95% bootstrap, windows resampled in blocks of trace time): ${verdicts.join(', ')}. ${OPTIMAL} is the omniscient optimum in every view.`);
  console.log(`\n${formatSummary(rows)}`);
  console.log(`\n${formatSamples(rows)}`);
  if (o.thresholds !== undefined) console.log(`\n${formatPairRows(rows, o.thresholds)}`);
}

if (require.main === module) {
  try {
    main();
  } catch (err) {
    console.error(`bench:robustness: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 2;
  }
}
