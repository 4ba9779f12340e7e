/**
 * `npm run bench:client -- [--rounds 5] [--json]`: what the six Compute clients of the
 * GCE provider and the pre-run checks cost a worker process, built as the package builds them ("stock") and as
 * Sterna builds them (activities/providers/gce-clients.ts), side by side: the heap (used,
 * after a full collection) that building them adds, the process's RSS then (the same
 * modules loaded either way), and the time building takes. Each
 * measurement is a fresh child process, the two kinds alternating, so neither inherits
 * the other's heap; the figures are medians over the rounds. Both kinds load the package's
 * descriptor file first (about 22 MB of heap, shared by the package's modules), so what
 * differs is the Root the clients build from it.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Command } from 'commander';
import { PassThroughClient } from 'google-auth-library';
import { AcceleratorTypesClient, InstancesClient, ProjectsClient, RegionsClient, ZoneOperationsClient, ZonesClient } from '@google-cloud/compute/build/src/v1';
import { computeClients, READ_TIMEOUT_MS, type ComputeClientOptions } from '../../activities/providers/gce-clients';
import { startEmulatorProcess } from '../common/stack';

const KINDS = ['stock', 'sterna'] as const;
type Kind = (typeof KINDS)[number];

interface Sample {
  kind: Kind;
  heapMb: number;
  rssMb: number;
  buildMs: number;
}

function build(kind: Kind, options: ComputeClientOptions): unknown {
  if (kind === 'sterna') return computeClients(options);
  return [new InstancesClient(options), new ZoneOperationsClient(options), new RegionsClient(options), new ZonesClient(options), new AcceleratorTypesClient(options), new ProjectsClient(options)];
}

/** The process's memory after a full collection (children run with --expose-gc). */
function afterFullGc(): NodeJS.MemoryUsage {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run the child with --expose-gc');
  gc();
  return process.memoryUsage();
}

function child(kind: Kind): Sample {
  const before = afterFullGc();
  const t0 = performance.now();
  const clients = build(kind, { apiEndpoint: '127.0.0.1', port: 1, protocol: 'http', fallback: true });
  const buildMs = performance.now() - t0;
  const after = afterFullGc();
  if (!clients) throw new Error('no clients');
  return { kind, heapMb: (after.heapUsed - before.heapUsed) / 1e6, rssMb: after.rss / 1e6, buildMs };
}

interface Held {
  kind: Kind;
  /** Heap held over the heap before the calls, after a full collection: once the calls ended. */
  heldNowMb: number;
  /** The same once Sterna's read deadline (READ_TIMEOUT_MS) has passed since the last call. */
  heldAfterDeadlineMb: number;
}

const HELD_BATCH = 50;
/** How long after the last call the heap is read again: past Sterna's read deadline. */
const HELD_WAIT_MS = READ_TIMEOUT_MS + 5_000;

async function childHeld(kind: Kind, endpoint: string, calls: number): Promise<Held> {
  const url = new URL(endpoint);
  const options: ComputeClientOptions = { apiEndpoint: url.hostname, port: Number(url.port), protocol: 'http', authClient: new PassThroughClient(), fallback: true };
  const regions = kind === 'sterna' ? computeClients(options).regions : new RegionsClient(options);
  const call = () => regions.get({ project: 'bench-client', region: 'us-central1' });
  // The first call loads what every call shares (the service stub, the auth client).
  await call();
  const before = afterFullGc().heapUsed;
  for (let done = 0; done < calls; done += HELD_BATCH) await Promise.all(Array.from({ length: Math.min(HELD_BATCH, calls - done) }, call));
  const now = afterFullGc().heapUsed;
  await new Promise((resolve) => setTimeout(resolve, HELD_WAIT_MS));
  const after = afterFullGc().heapUsed;
  await regions.close();
  return { kind, heldNowMb: (now - before) / 1e6, heldAfterDeadlineMb: (after - before) / 1e6 };
}

