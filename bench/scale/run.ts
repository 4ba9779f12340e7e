/**
 * One scale measurement: start the stack, start N training runs over a ramp, preempt
 * at random while they train, wait for them, then read what it cost from the worker's
 * /proc, the emulator's API counters and operations, and the runs' histories.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, platform, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ZoneOperationsClient } from '@google-cloud/compute';
import { type Client, Connection, type WorkflowHandle } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import { quotaMetric, zonesWith } from '../../config/catalog';
import { checkSpec, regionOf, type RunSpecInput, seededRandom } from '../../workflows/api';
import type { TemporalServer } from '../../processes/temporal-server-process';
import { EmulatorAdminClient, type ApiUsageView } from '../../emulator/admin-client';
import { gceClientOptions } from '../../workers/providers';
import { mapLimited } from '../../activities/map-limited';
import {
  apiFigures,
  executionFacts,
  peakOverlap,
  percentile,
  preemptionLatencies,
  replacementSteps,
  runFacts,
  summarizeHistories,
  type ApiFigures,
  type HistoryEvent,
  type HistorySummary,
  type RunFacts,
  type StepFigures,
  type TimedName,
  type WindowFigures,
  windowFigures,
} from './analysis';
import { ClosureWatcher } from './closures';
import type { ScaleOptions } from './options';
import { PreemptionInjector } from './preemptions';
import { ProcessSampler, type ProcessUsage } from './proc';
import { SlotSampler, type ActivitySlots } from './slots';
import { MemorySampler, type WorkerMemory } from './memory';
import { freePort } from '../../processes/ports';
import { summarizeProfiles, type ThreadProfile } from '../common/cpu-profile';
import { BenchNamespaces, OBSERVER_WORKFLOW_TYPE, observerAvailable, startEmulatorProcess, startTemporal, startWorkerProcess, workflowBundlePath, type Child } from '../common/stack';
import { DEFAULT_OPERATIONS_KEPT } from '../../emulator/operations';
import { useEphemeralKeyIfNone } from '../../codec/keys';
import { sternaPayloadCodec } from '../../codec/data-converter';

export const PROJECT = 'sterna-bench';
export const ACCELERATOR = 'nvidia-l4';
/** Measure the steady state from this long after the last start (placements settle). */
const SETTLE_MS = 30_000;
/** A steady window shorter than this says nothing per minute. */
const MIN_STEADY_SECONDS = 60;
/** How often the emulator is asked how many guests run. */
const GUEST_SAMPLE_MS = 5000;

export type Design = 'per-run-looks' | 'fleet-observer';

