/**
 * `npm run demo`: one real training run on the embedded local cloud.
 *
 * Starts a Temporal dev server (web UI included), the GCE emulator and a Sterna worker;
 * publishes the example trainer and dataset to a local bucket; makes the cheapest zone
 * stock out and preempts the run once mid-training; shows live progress; prints the
 * summary and the UI link; then stops everything it started (unless --keep).
 *
 *   npm run demo [-- --keep] [-- --json]
 */
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { DefaultLogger, makeTelemetryFilterString, NativeConnection, Runtime } from '@temporalio/worker';
import { Client, Connection } from '@temporalio/client';
import { startTrainingRun, getStatus } from '../client';
import { useEphemeralKeyIfNone } from '../config/codec-keys';
import { startCodecServer } from '../config/codec-server';
import { sternaDataConverter, sternaPayloadCodec } from '../config/data-converter';
import { startTemporalServer } from '../config/temporal-server-process';
import { catalogPriceBook } from '../config/price-book';
import { startEmulator } from '../emulator/server';
import { EmulatorAdminClient } from '../emulator/admin-client';
import { publishExampleLocally } from '../examples/publish';
import { buildCheckTargets, buildGceProvider } from '../workers/providers';
import { createSternaWorker } from '../workers/worker';
import { BucketLocator } from '../activities/storage';
import { runKey } from '../workflows/naming';
import { rankOffers } from '../workflows/placement';
import type { RunResult } from '../workflows/run/views';
import type { RunSpecInput } from '../workflows/spec';
import { progressLine, summaryLines } from './format';
import { freePort } from '../config/ports';
import { ProgressDisplay } from './progress';
import { reportFailure } from './report';

const repoRoot = join(__dirname, '..', '..');
const PROJECT = 'sterna-demo';

interface DemoOptions {
  keep?: boolean;
  json?: boolean;
}

