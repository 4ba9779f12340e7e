/**
 * The trace file format is parsed once (config/spot-trace.ts): the emulator and the
 * policy benchmark read the same entries from the same file and apply the same rules.
 */
import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { drySpells, narrowTrace } from '../bench/trace';
import { parseTraceFile, readTraceFile, SPOT_PRICE_DIVISOR } from '../config/spot-trace';
import { traceFromFile } from '../emulator/trace';

const TRACES = join(__dirname, '..', '..', '..', 'shared', 'traces');

describe('spot trace files', () => {
  it('gives the emulator and the benchmark the same availability and prices from one parse', () => {
    const file = readTraceFile(join(TRACES, 'aws-gpu-2zone-2022-10.json'));
    const emulated = traceFromFile(file);
    const bench = narrowTrace(file, 'p2.xlarge');
    assert.equal(bench.group, 'p2.xlarge (K80 x1)');
    for (const series of bench.zones) {
      const entry = emulated.entries.find((e) => e.sourceZone === series.zone && e.accelerator === 'nvidia-tesla-k80' && e.acceleratorCount === 1);
      assert.ok(entry, series.zone);
      assert.equal(entry.available, Array.from(series.available).join(''));
      // No spot series in this file: both see on-demand / 3.1446 at every tick.
      assert.equal(entry.spotPrice, entry.onDemandPrice / SPOT_PRICE_DIVISOR);
      assert.ok(series.spotPrice.every((p) => p === entry.spotPrice));
    }
  });

  it('applies file-level defaults to every zone entry and keeps per-tick prices', () => {
    const file = parseTraceFile(
      { name: 't', gapSeconds: 60, accelerator: 'L4', onDemandPrice: 2, zones: [{ zone: 'us-east-1a', available: '101', spotPrice: [0.5, 0.6, 0.7] }, { zone: 'us-east-1b', available: '11', onDemandPrice: 3 }] },
      't.json',
    );
    assert.deepEqual(
      file.entries.map((e) => [e.zone, e.accelerator, e.acceleratorCount, e.onDemandPrice, e.spotPrice, e.spotPriceDerived]),
      [
        ['us-east-1a', 'L4', 1, 2, [0.5, 0.6, 0.7], false],
        ['us-east-1b', 'L4', 1, 3, 3 / SPOT_PRICE_DIVISOR, true],
      ],
    );
    assert.equal(parseTraceFile({ gapSeconds: 60, onDemandPrice: 1, zones: [{ zone: 'z', available: '1' }] }, 'unnamed.json').name, 'unnamed.json');
  });

  it('finds the dry spells, the ticks at which no zone has capacity, each from its start to its end', () => {
    const file = parseTraceFile({ name: 't', gapSeconds: 60, onDemandPrice: 1, zones: [{ zone: 'a', available: '0011000100' }, { zone: 'b', available: '0100000110' }] }, 't.json');
    assert.deepEqual(drySpells(narrowTrace(file)), [
      { startTick: 0, ticks: 1 },
      { startTick: 4, ticks: 3 },
      { startTick: 9, ticks: 1 },
    ]);
  });

  it('narrows to a gang of N: capacity only where availableNodes >= N, at N times every price', () => {
    const file = parseTraceFile(
      { name: 'g', gapSeconds: 60, onDemandPrice: 3, zones: [{ zone: 'a', available: '01111', availableNodes: [0, 1, 4, 8, 16], spotPrice: [1, 1, 1, 2, 2] }, { zone: 'b', available: '11100', availableNodes: [16, 7, 8, 0, 0] }] },
      'g.json',
    );
    const avail = (n: number) => narrowTrace(file, undefined, n).zones.map((z) => Array.from(z.available).join(''));
    assert.deepEqual(avail(1), ['01111', '11100'], 'one node: available itself');
    assert.deepEqual(avail(8), ['00011', '10100']);
    assert.deepEqual(avail(16), ['00001', '10000']);
    const gang = narrowTrace(file, undefined, 4);
    assert.equal(gang.nodes, 4);
    assert.deepEqual(Array.from(gang.zones[0].spotPrice), [4, 4, 4, 8, 8]);
    assert.deepEqual(gang.zones.map((z) => z.onDemandPrice), [12, 12]);
    // The real 16-node file: a gang of 16 never has capacity where a gang of 8 has none.
    const real = readTraceFile(join(TRACES, 'aws-v100-3zone-16node-2023-08.json'));
    const [eight, sixteen] = [8, 16].map((n) => narrowTrace(real, undefined, n));
    for (const [z, series] of sixteen.zones.entries()) assert.ok(series.available.every((a, t) => a <= eight.zones[z].available[t]), series.zone);
    assert.ok(sixteen.zones.some((s, z) => s.available.some((a, t) => a < eight.zones[z].available[t])), 'the sizes differ somewhere');
  });

  it('refuses a gang of more than one on a trace that does not count nodes, naming the trace', () => {
    const file = readTraceFile(join(TRACES, 'aws-gpu-2zone-2022-10.json'));
    assert.equal(narrowTrace(file, undefined, 1).nodes, 1);
    assert.throws(() => narrowTrace(file, undefined, 4), /aws-gpu-2zone-2022-10: zone us-west-2a has no availableNodes, so a gang of 4 cannot be placed/);
    assert.throws(() => narrowTrace(file, undefined, 0), /whole number of nodes >= 1/);
  });

  it('refuses malformed files with the field named', () => {
    const base = { name: 't', gapSeconds: 60, onDemandPrice: 1 };
    const cases: [unknown, RegExp][] = [
      [{ ...base, zones: [] }, /zones: .*1/],
      [{ ...base, gapSeconds: 0, zones: [{ zone: 'a', available: '1' }] }, /gapSeconds/],
      [{ ...base, zones: [{ zone: 'a', available: '' }] }, /zones\.0\.available/],
      [{ ...base, zones: [{ zone: 'a', available: '10x' }] }, /zones\.0\.available/],
      [{ ...base, zones: [{ zone: 'a', available: '10', spotPrice: [1] }] }, /spotPrice has 1 ticks, available has 2/],
      [{ ...base, zones: [{ zone: 'a', available: '1', spotPrice: -1 }] }, /zones\.0\.spotPrice/],
      [{ ...base, zones: [{ zone: 'a', available: '1', acceleratorCount: 1.5 }] }, /zones\.0\.acceleratorCount/],
      [{ name: 't', gapSeconds: 60, zones: [{ zone: 'a', available: '1' }] }, /zones\[0\] \(a\): no onDemandPrice/],
      [{ ...base, zones: [{ zone: 'a', available: '10', availableNodes: [3] }] }, /availableNodes has 1 ticks, available has 2/],
      [{ ...base, zones: [{ zone: 'a', available: '10', availableNodes: [3, 2] }] }, /tick 1: availableNodes is 2 but available is 0/],
      [{ ...base, zones: [{ zone: 'a', available: '1', availableNodes: [1.5] }] }, /zones\.0\.availableNodes/],
    ];
    for (const [json, message] of cases) assert.throws(() => parseTraceFile(json, 'bad.json'), message, JSON.stringify(json));
  });
});