export interface ScaleResult {
  runs: number;
  completed: number;
  failed: number;
  /** Runs still running at the time cap (then cancelled), or when the worker died. */
  unfinished: number;
  /** Set when the worker process died during the measurement (exit code or signal). */
  workerExited?: string;
  failures: Record<string, number>;
  /** The most runs alive at once (started, not yet closed): "N concurrent runs" only if this is N. */
  peakRunsAlive: number;
  /** The most synthetic guests running at once (VMs booted and not exited), sampled every few seconds, and the worker's RSS then. */
  peakGuestsRunning?: number;
  workerRssAtPeakGuestsMb?: number;
  design: Design;
  observerRequested: 'on' | 'off';
  /** Team namespaces the runs were spread over (0: runs and fleet in one namespace). */
  teamNamespaces: number;
  observerWorkflows: number;
  pollSeconds: number;
  /** `default`, or the V8 heap limit the worker ran with. */
  workerTuning: string;
  durationSeconds: number;
  rampSeconds: number;
  preemptionRate: number;
  seed: number;
  wallSeconds: number;
  runHours: number;
  workerPeakRssMb: number;
  workerCpuSeconds: number;
  workerCpuSecondsPerRunHour: number;
  /** Median of the worker's RSS samples (one a second) over the measurement. */
  workerMedianRssMb?: number;
  /** Mean CPU cores used over the measurement, per process. */
  workerCores: number;
  temporalCores?: number;
  emulatorCores?: number;
  temporalPeakRssMb?: number;
  temporalCpuSeconds?: number;
  emulatorCpuSeconds?: number;
  /** Direct looks (`observe` activities) per run per minute: the per-run design's cadence. */
  looksPerRunMinute: number;
  apiReadsPerRunMinute: number;
  apiCallsPerRunMinute: number;
  /** Reads per run per minute while every run was alive (after the ramp, before the first finished). */
  steadyReadsPerRunMinute?: number;
  steadySeconds?: number;
  /** Slot waits and task latencies of what was scheduled in the steady window (no start or end burst). */
  steady?: WindowFigures;
  rateLimited: number;
  rateLimitedByMethod: Record<string, number>;
  api: ApiFigures;
  historyEventsPerRunHour: number;
  historyEventsPerRun: number;
  /** Runs with an activity that took more than a second from scheduled to started, for any reason. */
  slotWaits: number;
  /** The worker's activity slots, sampled every second: free slots never at 0 means no activity waited for one. */
  activitySlots?: ActivitySlots;
  /** The worker's V8 heap and external memory beside its RSS, from its process metrics (every 5 s). */
  workerMemory?: WorkerMemory;
  history: HistorySummary;
  preemptions: number;
  preemptionsUnreplaced: number;
  preemptionToInsertP50S?: number;
  preemptionToInsertP99S?: number;
  preemptionToInsertMaxS?: number;
  /** Where a preempted run's way to its replacement's create went, step by step (of `paths` preemptions seen in the histories read). */
  replacementPath: { paths: number; steps: StepFigures[] };
  /** With `--cpu-profile`: the worker's CPU by package and function, a thread each, most time on the CPU first. */
  workerCpuProfile?: ThreadProfile[];
  machine: string;
  date: string;
}

interface Tracked {
  workflowId: string;
  /** The client of the namespace the run executes in. */
  client: Client;
  handle: WorkflowHandle;
  firstRunId: string;
  startedAtMs: number;
  settledAtMs?: number;
  outcome?: 'completed' | string;
}

export function benchSpec(o: Pick<ScaleOptions, 'pollSeconds' | 'checkpointEverySteps'>): RunSpecInput {
  return {
    name: 'scale-bench',
    // Synthetic guests play the agent and trainer; the command is never run.
    command: ['train'],
    checkpoint: { uri: 'gs://sterna-bench/checkpoints', interval: o.checkpointEverySteps },
    resources: { accelerators: [{ type: ACCELERATOR, count: 1 }] },
    pricing: { mode: 'spot', budgetUsd: 1000 },
    recovery: { maxPreemptions: 1000, ...(o.pollSeconds !== undefined ? { pollSeconds: o.pollSeconds } : {}) },
  };
}


