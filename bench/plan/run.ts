/**
 * Predictions against outcomes: runs replayed on the emulator with a spot trace, each
 * planned first (the same `planRun` workflow `sterna plan` starts) and then run, in waves,
 * so later waves plan with what earlier runs taught the zone memory and the throughput
 * memory. Synthetic guests train; the trace's zones, prices and spot availability are
 * the emulator's (`--trace`), at `timeFactor` times real speed.
 *
 * Everything is in real time: the plan predicts real hours, the emulator bills real
 * seconds, and the trace passes `timeFactor` times faster, so its preemption rates per
 * real hour are `timeFactor` times the trace's. Nothing here is fitted to the trace: the
 * spec states the true work (steps x step time), the true checkpoint interval, and a zone
 * cooldown of the spec default's trace-time length (1800 s / timeFactor).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { useEphemeralKeyIfNone } from '../../codec/keys';
import { sternaDataConverter } from '../../codec/data-converter';
import type { TemporalServer } from '../../processes/temporal-server-process';
import { catalogPriceBook } from '../../config/price-book';
import { planTrainingRun } from '../../client/plan';
import { EmulatorAdminClient } from '../../emulator/admin-client';
import { startEmulator, type EmulatorHandle } from '../../emulator/server';
import { loadTrace, traceCatalog } from '../../emulator/trace';
import { buildGceProvider } from '../../workers/providers';
import { createSternaWorker } from '../../workers/worker';
import { causeMessages, OwnerLabel, runKey, type RunResult, type RunSpecInput, seededRandom } from '../../workflows/api';
import { errorsOf, summarize, type PlanBenchRun, type PlanBenchSummary, type PlannedPick, type RunOutcome } from './analysis';
import { startTemporal, workflowBundlePath } from '../common/stack';

export const DEFAULT_PLAN_TRACE = join(__dirname, '..', '..', '..', '..', 'shared', 'traces', 'aws-v100-9zone-2023-02.json');
const PROJECT = 'sterna-plan-bench';
/** The spec default's zone cooldown, in trace seconds. */
const COOLDOWN_TRACE_SECONDS = 1800;

export interface PlanBenchOptions {
  runs: number;
  /** Runs per wave: a wave is planned and run together; the next starts when it has ended. */
  concurrency: number;
  timeFactor: number;
  /** Real seconds of training each run needs, uninterrupted. */
  workSeconds: number;
  /** Real seconds between the synthetic trainer's checkpoints (the spec's pinned interval). */
  checkpointSeconds: number;
  /** Real seconds each attempt stages data before it trains; undefined keeps the emulator's default (5 emulated s). */
  stagingSeconds?: number;
  pollSeconds: number;
  trace: string;
  /** Trace tick at the emulator's time 0; drawn from the seed when absent. */
  startTick?: number;
  seed: number;
  keep: boolean;
}

export interface PlanBenchResult {
  options: PlanBenchOptions & { startTick: number };
  trace: { name: string; gapSeconds: number; ticks: number; accelerator: string };
  runs: PlanBenchRun[];
  overall: PlanBenchSummary;
  /** Wave 0 planned with no memory; later waves with what earlier waves taught. */
  cold: PlanBenchSummary;
  warm: PlanBenchSummary;
  wallSeconds: number;
  machine: string;
  date: string;
}


export function planBenchSpec(o: PlanBenchOptions, accelerator: string): RunSpecInput {
  return {
    name: 'plan-bench',
    command: ['train'],
    checkpoint: { uri: 'gs://sterna-bench/plan', interval: o.checkpointSeconds },
    resources: { accelerators: [{ type: accelerator, count: 1 }] },
    pricing: { mode: 'spot', budgetUsd: 1000 },
    time: { expectedDuration: o.workSeconds },
    monitoring: { totalSteps: Math.round(o.workSeconds * o.timeFactor) },
    recovery: { maxPreemptions: 1000, pollSeconds: o.pollSeconds, zoneCooldown: COOLDOWN_TRACE_SECONDS / o.timeFactor },
    labels: { project: 'plan-bench' },
  };
}

