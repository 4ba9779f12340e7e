/**
 * The chaos benchmark: its rules without a server (outcomes, duplicates, ledger gaps,
 * trace replay, the seeded fault plan), and a reduced slice of the real thing — 50 runs,
 * a 2-minute fault window with every kind of fault, then the reaper — whose JSON line
 * must show no stuck run, no leak after the reaper and no duplicate VM. Timing is not asserted.
 */
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { backgroundFaults, duplicateVms, faultPlan, foreignNameRuns, ledgerGapPct, Outcome, tally, traceFlips } from '../../bench/chaos/analysis';
import { parseChaosOptions } from '../../bench/chaos/main';
import type { TraceFile } from '../../emulator/spot-trace';

const labels = (run: string, exec: string, attempt: number) => ({ 'sterna-run': run, 'sterna-exec': exec, 'sterna-attempt': String(attempt) });

describe('bench:chaos rules', () => {
  it('counts a second instance under one run, execution and attempt as a duplicate, and nothing else', () => {
    const billing = [
      { instanceId: '1', labels: labels('r', 'e', 1) },
      { instanceId: '2', labels: labels('r', 'e', 2) },
      { instanceId: '3', labels: labels('r', 'f', 1) },
      { instanceId: '4', labels: labels('r', 'e', 2) },
      { instanceId: '5', labels: {} },
    ];
    assert.deepEqual(duplicateVms(billing), { count: 1, owners: ['r/e/2'] });
  });

  it('measures the ledger against billing in per cent of what was billed', () => {
    assert.equal(ledgerGapPct(0.99, 1), 1.0000000000000009);
    assert.equal(ledgerGapPct(0, 0), 0);
    assert.equal(ledgerGapPct(1, 0), 100);
  });

  it('tallies every outcome, including the ones that must be zero', () => {
    assert.deepEqual(tally([Outcome.Completed, Outcome.Completed, Outcome.Stuck]), { completed: 2, 'failed-named': 0, 'failed-other': 0, cancelled: 0, terminated: 0, stuck: 1 });
  });

  it('replays a trace as capacity changes of the emulator zones, one tick at a time', () => {
    const trace: TraceFile = {
      name: 't',
      gapSeconds: 60,
      entries: [
        { zone: 'a', available: '1100111', acceleratorCount: 1, onDemandPrice: 1, spotPrice: 0.3, spotPriceDerived: false },
        { zone: 'b', available: '1111111', acceleratorCount: 1, onDemandPrice: 1, spotPrice: 0.3, spotPriceDerived: false },
      ],
    };
    // A 7-tick window fits the trace only from tick 0.
    assert.deepEqual(traceFlips(trace, ['z1', 'z2'], 7000, 1000, 5), [
      { atMs: 2000, zone: 'z1', available: false },
      { atMs: 4000, zone: 'z1', available: true },
    ]);
  });

  it('plans every fault inside the window from the seed alone, terminating a tenth of the runs but never run 0', () => {
    const plan = faultPlan(50, 600_000, 200, 7);
    assert.deepEqual(plan, faultPlan(50, 600_000, 200, 7));
    assert.equal(plan.terminations.length, 5);
    assert.ok(plan.terminations.every((t) => t.run > 0 && t.run < 50 && t.atMs < 600_000));
    assert.ok([...plan.workerKills, plan.serverRestartAt, plan.outage.atMs, plan.cancelsAt, plan.reuseAt].every((t) => t > 0 && t < 600_000));
  });

  it('refuses flags that cannot work, naming the flag', () => {
    const flags = { runs: '50', minutes: '2', seed: '1', outage: '200s', reaperInterval: '60s', reaperGrace: '60s', trace: 'x', traceTick: '5s', faultMix: '6' };
    assert.throws(() => parseChaosOptions({ ...flags, runs: '5' }), /--runs/);
    assert.throws(() => parseChaosOptions(flags), /--outage: 200 s does not fit in a 2-minute fault window/);
    assert.equal(parseChaosOptions({ ...flags, outage: '20s' }).outageSeconds, 20);
    assert.throws(() => parseChaosOptions({ ...flags, outage: '20s', faultMix: '95' }), /--fault-mix: expected a per cent from 0 to 90, got "95"/);
    assert.equal(parseChaosOptions({ ...flags, outage: '20s', faultMix: '25' }).faultMixPct, 25);
  });

  it('splits a fault mix into 503s, 429s and hangs that add up to it', () => {
    const rules = backgroundFaults(25);
    assert.deepEqual(rules.map((r) => r.status ?? 'hang'), [503, 429, 'hang']);
    assert.ok(Math.abs(rules.reduce((sum, r) => sum + r.fraction, 0) - 0.25) < 1e-12);
  });

  it('puts someone else\'s VMs under the names of runs that live on: never run 0, never a terminated run', () => {
    const plan = faultPlan(200, 600_000, 200, 3);
    const chosen = foreignNameRuns(200, plan);
    assert.equal(chosen.length, 4);
    assert.ok(chosen.every((i) => i > 0 && !plan.terminations.some((t) => t.run === i)));
  });
});