export async function runScaleBench(o: ScaleOptions, log: (line: string) => void): Promise<ScaleResult> {
  // The worker it spawns inherits the key: payloads are encrypted as in production.
  useEphemeralKeyIfNone();
  const wantObserver = o.observer === 'auto' ? observerAvailable() : o.observer === 'on';
  if (wantObserver && !observerAvailable()) {
    throw new Error('--observer on: this build has no fleet observer (workflows/fleet/observer.ts); measure the per-run design with --observer off');
  }
  const spec = benchSpec(o);
  const checked = checkSpec(spec);
  if (!checked.ok) throw new Error(`the benchmark's run spec is invalid: ${checked.problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`);
  const pollSeconds = checked.spec.recovery.pollSeconds;

  const workDir = mkdtempSync(join(tmpdir(), 'sterna-scale-'));
  const bucketsDir = join(workDir, 'buckets');
  const children: Child[] = [];
  let temporal: TemporalServer | undefined;
  let connection: Connection | undefined;
  const samplers: { startMeasuring(): void; stop(): unknown }[] = [];
  let keepForPostMortem = false;
  try {
    log(`work dir ${workDir}`);
    const bundle = await workflowBundlePath(workDir);
    log(`workflow bundle ${bundle.path}${bundle.built ? ' (made now: the prebuilt one was missing or older than build/workflows)' : ''}`);
    // With team namespaces, the fleet lives in the system one and the runs in the teams' (docs/tenancy.md).
    const namespaces = new BenchNamespaces(o.teamNamespaces);
    temporal = await startTemporal(workDir, undefined, namespaces.created);
    log(`Temporal dev server ${temporal.address} (pid ${temporal.pid})`);
    const emulator = await startEmulatorProcess(workDir, { stateDir: join(workDir, 'emulator'), bucketsDir, steps: Math.round(o.durationSeconds), checkpointEvery: o.checkpointEverySteps, operationsKept: operationsFor(o) });
    children.push(emulator.child);
    log(`GCE emulator ${emulator.endpoint} (pid ${emulator.child.pid}), synthetic guests: ${Math.round(o.durationSeconds)} steps of 1 s`);
    const admin = new EmulatorAdminClient(emulator.endpoint);
    await makeRoom(admin, o.runs);

    const taskQueue = `scale-${Date.now().toString(36)}`;
    // The worker's metrics on loopback, so the benchmark can read its activity slots.
    const metricsPort = (await freePort(0))!;
    const sdkMetricsPort = (await freePort(0))!;
    const worker = await startWorkerProcess(workDir, {
      address: temporal.address,
      namespace: namespaces.fleet(temporal),
      taskQueue,
      project: PROJECT,
      emulatorEndpoint: emulator.endpoint,
      bucketsDir,
      bundlePath: bundle.path,
      observer: { startOnBoot: wantObserver, intervalSeconds: o.observerIntervalSeconds },
      heapMb: o.workerHeapMb,
      maxCachedWorkflows: o.workerCache,
      cpuProfileDir: o.cpuProfileDir,
      extraEnv: {
        STERNA_METRICS_HOST: '127.0.0.1',
        STERNA_METRICS_PORT: String(metricsPort),
        STERNA_SDK_METRICS_PORT: String(sdkMetricsPort),
        ...namespaces.workerEnv(),
      },
    });
    children.push(worker);
    log(`worker pid ${worker.pid} on task queue ${taskQueue} (${tuning(o)})`);
    const workerSampler = new ProcessSampler(worker.pid);
    const temporalSampler = new ProcessSampler(temporal.pid);
    const emulatorSampler = new ProcessSampler(emulator.child.pid);
    const slotSampler = new SlotSampler(sdkMetricsPort);
    const memorySampler = new MemorySampler(metricsPort);
    samplers.push(workerSampler, temporalSampler, emulatorSampler, slotSampler, memorySampler);

    connection = await Connection.connect({ address: temporal.address });
    const { fleet: client, runs: runClients } = namespaces.clients(connection, temporal);

    // --- measurement ---------------------------------------------------------------
    for (const s of samplers) s.startMeasuring();
    await admin.resetApiUsage();
    const t0 = Date.now();
    const injector = new PreemptionInjector(admin, o.preemptionRate, o.runs, o.seed);
    const runs: Tracked[] = [];
    const byId = new Map<string, Tracked>();
    let steadyStart: ApiUsageView | undefined;
    let steadyEnd: ApiUsageView | undefined;
    let firstSettled = false;
    let steadyFromMs: number | undefined;
    let steadyToMs: number | undefined;
    const closures = runClients.map((c) => new ClosureWatcher(c, taskQueue, 'trainingRun'));
    const collectClosures = async () => {
      const closed$ = (await Promise.all(closures.map((w) => w.poll().catch(() => [])))).flat().sort((a, b) => a.closedAtMs - b.closedAtMs);
      for (const closed of closed$) {
        const run = byId.get(closed.workflowId);
        if (!run || run.outcome) continue;
        run.settledAtMs = closed.closedAtMs;
        run.outcome = closed.closure;
        if (firstSettled) continue;
        firstSettled = true;
        steadyToMs = closed.closedAtMs;
        if (steadyStart) steadyEnd = await admin.apiUsage(PROJECT);
      }
    };
    // How many VMs are up at once, and what the worker holds then.
    let peakGuests: { running: number; rssMb?: number } | undefined;
    const guestSampler = setInterval(() => {
      void admin
        .syntheticGuests()
        .then((g) => {
          if (g.running > (peakGuests?.running ?? -1)) peakGuests = { running: g.running, rssMb: workerSampler.usage()?.rssMb };
        })
        .catch(() => undefined);
    }, GUEST_SAMPLE_MS);
    const stamp = Date.now().toString(36);
    let rampReport = Date.now();
    for (let i = 0; i < o.runs; i++) {
      await sleep(Math.max(0, t0 + (i * o.rampSeconds * 1000) / o.runs - Date.now()));
      const workflowId = `scale-${stamp}-${i}`;
      const runClient = runClients[i % runClients.length];
      const handle = await runClient.workflow.start('trainingRun', { taskQueue, workflowId, args: [spec] });
      const run: Tracked = { workflowId, client: runClient, handle, firstRunId: handle.firstExecutionRunId, startedAtMs: Date.now() };
      runs.push(run);
      byId.set(workflowId, run);
      if (Date.now() - rampReport >= 30_000) {
        rampReport = Date.now();
        log(`${Math.round((Date.now() - t0) / 1000)} s: started ${runs.length} of ${o.runs}; worker RSS ${workerSampler.usage()?.rssMb.toFixed(0)} MB`);
      }
    }
    const rampEnd = Date.now();
    log(`started ${o.runs} runs in ${((rampEnd - t0) / 1000).toFixed(1)} s`);
    const steadyTimer = setTimeout(() => {
      if (firstSettled) return;
      steadyFromMs = Date.now();
      void admin.apiUsage(PROJECT).then((v) => (steadyStart = v));
    }, SETTLE_MS);

    const capAt = t0 + o.timeCapSeconds * 1000;
    let lastReport = Date.now();
    let workerExited: string | undefined;
    while (runs.some((r) => !r.outcome) && Date.now() < capAt) {
      await sleep(3000);
      await collectClosures();
      workerExited = worker.ended();
      if (workerExited) {
        keepForPostMortem = true;
        log(`the worker exited (${workerExited}); see ${worker.logFile}`);
        break;
      }
      if (Date.now() - lastReport >= 30_000) {
        lastReport = Date.now();
        const w = workerSampler.usage();
        const guests = await admin.syntheticGuests().catch(() => undefined);
        const done = runs.filter((r) => r.outcome === 'completed').length;
        const failed = runs.filter((r) => r.outcome && r.outcome !== 'completed').length;
        log(
          `${Math.round((Date.now() - t0) / 1000)} s: ${done} completed, ${failed} ended otherwise, ${guests?.running ?? '?'} guests running, ` +
            `${injector.injected.length} preempted; worker RSS ${w?.rssMb.toFixed(0)} MB (peak ${w?.peakRssMb.toFixed(0)}), CPU ${w?.cpuSeconds.toFixed(0)} s`,
        );
      }
    }
    clearTimeout(steadyTimer);
    const unfinished = runs.filter((r) => !r.outcome);
    if (unfinished.length > 0 && !workerExited) {
      log(`time cap reached: cancelling ${unfinished.length} runs`);
      await mapLimited(unfinished, 16, (r) => r.handle.cancel().catch(() => undefined));
      const until = Date.now() + 120_000;
      while (unfinished.some((r) => !r.outcome) && Date.now() < until) {
        await sleep(3000);
        await collectClosures();
      }
    }
    await injector.stop();
    clearInterval(guestSampler);
    const tEnd = Date.now();
    const usage = await admin.apiUsage(PROJECT);
    // No run ended before the cap: the steady window lasts to the end.
    if (steadyStart && !steadyEnd && !firstSettled) steadyEnd = usage;
    const workerMedianRss = workerSampler.medianRssMb();
    const worker$ = workerSampler.stop();
    const temporal$ = temporalSampler.stop();
    const emulator$ = emulatorSampler.stop();
    log(`measured ${((tEnd - t0) / 1000).toFixed(0)} s; reading histories and operations`);

    // --- what it cost ----------------------------------------------------------------
    const runMinutes = runs.reduce((s, r) => s + ((r.settledAtMs ?? tEnd) - r.startedAtMs), 0) / 60_000;
    const api = apiFigures(usage, PROJECT);
    const steady = steadyStart && steadyEnd ? apiFigures(steadyEnd, PROJECT, steadyStart) : undefined;
    const sample = sampleOf(runs, o.historySample, o.seed);
    const facts = await mapLimited(sample, 4, (r) => chainFacts(r.client, r));
    const history = summarizeHistories(facts, tEnd);
    const steadyWindow = steadyFromMs !== undefined && (steadyToMs ?? tEnd) - steadyFromMs >= MIN_STEADY_SECONDS * 1000 ? windowFigures(facts, steadyFromMs, steadyToMs ?? tEnd) : undefined;
    const latencies = await preemptionToInsert(emulator.endpoint, injector.injected, t0);
    const replacement = replacementSteps(facts.flatMap((f) => f.replacements), latencies.preempted);
    const observerWorkflows = await countWorkflows(client, `WorkflowType = '${OBSERVER_WORKFLOW_TYPE}'`);

    const ended = runs.filter((r) => r.outcome && r.outcome !== 'completed' && !unfinished.includes(r));
    const failures: Record<string, number> = {};
    for (const name of await mapLimited(ended, 8, (r) => whyEnded(r))) failures[name] = (failures[name] ?? 0) + 1;
    const rateLimitedByMethod = Object.fromEntries(Object.entries(api.methods).filter(([, m]) => m.rateLimited > 0).map(([k, m]) => [k, m.rateLimited]));
    const runHours = runMinutes / 60;
    const wallSeconds = (tEnd - t0) / 1000;
    const workerCpuProfile = o.cpuProfileDir !== undefined ? await profiledWorker(worker, o.cpuProfileDir, log) : undefined;
    return {
      runs: o.runs,
      completed: runs.filter((r) => r.outcome === 'completed').length,
      failed: ended.length,
      unfinished: unfinished.length,
      workerExited,
      failures,
      peakRunsAlive: peakOverlap(runs.map((r) => ({ fromMs: r.startedAtMs, toMs: r.settledAtMs })), tEnd),
      peakGuestsRunning: peakGuests?.running,
      workerRssAtPeakGuestsMb: optionalRound(peakGuests?.rssMb, 1),
      design: observerWorkflows > 0 ? 'fleet-observer' : 'per-run-looks',
      observerRequested: wantObserver ? 'on' : 'off',
      teamNamespaces: o.teamNamespaces,
      observerWorkflows,
      pollSeconds,
      workerTuning: tuning(o),
      durationSeconds: o.durationSeconds,
      rampSeconds: o.rampSeconds,
      preemptionRate: o.preemptionRate,
      seed: o.seed,
      wallSeconds: round(wallSeconds, 1),
      runHours,
      workerPeakRssMb: round(worker$?.peakRssMb ?? NaN, 1),
      workerCpuSeconds: round(worker$?.cpuSeconds ?? NaN, 1),
      workerCpuSecondsPerRunHour: round((worker$?.cpuSeconds ?? NaN) / runHours, 1),
      workerMedianRssMb: optionalRound(workerMedianRss, 1),
      workerCores: round((worker$?.cpuSeconds ?? NaN) / wallSeconds, 2),
      temporalCores: optionalRound(temporal$ && temporal$.cpuSeconds / wallSeconds, 2),
      emulatorCores: optionalRound(emulator$ && emulator$.cpuSeconds / wallSeconds, 2),
      temporalPeakRssMb: usageOf(temporal$, 'peakRssMb'),
      temporalCpuSeconds: usageOf(temporal$, 'cpuSeconds'),
      emulatorCpuSeconds: usageOf(emulator$, 'cpuSeconds'),
      apiReadsPerRunMinute: round(api.reads / runMinutes, 2),
      apiCallsPerRunMinute: round(api.calls / runMinutes, 2),
      steadyReadsPerRunMinute: steady && steady.elapsedSeconds >= MIN_STEADY_SECONDS ? round(steady.reads / ((steady.elapsedSeconds / 60) * o.runs), 2) : undefined,
      steadySeconds: steady ? round(steady.elapsedSeconds, 0) : undefined,
      steady: steadyWindow,
      rateLimited: api.rateLimited,
      rateLimitedByMethod,
      api,
      looksPerRunMinute: round((history.activityCounts.observe ?? 0) / (history.runHours * 60), 2),
      historyEventsPerRunHour: round(history.eventsPerRunHour, 0),
      historyEventsPerRun: round(history.events / Math.max(1, history.runsAnalysed), 0),
      slotWaits: history.slotWaits,
      activitySlots: slotSampler.figures(),
      workerMemory: memorySampler.measured(),
      history,
      preemptions: latencies.preemptions,
      preemptionsUnreplaced: latencies.unreplaced,
      preemptionToInsertP50S: optionalRound(percentile(latencies.seconds, 50), 2),
      preemptionToInsertP99S: optionalRound(percentile(latencies.seconds, 99), 2),
      preemptionToInsertMaxS: optionalRound(latencies.seconds.length ? Math.max(...latencies.seconds) : undefined, 2),
      replacementPath: replacement,
      workerCpuProfile,
      machine: machineLabel(),
      date: new Date(t0).toISOString(),
    };
  } finally {
    for (const s of samplers) s.stop();
    await connection?.close().catch(() => undefined);
    for (const child of children.reverse()) await child.stop().catch(() => undefined);
    await temporal?.stop().catch(() => undefined);
    if (o.keep || keepForPostMortem) log(`kept ${workDir}`);
    else rmSync(workDir, { recursive: true, force: true });
  }
}