export async function runPlanBench(o: PlanBenchOptions, log: (line: string) => void): Promise<PlanBenchResult> {
  useEphemeralKeyIfNone();
  process.env.METADATA_SERVER_DETECTION = 'none';
  const began = Date.now();
  const trace = loadTrace(o.trace);
  const accelerator = trace.entries[0].accelerator;
  const startTick = o.startTick ?? Math.floor(seededRandom(o.seed)() * trace.ticks);
  const workDir = mkdtempSync(join(tmpdir(), 'sterna-plan-bench-'));
  const bucketsDir = join(workDir, 'buckets');
  let temporal: TemporalServer | undefined;
  let emulator: EmulatorHandle | undefined;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let connection: Connection | undefined;
  let native: NativeConnection | undefined;
  try {
    log(`work dir ${workDir}; trace ${trace.name} from tick ${startTick}, ${o.timeFactor}x real time`);
    const bundle = await workflowBundlePath(workDir);
    temporal = await startTemporal(workDir);
    const steps = Math.round(o.workSeconds * o.timeFactor);
    emulator = await startEmulator({
      port: 0,
      stateDir: join(workDir, 'emulator'),
      trace,
      traceStartTick: startTick,
      timeFactor: o.timeFactor,
      seed: o.seed,
      guest: 'synthetic',
      // One emulated second per step: the trainer does timeFactor steps per real second.
      synthetic: {
        steps,
        stepSeconds: 1,
        checkpointEvery: Math.max(1, Math.round(o.checkpointSeconds * o.timeFactor)),
        ...(o.stagingSeconds !== undefined ? { stagingSeconds: o.stagingSeconds * o.timeFactor } : {}),
      },
      bucketsDir,
      // The benchmark measures placement: the project-wide GPU quota never binds.
      gpusAllRegions: 1_000_000,
    });
    const admin = new EmulatorAdminClient(emulator.endpoint);
    const provider = buildGceProvider(
      { project: PROJECT, emulatorEndpoint: { host: '127.0.0.1', port: emulator.port, protocol: 'http' }, localBucketsDir: bucketsDir },
      // The trace brings its own zones and prices; the worker prices offers from them, as the emulator does.
      catalogPriceBook(traceCatalog(trace)),
      200,
    );
    const taskQueue = `plan-bench-${Date.now().toString(36)}`;
    native = await NativeConnection.connect({ address: temporal.address });
    worker = await createSternaWorker({ connection: native, namespace: temporal.namespace, taskQueue, providers: { gce: provider }, workflowBundle: { codePath: bundle.path } });
    running = worker.run();
    connection = await Connection.connect({ address: temporal.address });
    const client = new Client({ connection, namespace: temporal.namespace, dataConverter: sternaDataConverter() });
    const spec = planBenchSpec(o, accelerator);
    log(`worker on ${taskQueue}; ${o.runs} runs of ${o.workSeconds} s (${steps} steps) in waves of ${o.concurrency}`);

    const runs: PlanBenchRun[] = [];
    const stamp = Date.now().toString(36);
    for (let first = 0, wave = 0; first < o.runs; first += o.concurrency, wave++) {
      const indexes = Array.from({ length: Math.min(o.concurrency, o.runs - first) }, (_, k) => first + k);
      const done = await Promise.all(indexes.map((index) => planThenRun(client, admin, taskQueue, spec, `plan-bench-${stamp}-${index}`, index, wave)));
      runs.push(...done);
      for (const r of done) {
        const e = r.error ? `cost ${pct(r.error.cost)}, finish ${pct(r.error.finish)}` : r.outcome.failure ?? 'not predicted';
        log(`run ${r.index} (wave ${wave}): ${r.outcome.status} in ${r.outcome.seconds.toFixed(0)} s, ${r.outcome.preemptions} preemptions, billed $${r.outcome.billedUsd.toFixed(4)}; predicted ${r.pick ? `${r.pick.finishSeconds.toFixed(0)} s, $${r.pick.expectedCostUsd.toFixed(4)} (${r.pick.preemptionSource} ${r.pick.preemptionsPerHour.toFixed(2)}/h x ${r.pick.lossSeconds.toFixed(0)} s ${r.pick.lossSource}, ${r.pick.throughputSource})` : '-'}; ${e}`);
      }
      // The memories hear of the last releases a moment after the runs end.
      await sleep(2000);
    }
    return {
      options: { ...o, startTick },
      trace: { name: trace.name, gapSeconds: trace.gapSeconds, ticks: trace.ticks, accelerator },
      runs,
      overall: summarize(runs),
      cold: summarize(runs.filter((r) => r.wave === 0)),
      warm: summarize(runs.filter((r) => r.wave > 0)),
      wallSeconds: (Date.now() - began) / 1000,
      machine: `${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'})`,
      date: new Date().toISOString(),
    };
  } finally {
    if (worker) {
      worker.shutdown();
      await running?.catch(() => undefined);
    }
    await native?.close().catch(() => undefined);
    await connection?.close().catch(() => undefined);
    await emulator?.close({ killVms: true }).catch(() => undefined);
    await temporal?.stop().catch(() => undefined);
    if (!o.keep) rmSync(workDir, { recursive: true, force: true });
  }
}