async function main(opts: DemoOptions): Promise<void> {
  // Stockouts and preemptions are the point of the demo; the SDK need not log them.
  Runtime.install({ logger: new DefaultLogger('ERROR'), telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } } });
  const say = (line: string) => (opts.json ? process.stderr : process.stdout).write(line + '\n');
  const stateDir = join(repoRoot, '.state', 'demo');
  rmSync(stateDir, { recursive: true, force: true });
  mkdirSync(stateDir, { recursive: true });
  const cleanups: (() => Promise<void>)[] = [];
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) await fn().catch((err: Error) => say(`cleanup: ${err.message}`));
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));

  try {
    say('starting the Temporal server, the GCE emulator and a worker...');
    const uiPort = (await freePort(8233)) ?? (await freePort(0))!;
    // Payloads are encrypted (a key of the demo's own when none is configured), and the UI
    // shows them decoded through the codec server.
    if (useEphemeralKeyIfNone()) say('payloads are encrypted with a key made for this demo (none configured; see docs/security.md, "Encrypted payloads")');
    const codec = await startCodecServer({ codec: sternaPayloadCodec(), port: (await freePort(8234)) ?? 0, corsOrigins: [`http://127.0.0.1:${uiPort}`, `http://localhost:${uiPort}`] });
    cleanups.push(() => codec.close());
    const server = await startTemporalServer({ port: (await freePort(7233)) ?? (await freePort(0))!, uiPort, logFile: join(stateDir, 'temporal.log'), uiCodecEndpoint: codec.url });
    cleanups.push(() => server.stop());

    // Emulated time runs 10x faster, so GCE's 30 s preemption notice takes 3 s.
    // It also serves the local buckets' metadata (their location) to the worker.
    const bucketsDir = join(stateDir, 'buckets');
    // A project that has been granted GPUs: a new GCP project's GPUS_ALL_REGIONS is 0, the emulator's default.
    const emulator = await startEmulator({ port: 0, stateDir: join(stateDir, 'emulator'), timeFactor: 10, bucketsDir, gpusAllRegions: 64 });
    cleanups.push(() => emulator.close({ killVms: true }));
    const admin = new EmulatorAdminClient(emulator.endpoint);

    publishExampleLocally(bucketsDir);
    const provider = buildGceProvider({ project: PROJECT, emulatorEndpoint: { host: '127.0.0.1', port: emulator.port, protocol: 'http' }, localBucketsDir: bucketsDir }, catalogPriceBook(), 250);

    const connection = await NativeConnection.connect({ address: server.address });
    // The run checks its quotas and buckets first, and a failed attempt's run carries its log's last lines, as with `npm run worker`.
    const checks = await buildCheckTargets({ gce: { project: PROJECT, emulatorEndpoint: { host: '127.0.0.1', port: emulator.port, protocol: 'http' }, localBucketsDir: bucketsDir }, storage: { endpoint: emulator.endpoint } }, undefined);
    cleanups.push(() => checks.close());
    const worker = await createSternaWorker({ connection, taskQueue: 'sterna', providers: { gce: provider }, storage: BucketLocator.forEmulator(emulator.endpoint), checks: checks.targets, logs: { localBucketsDir: bucketsDir } });
    const running = worker.run();
    cleanups.push(async () => {
      worker.shutdown();
      await running;
      await connection.close();
    });

    const spec = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
    // The cheapest zone (by the workflow's own ranking) has no spot capacity today.
    const offers = await provider.findOffers({ accelerators: spec.resources.accelerators as never, provisioningModels: ['SPOT'] });
    const [preferred] = rankOffers(offers, [], { nowMs: Date.now(), cooldownSeconds: 1800, expectedHours: 1, models: ['SPOT'] });
    await admin.setCapacity(preferred.zone, { accelerator: preferred.accelerator, spot: 0 });
    say(`emulator: ${preferred.zone} has no spot ${preferred.accelerator} capacity`);

    const client = new Client({ connection: await Connection.connect({ address: server.address }), dataConverter: sternaDataConverter() });
    cleanups.push(() => client.connection.close());
    const handle = await startTrainingRun(client, spec, { workflowId: `demo-${Date.now().toString(36)}` });
    say(`started run ${handle.workflowId}; follow it at ${server.uiUrl}/namespaces/default/workflows/${handle.workflowId}`);

    let preempted = false;
    let lastPhase: string | undefined;
    let lastAttempt: number | undefined;
    let result: RunResult | undefined;
    let failure: unknown;
    void handle.result().then(
      (r) => (result = r),
      (e: unknown) => (failure = e),
    );
    // On a terminal, a progress bar with percent and ETA (cli/progress.ts); otherwise a line per phase.
    const bar = process.stdout.isTTY && !opts.json ? ProgressDisplay.for(process.stdout, false) : undefined;
    while (!result && !failure) {
      const status = await getStatus(client, handle.workflowId).catch(() => undefined);
      if (status) {
        if (bar) bar.update(status);
        else if (status.phase !== lastPhase || status.attempt !== lastAttempt) say(progressLine(status));
        lastPhase = status.phase;
        lastAttempt = status.attempt;
        if (!preempted && status.phase === 'training' && (status.lastCheckpoint?.step ?? 0) >= 120 && status.zone) {
          const [vm] = await provider.listRunResources(runKey(handle.workflowId));
          if (vm) {
            await admin.preempt(PROJECT, vm.zone, vm.name);
            preempted = true;
            bar?.stop();
            say(`emulator: preempting ${vm.name} in ${vm.zone} (the run last reported step ${status.step}; the example trainer checkpoints in the 30 s notice)`);
          }
        }
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    if (bar) {
      await getStatus(client, handle.workflowId).then((s) => bar.update(s), () => undefined);
      bar.stop();
    }
    if (failure) throw failure;
    for (const line of summaryLines(result!)) say(line);
    const leftover = await provider.listRunResources(runKey(handle.workflowId));
    say(`instances left: ${leftover.length}`);
    say(`web UI: ${server.uiUrl}/namespaces/default/workflows/${handle.workflowId}`);
    if (opts.json) {
      const r = result!;
      console.log(
        JSON.stringify({
          status: r.status,
          runId: r.runId,
          attempts: r.attempts.map((a) => ({ zone: a.zone, provisioningModel: a.provisioningModel, outcome: a.outcome, costUsd: a.costUsd })),
          preemptions: r.preemptions,
          totalCostUsd: r.totalCostUsd,
          onDemandCostUsd: r.onDemandCostUsd,
        }),
      );
    }
    if (opts.keep) {
      say('--keep: the dev server, UI and emulator stay up; Ctrl-C stops them.');
      await new Promise(() => undefined);
    }
  } finally {
    if (!opts.keep) await cleanup();
  }
}

new Command('demo')
  .option('--keep', 'leave the dev server, UI and emulator running')
  .option('--json', 'print the run result as one JSON object on the last line')
  .action((opts: DemoOptions) =>
    main(opts).catch((err: unknown) => {
      const report = reportFailure('demo', err);
      for (const line of report.lines) console.error(line);
      process.exit(report.exitCode);
    }),
  )
  .parse();