/**
 * Stops the worker so that it writes its CPU profiles (Node writes them as the process
 * exits, which a SIGKILL prevents: hence the long grace), then reads them.
 */
async function profiledWorker(worker: Child, dir: string, log: (line: string) => void): Promise<ThreadProfile[]> {
  await worker.stop(120_000);
  const profiles = summarizeProfiles(dir);
  if (profiles.length === 0) throw new Error(`--cpu-profile: the worker wrote no profile into ${dir} (it ended with ${worker.ended() ?? 'no exit'}); see its log`);
  log(`worker CPU profiles in ${dir}: ${profiles.map((p) => `${p.file} ${p.sampledSeconds} s`).join(', ')}`);
  return profiles;
}

/**
 * Operations to keep so that every insert and preemption is still there to read at the end:
 * up to four per attempt (insert, preempted, stop, delete), for twice the attempts the
 * preemption rate makes likely, and never fewer than the emulator's default.
 */
function operationsFor(o: ScaleOptions): number {
  const attempts = 2 + Math.ceil(2 * o.preemptionRate * (o.durationSeconds / 3600));
  return Math.max(DEFAULT_OPERATIONS_KEPT, o.runs * 4 * attempts);
}

/** Room for every run at once, wherever placement puts it: spot GPUs in every zone, and regional quota. */
async function makeRoom(admin: EmulatorAdminClient, runs: number): Promise<void> {
  const zones = zonesWith(ACCELERATOR);
  const metric = `PREEMPTIBLE_${quotaMetric(ACCELERATOR)}`;
  const regions = new Set(zones.map((z) => regionOf(z)));
  // A preempted VM holds its GPU until it is deleted, so its replacement needs a second one.
  const gpus = 2 * runs + 16;
  for (const zone of zones) await admin.setCapacity(zone, { accelerator: ACCELERATOR, spot: gpus });
  for (const region of regions) await admin.setQuota(PROJECT, region, metric, gpus);
}