/** Seconds from each VM's stop to the next VM's start, in start order. */
function gapsOf(billing: readonly { startedAt?: string; stoppedAt?: string }[]): number[] {
  const vms = billing.filter((b) => b.startedAt).sort((a, b) => Date.parse(a.startedAt!) - Date.parse(b.startedAt!));
  return vms.slice(1).flatMap((b, i) => (vms[i].stoppedAt ? [(Date.parse(b.startedAt!) - Date.parse(vms[i].stoppedAt!)) / 1000] : []));
}

function pct(x: number): string {
  return Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%` : 'never';
}

async function planThenRun(client: Client, admin: EmulatorAdminClient, taskQueue: string, spec: RunSpecInput, workflowId: string, index: number, wave: number): Promise<PlanBenchRun> {
  const plan = await planTrainingRun(client, spec, { taskQueue });
  const plannedMs = Date.parse(plan.at);
  const row = plan.rows.find((r) => r.pick);
  const pick: PlannedPick | undefined = row && {
    zone: row.zone,
    accelerator: row.accelerator,
    provisioningModel: row.provisioningModel,
    pricePerHour: row.pricePerHour,
    workHours: row.workHours,
    expectedHours: row.expectedHours,
    expectedCostUsd: row.expectedCostUsd,
    expectedPreemptions: row.expectedPreemptions,
    preemptionsPerHour: row.preemptionsPerHour,
    preemptionSource: row.preemptionSource,
    lossSeconds: row.lossSeconds,
    lossSource: row.lossSource,
    throughputSource: row.throughputSource,
    finishSeconds: row.finishAt ? (Date.parse(row.finishAt) - plannedMs) / 1000 : Infinity,
  };
  const handle = await client.workflow.start('trainingRun', { taskQueue, workflowId, args: [spec] });
  let result: RunResult | undefined;
  let failure: string | undefined;
  try {
    result = (await handle.result()) as RunResult;
  } catch (err) {
    failure = causeMessages(err).join(': ') || (err as Error).message;
  }
  const endedMs = Date.now();
  const billing = (await admin.billing(PROJECT)).records.filter((b) => b.labels[OwnerLabel.Run] === runKey(workflowId));
  const outcome: RunOutcome = {
    status: result ? 'completed' : 'failed',
    ...(failure ? { failure } : {}),
    seconds: (endedMs - plannedMs) / 1000,
    billedUsd: billing.reduce((s, b) => s + b.costUsd, 0),
    ledgerUsd: result?.totalCostUsd ?? 0,
    billedSeconds: billing.reduce((s, b) => s + b.runningSeconds, 0),
    preemptions: result?.preemptions ?? 0,
    attempts: result?.attempts.length ?? billing.length,
    path: result ? result.attempts.map((a) => `${a.zone}:${a.outcome}`) : billing.map((b) => b.zone),
    gapsSeconds: gapsOf(billing),
  };
  return { index, wave, workflowId, plannedAt: plan.at, ...(plan.work ? { workBasis: plan.work.basis } : {}), ...(pick ? { pick } : {}), outcome, error: errorsOf(pick, outcome) };
}