describe('bench:chaos, a reduced slice (50 runs over two team namespaces, 2-minute fault window)', function () {
  // A liveness bound, not a timing: the slice takes about 3 to 4 minutes alone (170-215 s in CI, session 15), more beside other suites.
  this.timeout(900_000);

  it('ends with no stuck run, nothing leaked after the reaper and no duplicate VM, and reports the figures as the JSON last line', async () => {
    const script = join(__dirname, '..', '..', 'bench', 'chaos', 'main.js');
    const args = ['--runs', '50', '--minutes', '2', '--seed', '5', '--outage', '20s', '--train', '45s', '--reaper-interval', '15s', '--reaper-grace', '20s', '--team-namespaces', '2', '--json'];
    const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0, `bench:chaos exited with ${code}:\n${stderr}`);
    const lines = stdout.trim().split('\n');
    const result = JSON.parse(lines[lines.length - 1]) as Record<string, number | object | string>;
    for (const key of ['runs', 'completed', 'failedNamed', 'stuck', 'leakedAfterReap', 'duplicateVms', 'maxLedgerGapPct']) assert.ok(key in result, `the JSON line lacks ${key}`);
    assert.deepEqual({ stuck: result.stuck, leakedAfterReap: result.leakedAfterReap, duplicateVms: result.duplicateVms, failedOther: result.failedOther }, { stuck: 0, leakedAfterReap: 0, duplicateVms: 0, failedOther: 0 }, stderr);
    assert.equal(result.runs, 50);
    // The runs lived in two team namespaces, the fleet (observer, reaper) in the system one.
    assert.equal(result.teamNamespaces, 2);
    assert.ok((result.foreignVms as number) > 0, 'someone else\'s VMs held some of the runs\' names');
    assert.equal(result.foreignTouched, 0, 'and Sterna touched none of them');
    // Every started run ended one way or another, and the terminated ones left VMs the reaper took.
    const ended = ['completed', 'failedNamed', 'cancelled', 'terminated'].reduce((n, k) => n + (result[k] as number), 0);
    assert.equal(ended, 50 + (result.faults as { cancelsInFlight: number }).cancelsInFlight);
    const terminations = stderr.split('\n').filter((line) => /terminat|restart/.test(line));
    // A planned termination can find its run completed already; every one that landed ends terminated
    // (the reused id's first execution is not counted: the id's latest execution is its second run).
    const faults = result.faults as { terminated: number; terminationsPlanned: number };
    assert.ok(faults.terminated - 1 >= 3, `only ${faults.terminated - 1} of ${faults.terminationsPlanned - 1} planned terminations landed:\n${terminations.join('\n')}`);
    assert.ok((result.terminated as number) >= faults.terminated - 1, `${result.terminated} runs ended terminated:\n${terminations.join('\n')}`);
    assert.ok((result.reaped as number) > 0, `the reaper deleted what the terminated runs left:\n${stderr.split('\n').filter((line) => /reaper|terminat|leak/.test(line)).join('\n')}`);
    // The ledger-to-billing gap is reported, not asserted: under chaos it exceeds 1% (bench/README.md, issue 11).
    assert.equal(typeof result.maxLedgerGapPct, 'number');
    assert.ok((result.ledgersCompared as number) > 0);
  });
});
