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
import { execFileSync } from 'node:child_process';
import { Command } from 'commander';
import { AcceleratorTypesClient, InstancesClient, ProjectsClient, RegionsClient, ZoneOperationsClient, ZonesClient } from '@google-cloud/compute/build/src/v1';
import { computeClients, type ComputeClientOptions } from '../../activities/providers/gce-clients';

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

function child(kind: Kind): Sample {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run the child with --expose-gc');
  gc();
  const before = process.memoryUsage();
  const t0 = performance.now();
  const clients = build(kind, { apiEndpoint: '127.0.0.1', port: 1, protocol: 'http', fallback: true });
  const buildMs = performance.now() - t0;
  gc();
  const after = process.memoryUsage();
  if (!clients) throw new Error('no clients');
  return { kind, heapMb: (after.heapUsed - before.heapUsed) / 1e6, rssMb: after.rss / 1e6, buildMs };
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function main(): void {
  const o = new Command()
    .name('bench:client')
    .option('--rounds <n>', 'child processes per kind', '5')
    .option('--json', 'print one JSON object as the last line')
    .option('--child <kind>', 'internal: measure one kind in this process')
    .parse()
    .opts<{ rounds: string; json?: boolean; child?: Kind }>();
  if (o.child) {
    if (!KINDS.includes(o.child)) throw new Error(`--child must be one of ${KINDS.join(', ')}`);
    console.log(JSON.stringify(child(o.child)));
    return;
  }
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

try {
  main();
} catch (err) {
  console.error(`bench:client: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