/** A failed run's failure type; how any other run ended. */
async function whyEnded(run: Tracked): Promise<string> {
  if (run.outcome !== 'failed') return run.outcome ?? 'unknown';
  try {
    await run.handle.result();
    return 'completed';
  } catch (err) {
    return failureName(err);
  }
}

export function failureName(err: unknown): string {
  let e: unknown = err;
  // WorkflowFailedError -> cause (ApplicationFailure with a type, CancelledFailure, ...).
  while (e && typeof e === 'object' && 'cause' in e && (e as { cause?: unknown }).cause) e = (e as { cause: unknown }).cause;
  const named = e as { type?: string; name?: string } | undefined;
  return named?.type ?? named?.name ?? 'unknown';
}

function sampleOf(runs: Tracked[], size: number | undefined, seed: number): Tracked[] {
  if (size === undefined || size >= runs.length) return runs;
  const random = seededRandom(seed ^ 0x5eed);
  const shuffled = [...runs];
  for (let i = shuffled.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
  }
  return shuffled.slice(0, size);
}

/** The run's executions, first to last, following continue-as-new. */
async function chainFacts(client: Client, run: Tracked): Promise<RunFacts> {
  const chain = [];
  let runId: string | undefined = run.firstRunId;
  while (runId && chain.length < 1000) {
    const history = await client.workflow.getHandle(run.workflowId, runId).fetchHistory();
    await decodeReleaseInputs(history.events ?? []);
    const facts = executionFacts(history.events ?? []);
    chain.push(facts);
    runId = facts.continuedAsRunId;
  }
  return runFacts(run.workflowId, chain);
}