async function held(calls: number, json: boolean): Promise<void> {
  const workDir = mkdtempSync(join(tmpdir(), 'bench-client-'));
  const emulator = await startEmulatorProcess(workDir, { stateDir: join(workDir, 'emulator'), bucketsDir: join(workDir, 'buckets'), steps: 1, checkpointEvery: 1, rateQuotas: false });
  try {
    // Both kinds at once, each in its own process: the wait past the deadline is the same for both.
    const samples = await Promise.all(
      KINDS.map(async (kind) => {
        const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', __filename, '--child-held', kind, '--endpoint', emulator.endpoint, '--calls', String(calls)], { env: { ...process.env, METADATA_SERVER_DETECTION: 'none' } });
        return JSON.parse(stdout.trim().split('\n').pop()!) as Held;
      }),
    );
    const of = (kind: Kind) => {
      const { heldNowMb, heldAfterDeadlineMb } = samples.find((s) => s.kind === kind)!;
      return { heldNowMb, heldAfterDeadlineMb };
    };
    const result = { calls, waitedS: HELD_WAIT_MS / 1000, stock: of('stock'), sterna: of('sterna') };
    console.log(`heap held by ${calls} ended regions.get calls (MB)   stock    sterna`);
    console.log(`  once the calls ended              ${result.stock.heldNowMb.toFixed(1).padStart(10)}${result.sterna.heldNowMb.toFixed(1).padStart(10)}`);
    console.log(`  ${result.waitedS} s later                       ${result.stock.heldAfterDeadlineMb.toFixed(1).padStart(10)}${result.sterna.heldAfterDeadlineMb.toFixed(1).padStart(10)}`);
    if (json) console.log(JSON.stringify(result));
  } finally {
    await emulator.child.stop();
    rmSync(workDir, { recursive: true, force: true });
  }
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main(): Promise<void> {
  const o = new Command()
    .name('bench:client')
    .option('--rounds <n>', 'child processes per kind', '5')
    .option('--held', 'measure how long the clients hold ended calls\' answers instead')
    .option('--calls <n>', 'with --held: regions.get calls per kind', '2000')
    .option('--json', 'print one JSON object as the last line')
    .option('--child <kind>', 'internal: measure one kind in this process')
    .option('--child-held <kind>', 'internal: measure one kind\'s held answers in this process')
    .option('--endpoint <url>', 'internal: the emulator of --child-held')
    .parse()
    .opts<{ rounds: string; held?: boolean; calls: string; json?: boolean; child?: Kind; childHeld?: Kind; endpoint?: string }>();
  for (const kind of [o.child, o.childHeld]) if (kind !== undefined && !KINDS.includes(kind)) throw new Error(`the kind must be one of ${KINDS.join(', ')}`);
  const calls = Number(o.calls);
  if (!Number.isInteger(calls) || calls < 1) throw new Error(`--calls must be a whole number, at least 1 (got ${o.calls})`);
  if (o.child) {
    console.log(JSON.stringify(child(o.child)));
    return;
  }
  if (o.childHeld) {
    if (!o.endpoint) throw new Error('--child-held needs --endpoint');
    console.log(JSON.stringify(await childHeld(o.childHeld, o.endpoint, calls)));
    return;
  }
  if (o.held) return held(calls, o.json === true);
  const rounds = Number(o.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a whole number, at least 1 (got ${o.rounds})`);
  const samples: Sample[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const kind of KINDS) {
      const out = execFileSync(process.execPath, ['--expose-gc', __filename, '--child', kind], { env: { ...process.env, METADATA_SERVER_DETECTION: 'none' }, encoding: 'utf8' });
      samples.push(JSON.parse(out.trim().split('\n').pop()!) as Sample);
    }
  }
  const of = (kind: Kind) => {
    const mine = samples.filter((s) => s.kind === kind);
    return { heapMb: median(mine.map((s) => s.heapMb)), rssMb: median(mine.map((s) => s.rssMb)), buildMs: median(mine.map((s) => s.buildMs)) };
  };
  const stock = of('stock');
  const sterna = of('sterna');
  const result = { rounds, stock, sterna, heapRatio: sterna.heapMb / stock.heapMb, rssRatio: sterna.rssMb / stock.rssMb, buildRatio: sterna.buildMs / stock.buildMs };
  const row = (what: string, a: number, b: number, ratio: number) => console.log(`  ${what.padEnd(22)}${a.toFixed(1).padStart(10)}${b.toFixed(1).padStart(10)}${ratio.toFixed(2).padStart(10)}`);
  console.log(`six Compute clients (median of ${rounds} processes)   stock    sterna   ratio`);
  row('heap added (MB)', stock.heapMb, sterna.heapMb, result.heapRatio);
  row('process RSS (MB)', stock.rssMb, sterna.rssMb, result.rssRatio);
  row('build time (ms)', stock.buildMs, sterna.buildMs, result.buildRatio);
  if (o.json) console.log(JSON.stringify(result));
}

main().catch((err: unknown) => {
  console.error(`bench:client: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
