/**
 * bench:logs — how long a printed line takes to show in `sterna logs --follow`, and
 * whether any line printed before a preemption notice is lost.
 *
 *   npm run bench:logs -- [--seconds 120] [--every-ms 250] [--preempt-after 60] [--json]
 *
 * The whole path, as a user has it: the Temporal dev server, the GCE emulator with real
 * VM processes running the agent, one worker process, and `sterna logs RUN --follow
 * --json` as a child process. The trainer prints "tick <n> <Date.now()>" every
 * --every-ms (± 20%, so the prints do not lock to the agent's flush period) for
 * --seconds; each line's delay is when the CLI printed it minus when the trainer did
 * (one machine, one clock). With --preempt-after the VM is preempted that many seconds
 * into training; the next attempt prints for --seconds again. The trainer records what
 * it printed outside the VM, so lines lost across the preemption are counted, not guessed.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection } from '@temporalio/client';
import { Command, InvalidArgumentError } from 'commander';
import { useEphemeralKeyIfNone } from '../config/codec-keys';
import { sternaDataConverter } from '../config/data-converter';
import type { TemporalServer } from '../config/temporal-server-process';
import { EmulatorAdminClient } from '../emulator/admin-client';
import { statusQuery } from '../workflows/messages';
import { runKey } from '../workflows/naming';
import type { RunSpecInput } from '../workflows/spec';
import type { trainingRun } from '../workflows/training-run';
import { startEmulatorProcess, startTemporal, startWorkerProcess, workflowBundlePath, type Child } from './scale-stack';

const PROJECT = 'sterna-bench';
const BUILD = join(__dirname, '..');

const PRINTER = `
const fs = require('fs'), path = require('path');
const [seconds, everyMs] = process.argv.slice(2).map(Number);
const attempt = process.env.STERNA_ATTEMPT;
const truth = path.join(process.env.TRUTH_DIR, 'attempt-' + attempt);
process.on('SIGTERM', () => process.exit(143));
const end = Date.now() + seconds * 1000;
let n = 0;
(function tick() {
  if (Date.now() >= end) return;
  n++;
  const now = Date.now();
  process.stdout.write('tick ' + n + ' ' + now + '\\n');
  fs.appendFileSync(truth, n + ' ' + now + '\\n');
  setTimeout(tick, everyMs * (0.8 + 0.4 * Math.random()));
})();
`;

function positive(name: string) {
  return (v: string) => {
    const n = Number(v);
    if (!(Number.isFinite(n) && n > 0)) throw new InvalidArgumentError(`${name}: a positive number; got ${JSON.stringify(v)}`);
    return n;
  };
}

const program = new Command('bench:logs')
  .option('--seconds <s>', 'how long each attempt prints', positive('seconds'), 120)
  .option('--every-ms <ms>', 'mean time between two lines', positive('every-ms'), 250)
  .option('--preempt-after <s>', 'preempt the first attempt this many seconds into training', positive('preempt-after'))
  .option('--json', 'print the measurements as JSON');

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function log(message: string): void {
  process.stderr.write(`bench:logs: ${message}\n`);
}

async function main(): Promise<void> {
  const o = program.parse().opts<{ seconds: number; everyMs: number; preemptAfter?: number; json?: boolean }>();
  useEphemeralKeyIfNone();
  const workDir = mkdtempSync(join(tmpdir(), 'sterna-bench-logs-'));
  const bucketsDir = join(workDir, 'buckets');
  const truthDir = join(workDir, 'truth');
  mkdirSync(join(bucketsDir, 'sterna-examples', 'bench-logs'), { recursive: true });
  mkdirSync(truthDir);
  writeFileSync(join(bucketsDir, 'sterna-examples', 'bench-logs', 'printer.js'), PRINTER);
  let temporal: TemporalServer | undefined;
  const children: Child[] = [];
  let connection: Connection | undefined;
  try {
    const bundle = await workflowBundlePath(workDir);
    temporal = await startTemporal(workDir);
    const emulator = await startEmulatorProcess(workDir, { stateDir: join(workDir, 'emulator'), bucketsDir, steps: 1, checkpointEvery: 1, guest: 'process', timeFactor: 10 });
    children.push(emulator.child);
    const taskQueue = `logs-${Date.now().toString(36)}`;
    children.push(
      await startWorkerProcess(workDir, {
        address: temporal.address,
        namespace: temporal.namespace,
        taskQueue,
        project: PROJECT,
        emulatorEndpoint: emulator.endpoint,
        bucketsDir,
        bundlePath: bundle.path,
        observer: { startOnBoot: true },
        extraEnv: { STERNA_OBSERVER_PROGRESS_SECONDS: '2' },
      }),
    );
    connection = await Connection.connect({ address: temporal.address });
    const client = new Client({ connection, namespace: temporal.namespace, dataConverter: sternaDataConverter() });
    const spec: RunSpecInput = {
      name: 'bench-logs',
      command: ['node', 'printer.js', String(o.seconds), String(o.everyMs)],
      datasets: [{ uri: 'gs://sterna-examples/bench-logs/printer.js', path: 'printer.js' }],
      env: { TRUTH_DIR: truthDir },
      checkpoint: { uri: 'gs://sterna-examples/checkpoints' },
      resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
      pricing: { mode: 'spot' },
      recovery: { maxPreemptions: 3, pollSeconds: 1 },
    };
    const workflowId = `bench-logs-${Date.now().toString(36)}`;
    const handle = await client.workflow.start<typeof trainingRun>('trainingRun', { taskQueue, workflowId, args: [spec] });
    log(`run ${workflowId} started; following its log with sterna logs --follow --json`);

    // The CLI as a user runs it, started before the run has printed anything.
    const cli = spawn(process.execPath, [join(BUILD, 'cli', 'main.js'), 'logs', workflowId, '--follow', '--json'], {
      env: { ...process.env, TEMPORAL_ADDRESS: temporal.address, TEMPORAL_NAMESPACE: temporal.namespace, STERNA_LOCAL_BUCKETS: bucketsDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let cliErr = '';
    cli.stderr.on('data', (d: Buffer) => (cliErr += d.toString()));
    const delays: number[] = [];
    const shown = new Map<number, Set<number>>();
    const lines = createInterface({ input: cli.stdout });
    lines.on('line', (text) => {
      const at = Date.now();
      const event = JSON.parse(text) as { kind: string; attempt: number; text?: string };
      const match = event.kind === 'line' ? /^tick (\d+) (\d+)$/.exec(event.text ?? '') : null;
      if (!match) return;
      delays.push(at - Number(match[2]));
      if (!shown.has(event.attempt)) shown.set(event.attempt, new Set());
      shown.get(event.attempt)!.add(Number(match[1]));
    });
    const cliDone = new Promise<number | null>((resolve) => cli.on('close', resolve));

    let noticeMs: number | undefined;
    if (o.preemptAfter !== undefined) {
      const admin = new EmulatorAdminClient(emulator.endpoint);
      for (;;) {
        const s = await handle.query(statusQuery).catch(() => undefined);
        if (s?.phase === 'training' && s.attempt === 1) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      await new Promise((r) => setTimeout(r, o.preemptAfter! * 1000));
      const vm = (await admin.instances()).find((i) => i.labels['sterna-run'] === runKey(workflowId) && i.status === 'RUNNING');
      if (!vm) throw new Error('no running VM to preempt');
      noticeMs = Date.now();
      await admin.preempt(PROJECT, vm.zone, vm.name);
      log(`preempted ${vm.name} in ${vm.zone}`);
    }
    const result = await handle.result();
    const code = await cliDone;
    if (code !== 0) throw new Error(`sterna logs --follow exited ${code}: ${cliErr}`);

    // What the trainer printed, per attempt; lost = printed (before the notice, for a preempted attempt) and never shown.
    const attempts = result.attempts.map((a) => {
      const file = join(truthDir, `attempt-${a.attempt}`);
      const printed = existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((l) => l.split(' ').map(Number)) : [];
      const beforeNotice = a.outcome === 'preempted' && noticeMs !== undefined ? printed.filter(([, at]) => at < noticeMs!) : printed;
      const seen = shown.get(a.attempt) ?? new Set<number>();
      return { attempt: a.attempt, outcome: a.outcome, printed: printed.length, printedBeforeNotice: beforeNotice.length, lostBeforeNotice: beforeNotice.filter(([n]) => !seen.has(n)).length, lostAll: printed.filter(([n]) => !seen.has(n)).length };
    });
    const sorted = [...delays].sort((a, b) => a - b);
    const report = {
      lines: delays.length,
      p50Ms: percentile(sorted, 50),
      p95Ms: percentile(sorted, 95),
      maxMs: sorted[sorted.length - 1],
      meanMs: Math.round(delays.reduce((s, d) => s + d, 0) / Math.max(1, delays.length)),
      attempts,
      settings: { seconds: o.seconds, everyMs: o.everyMs, preemptAfter: o.preemptAfter, flushSeconds: 2, cliPollMs: 1000 },
    };
    if (o.json) return console.log(JSON.stringify(report, null, 2));
    console.log(`printed -> shown by sterna logs --follow, over ${report.lines} lines: p50 ${(report.p50Ms / 1000).toFixed(2)} s, p95 ${(report.p95Ms / 1000).toFixed(2)} s, max ${(report.maxMs / 1000).toFixed(2)} s`);
    for (const a of attempts) console.log(`attempt ${a.attempt} (${a.outcome}): printed ${a.printed}, ${a.printedBeforeNotice} before any notice, lost ${a.lostBeforeNotice} of those (${a.lostAll} of all)`);
  } finally {
    await connection?.close();
    for (const child of children.reverse()) await child.stop().catch(() => undefined);
    await temporal?.stop().catch(() => undefined);
    rmSync(workDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(`bench:logs: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  process.exitCode = 1;
});