/** A history's payloads are encrypted (codec/data-converter.ts): the releases' inputs are decoded so their resource names can be read. */
async function decodeReleaseInputs(events: HistoryEvent[]): Promise<void> {
  const codec = sternaPayloadCodec();
  for (const e of events) {
    const scheduled = e.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name !== 'release' || !scheduled.input?.payloads?.length) continue;
    scheduled.input.payloads = (await codec.decode(scheduled.input.payloads as Payload[])) as typeof scheduled.input.payloads;
  }
}

/**
 * Preemption -> replacement insert, from the emulator's own operations (the
 * `compute.instances.preempted` and `compute.instances.insert` records, read through the
 * Compute API after the API counters were read, so they are not counted).
 */
export async function preemptionToInsert(endpoint: string, injected: TimedName[], sinceMs: number): Promise<{ preemptions: number; unreplaced: number; seconds: number[]; preempted: Map<string, number> }> {
  const url = new URL(endpoint);
  const ops = new ZoneOperationsClient(gceClientOptions({ project: PROJECT, emulatorEndpoint: { host: url.hostname, port: Number(url.port), protocol: 'http' } }));
  const preempted = new Map<string, number>();
  const inserts: TimedName[] = [];
  try {
    for (const zone of zonesWith(ACCELERATOR)) {
      // GCE's operation types: `insert` for a create, `compute.instances.preempted` for a preemption.
      for (const type of ['compute.instances.preempted', 'insert']) {
        for await (const op of ops.listAsync({ project: PROJECT, zone, filter: `operationType = "${type}"` }, { autoPaginate: false })) {
          const name = op.targetLink?.split('/').pop();
          const atMs = Date.parse(op.insertTime ?? '');
          if (!name || !Number.isFinite(atMs) || atMs < sinceMs) continue;
          if (type === 'insert') inserts.push({ name, atMs });
          else preempted.set(name, Math.min(atMs, preempted.get(name) ?? Infinity));
        }
      }
    }
  } finally {
    await ops.close();
  }
  // An injected preemption whose record the emulator dropped (past --operations-kept) keeps the benchmark's own time.
  for (const p of injected) if (!preempted.has(p.name)) preempted.set(p.name, p.atMs);
  const result = preemptionLatencies(
    [...preempted].map(([name, atMs]) => ({ name, atMs })),
    inserts,
  );
  return { preemptions: preempted.size, unreplaced: result.unreplaced.length, seconds: result.seconds, preempted };
}

async function countWorkflows(client: Client, query: string): Promise<number> {
  let n = 0;
  try {
    for await (const _ of client.workflow.list({ query })) n++;
  } catch {
    return 0;
  }
  return n;
}

function tuning(o: ScaleOptions): string {
  const parts = [o.workerHeapMb !== undefined && `STERNA_WORKER_HEAP_MB=${o.workerHeapMb}`, o.workerCache !== undefined && `STERNA_MAX_CACHED_WORKFLOWS=${o.workerCache}`].filter(Boolean);
  return parts.length === 0 ? 'default' : parts.join(' ');
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

function optionalRound(x: number | undefined, digits: number): number | undefined {
  return x === undefined ? undefined : round(x, digits);
}

function usageOf(u: ProcessUsage | undefined, key: 'peakRssMb' | 'cpuSeconds'): number | undefined {
  return u ? round(u[key], 1) : undefined;
}

export function machineLabel(): string {
  return `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, ${platform()} ${release()}, node ${process.version}`;
}
