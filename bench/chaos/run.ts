/**
 * One chaos measurement: N concurrent runs on the dev server (persistent SQLite) and the
 * emulator (synthetic guests), while the benchmark SIGKILLs and restarts the worker,
 * restarts the dev server once, answers a few per cent of GCE calls 503, 429 or late,
 * cuts every GET for `outageSeconds`, cancels runs whose insert is in flight, reuses a
 * workflow id, preempts spot VMs as a replayed trace says, and terminates a tenth of the
 * runs; then the reaper (a Schedule the worker installs) cleans up. It reports how runs
 * ended, what leaked after the reaper's next pass, duplicate VMs, the ledger-to-billing
 * gap and how long each kind of fault took to recover from.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { InstancesClient } from '@google-cloud/compute';
import { type Client, Connection, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { PassThroughClient } from 'google-auth-library';
import { useEphemeralKeyIfNone } from '../../codec/keys';
import { readTraceFile } from '../../emulator/spot-trace';
import { quotaMetric, zonesWith } from '../../config/catalog';
import { executionToken, FailureType, nonRetryableFailureTypes, OwnerLabel, regionOf, resourceName, runKey, type RunResult, type RunSpecInput, statusQuery } from '../../workflows/api';
import type { TemporalServer } from '../../processes/temporal-server-process';
import { EmulatorAdminClient, type AdminInstanceView } from '../../emulator/admin-client';
import type { FaultSpec } from '../../emulator/faults';
import { reaperLog } from '../../activities/reaper/schedule';
import { backgroundFaults, duplicateVms, faultPlan, foreignNameRuns, ledgerGapPct, Outcome, spread, tally, traceFlips, type Spread } from './analysis';
import { preemptible } from '../scale/preemptions';
import { mapLimited } from '../../activities/map-limited';
import { ACCELERATOR, failureName, machineLabel, preemptionToInsert, PROJECT } from '../scale/run';
import { BenchNamespaces, startEmulatorProcess, startTemporal, startWorkerProcess, workflowBundlePath, type Child } from '../common/stack';

/**
 * What a healthy run may still wait once the faults are over, on top of twice the window
 * and the outage: the observer's activity retried after a kill (a 15 s heartbeat timeout,
 * up to 30 s of backoff), the observer's progress read that sees a short trainer's exit
 * (60 s by default) and a release's stop (up to GCE's 30 s grace). A stuck run stays stuck.
 */
const SETTLE_MS = 3 * 60_000;

export const DEFAULT_TRACE = join(__dirname, '..', '..', '..', '..', 'shared', 'traces', 'aws-v100-9zone-2023-02.json');

export interface ChaosOptions {
  runs: number;
  /** The fault window and the time the runs train in it; the benchmark gives up at 2 x this. */
  minutes: number;
  seed: number;
  /** Length of the all-GET outage (the issue's: 200 s). */
  outageSeconds: number;
  /** Seconds each run trains without interruption (default: 40% of the window). */
  trainSeconds?: number;
  reaperIntervalSeconds: number;
  reaperGraceSeconds: number;
  trace: string;
  /** Real seconds per trace tick. */
  traceTickSeconds: number;
  /** Per cent of every GCE call answered 503, 429 or hung (the issue's light mix is 6, its heavy 25). */
  faultMixPct: number;
  /** Spread the runs over this many team namespaces, the fleet in the system one (0: one namespace for all). */
  teamNamespaces: number;
  keep: boolean;
  json: boolean;
}

export interface ChaosResult {
  runs: number;
  completed: number;
  failedNamed: number;
  stuck: number;
  leakedAfterReap: number;
  duplicateVms: number;
  /** VMs of someone else's the benchmark put under runs' names, and how many of them Sterna touched (must be 0). */
  foreignVms: number;
  foreignTouched: number;
  maxLedgerGapPct: number;
  /** Completed runs whose ledger was compared with the billing of their VMs. */
  ledgersCompared: number;
  /** The run with the largest gap: its ledger lines beside the billing of its VMs. */
  worstLedger?: { workflowId: string; gapPct: number; ledger: { attempt: number; outcome: string; seconds: number; usd: number }[]; billed: { attempt: number; seconds: number; usd: number }[] };
  cancelled: number;
  terminated: number;
  failedOther: number;
  failures: Record<string, number>;
  /** The reused workflow id's second run. */
  reusedIdOutcome: Outcome;
  /** From a run's end (terminate) to the reaper's deletion of what it left. */
  orphanLifetime: Spread;
  reaped: number;
  /** Fault -> the runs sampled at the fault train again (or preemption -> replacement insert). */
  recovery: Record<string, Spread>;
  faults: { workerKills: number; serverRestarts: number; outageSeconds: number; cancelsInFlight: number; terminated: number; terminationsPlanned: number; traceFlips: number; preemptions: number; faultMixPct: number; apiFaultRules: FaultSpec[] };
  trainSeconds: number;
  minutes: number;
  seed: number;
  /** Team namespaces the runs were spread over (0: runs and fleet in one namespace). */
  teamNamespaces: number;
  wallSeconds: number;
  machine: string;
  date: string;
}

/** What the benchmark puts under a run's names: a plain VM of someone else's, with a confusable label. */
const FOREIGN_LABELS = { owner: 'someone-else', 'sterna-attempt': '1' };

interface Tracked {
  index: number;
  workflowId: string;
  handle: WorkflowHandleWithFirstExecutionRunId;
  /** The client of the run's (team's) namespace. */
  client: Client;
  terminatedAtMs?: number;
}


export function chaosSpec(checkpointEvery: number): RunSpecInput {
  return {
    name: 'chaos-bench',
    command: ['train'],
    checkpoint: { uri: 'gs://sterna-bench/checkpoints', interval: checkpointEvery },
    resources: { accelerators: [{ type: ACCELERATOR, count: 1 }] },
    pricing: { mode: 'spot', budgetUsd: 1000 },
    recovery: { maxPreemptions: 1000, pollSeconds: 5 },
    labels: { project: 'chaos' },
  };
}

export async function runChaosBench(o: ChaosOptions, log: (line: string) => void): Promise<ChaosResult> {
  // The worker it spawns inherits this key when none is configured (as bench:scale does).
  useEphemeralKeyIfNone();
  const windowMs = o.minutes * 60_000;
  const trainSeconds = Math.round(o.trainSeconds ?? Math.max(30, 0.4 * o.minutes * 60));
  const checkpointEvery = Math.max(5, Math.round(trainSeconds / 10));
  const spec = chaosSpec(checkpointEvery);
  const workDir = mkdtempSync(join(tmpdir(), 'sterna-chaos-'));
  const bucketsDir = join(workDir, 'buckets');
  const dbFile = join(workDir, 'temporal.sqlite');
  let temporal: TemporalServer | undefined;
  let emulatorChild: Child | undefined;
  let worker: Child | undefined;
  let connection: Connection | undefined;
  let stopping = false;
  try {
    log(`work dir ${workDir}`);
    const bundle = await workflowBundlePath(workDir);
    // With team namespaces, the fleet lives in the system one and the runs in the teams' (docs/tenancy.md).
    const namespaces = new BenchNamespaces(o.teamNamespaces);
    temporal = await startTemporal(workDir, { dbFile }, namespaces.created);
    const port = Number(temporal.address.split(':').pop());
    log(`Temporal dev server ${temporal.address}, state in ${dbFile}`);
    const emulator = await startEmulatorProcess(workDir, { stateDir: join(workDir, 'emulator'), bucketsDir, steps: trainSeconds, checkpointEvery });
    emulatorChild = emulator.child;
    const admin = new EmulatorAdminClient(emulator.endpoint);
    const endpoint = new URL(emulator.endpoint);
    const instances = new InstancesClient({ apiEndpoint: endpoint.hostname, port: Number(endpoint.port), protocol: 'http', authClient: new PassThroughClient(), fallback: true });
    const zones = zonesWith(ACCELERATOR);
    const gpus = 2 * o.runs + 32;
    await makeRoom(admin, zones, gpus);
    const taskQueue = `chaos-${Date.now().toString(36)}`;
    const startWorker = () =>
      startWorkerProcess(workDir, {
        address: temporal!.address,
        namespace: namespaces.fleet(temporal!),
        taskQueue,
        project: PROJECT,
        emulatorEndpoint: emulator.endpoint,
        bucketsDir,
        bundlePath: bundle.path,
        observer: { startOnBoot: true },
        extraEnv: {
          STERNA_REAPER_INTERVAL_SECONDS: String(o.reaperIntervalSeconds),
          STERNA_REAPER_GRACE_SECONDS: String(o.reaperGraceSeconds),
          ...namespaces.workerEnv(),
        },
      });
    worker = await startWorker();
    log(`worker pid ${worker.pid} on ${taskQueue}; reaper every ${o.reaperIntervalSeconds} s, grace ${o.reaperGraceSeconds} s`);
    connection = await Connection.connect({ address: temporal.address });
    // Payloads are encrypted as in production: the client must decode what the worker wrote.
    // The fleet's namespace (the reaper's passes), and the runs' (each team's, in turn).
    const { fleet: client, runs: runClients } = namespaces.clients(connection, temporal);
    const runClient = (index: number) => runClients[index % runClients.length]!;
    /** A run's handle in its own namespace. */
    const handleOf = (workflowId: string) => (runs.find((r) => r?.workflowId === workflowId)?.client ?? client).workflow.getHandle(workflowId);
    const faultRules = backgroundFaults(o.faultMixPct);
    for (const rule of faultRules) await admin.injectFault(rule);

    const plan = faultPlan(o.runs, windowMs, o.outageSeconds, o.seed);
    const flips = traceFlips(readTraceFile(o.trace), zones, windowMs, o.traceTickSeconds * 1000, o.seed);
    const recovery: Record<string, number[]> = { 'worker-kill': [], 'server-restart': [], 'get-outage': [] };
    const injected: { name: string; atMs: number }[] = [];
    const runs: Tracked[] = [];
    const tasks: Promise<unknown>[] = [];
    let restarting = false;
    let cancelsInFlight = 0;
    let terminationsLanded = 0;
    const rampStart = Date.now();
    let t0 = rampStart;
    /**
     * A call to the Temporal server that the plan itself makes (terminate, start), retried
     * while the planned server restart is under way, as an operator would: the client's own
     * retries give up after about 25 s, and a restart on a loaded machine can take longer.
     * A run that has already closed is not retried: the terminate simply came too late.
     */
    const served = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
      for (let deadline = Date.now() + 120_000; ; ) {
        try {
          return await fn();
        } catch (err) {
          if (err instanceof WorkflowNotFoundError || err instanceof WorkflowExecutionAlreadyStartedError || Date.now() > deadline) throw err;
          log(`${secs(t0)} s: ${what} failed (${(err as Error).message}); retrying`);
          await sleep(2000);
        }
      }
    };
    const at = (ms: number, what: string, fn: () => Promise<void>) =>
      tasks.push(
        sleep(Math.max(0, t0 + ms - Date.now()))
          .then(() => (stopping ? undefined : fn()))
          .catch((err: unknown) => log(`${what} failed: ${(err as Error).message}`)),
      );

    /**
     * Up to five runs whose VMs train now (from the emulator: no query that the fault may
     * hold up), with the step each VM is at: a run has recovered once it has seen its VM
     * train past that step.
     */
    const sampleTraining = async () => {
      const byKey = new Map(runs.filter((r) => r && r.terminatedAtMs === undefined).map((r) => [runKey(r.workflowId), r.workflowId]));
      const steps = new Map<string, number>();
      for (const vm of await admin.instances().catch(() => [] as AdminInstanceView[])) {
        const id = byKey.get(vm.labels[OwnerLabel.Run] ?? '');
        const step = Number(vm.guestAttributes.sterna?.step);
        if (id && vm.status === 'RUNNING' && vm.guestAttributes.sterna?.phase === 'training' && Number.isFinite(step)) steps.set(id, step);
        if (steps.size >= 5) break;
      }
      return steps;
    };
    /** Time from `fromMs` until every sampled run trains past its step (or has ended). */
    const recovered = async (steps: Map<string, number>, fromMs: number, kind: string) => {
      const deadline = Date.now() + 10 * 60_000;
      const waiting = new Set(steps.keys());
      while (waiting.size > 0 && Date.now() < deadline && !stopping) {
        for (const id of [...waiting]) {
          const s = await handleOf(id).query(statusQuery).catch(() => undefined);
          const desc = s ? undefined : await handleOf(id).describe().catch(() => undefined);
          if ((s && (s.step ?? -1) > steps.get(id)!) || (desc && desc.status.name !== 'RUNNING')) waiting.delete(id);
        }
        if (waiting.size > 0) await sleep(1000);
      }
      if (steps.size > 0 && waiting.size === 0) recovery[kind].push((Date.now() - fromMs) / 1000);
    };

    // --- the runs ----------------------------------------------------------------------
    const rampMs = Math.min(120_000, Math.max(5_000, o.runs * 100));
    const stamp = Date.now().toString(36);
    // Starts go out on schedule, not one after the other's answer: a loaded server must not stretch the ramp.
    const starting: Promise<void>[] = [];
    const foreignFor = new Set(foreignNameRuns(o.runs, plan));
    const foreign: ForeignVm[] = [];
    for (let i = 0; i < o.runs; i++) {
      await sleep(Math.max(0, rampStart + (i * rampMs) / o.runs - Date.now()));
      const workflowId = `chaos-${stamp}-${i}`;
      starting.push(
        runClient(i).workflow.start('trainingRun', { taskQueue, workflowId, args: [spec] }).then(async (handle) => {
          runs[i] = { index: i, workflowId, handle, client: runClient(i) };
          // Someone else's VMs under the names this run will use: its first two attempts, in every zone.
          if (foreignFor.has(i)) foreign.push(...(await occupyNames(instances, zones, workflowId, executionToken(handle.firstExecutionRunId), log)));
        }),
      );
    }
    await Promise.all(starting);
    log(`started ${o.runs} runs in ${((Date.now() - rampStart) / 1000).toFixed(0)} s; the fault window begins`);
    // The fault window begins when every run has started.
    t0 = Date.now();

    // --- the faults ----------------------------------------------------------------------
    for (const killAt of plan.workerKills) {
      at(killAt, 'worker SIGKILL', async () => {
        const sample = await sampleTraining();
        restarting = true;
        const killed = worker!;
        process.kill(-killed.pid, 'SIGKILL');
        await killed.exited;
        const from = Date.now();
        log(`${secs(t0)} s: worker SIGKILLed; restarting it`);
        await sleep(3000);
        worker = await startWorker();
        restarting = false;
        await recovered(sample, from, 'worker-kill');
      });
    }
    at(plan.serverRestartAt, 'dev server restart', async () => {
      const sample = await sampleTraining();
      restarting = true;
      log(`${secs(t0)} s: restarting the dev server (SQLite ${dbFile})`);
      const from = Date.now();
      await temporal!.stop();
      temporal = await startTemporal(workDir, { dbFile, port }, namespaces.created);
      restarting = false;
      await recovered(sample, from, 'server-restart');
    });
    at(plan.outage.atMs, 'GET outage', async () => {
      const sample = await sampleTraining();
      log(`${secs(t0)} s: every GET answers 503 for ${plan.outage.seconds} s`);
      await admin.injectFault({ fraction: 1, status: 503, method: 'GET' });
      await sleep(plan.outage.seconds * 1000);
      await admin.clearFaults();
      for (const rule of faultRules) await admin.injectFault(rule);
      log(`${secs(t0)} s: GETs answer again`);
      await recovered(sample, Date.now(), 'get-outage');
    });
    at(plan.cancelsAt, 'cancels during inserts', async () => {
      const count = Math.max(1, Math.round(o.runs / 50));
      await admin.injectFault({ fraction: 1, hangMs: 8000, path: '/instances$', method: 'POST', count });
      const cancelled = await Promise.all(
        Array.from({ length: count }, async (_, k) => {
          const workflowId = `chaos-${stamp}-cancel-${k}`;
          const own = runClient(o.runs + k);
          const handle = await own.workflow.start('trainingRun', { taskQueue, workflowId, args: [spec] });
          const tracked: Tracked = { index: o.runs + k, workflowId, handle, client: own };
          runs.push(tracked);
          // Provisioning begins within a second or two; the insert then hangs for 8 s.
          await sleep(3000);
          await handle.cancel();
          return tracked;
        }),
      );
      cancelsInFlight = cancelled.length;
      log(`${secs(t0)} s: cancelled ${count} runs while their insert was in flight`);
    });
    at(plan.reuseAt, 'reused workflow id', async () => {
      const first = runs[0];
      await served('terminate', () => first.handle.terminate('chaos: the workflow id is reused'));
      first.handle = await served('start', () => first.client.workflow.start('trainingRun', { taskQueue, workflowId: first.workflowId, args: [spec] }));
      first.terminatedAtMs = Date.now();
      log(`${secs(t0)} s: terminated ${first.workflowId} and started it again under the same id`);
    });
    for (const t of plan.terminations) {
      at(t.atMs, 'terminate', async () => {
        const run = runs[t.run];
        // A run whose training is short may have completed already: that termination did not happen.
        await served('terminate', () => run.handle.terminate('chaos: temporal workflow terminate'));
        run.terminatedAtMs = Date.now();
        terminationsLanded += 1;
        const vms = (await admin.instances()).filter((i) => i.labels[OwnerLabel.Run] === runKey(run.workflowId)).map((i) => `${i.name} ${i.status}`);
        log(`${secs(t0)} s: terminated ${run.workflowId}; it leaves ${vms.length ? vms.join(', ') : 'no VM'}`);
      });
    }
    for (const flip of flips) {
      at(flip.atMs, 'trace', async () => {
        await admin.setCapacity(flip.zone, { accelerator: ACCELERATOR, spot: flip.available ? gpus : 0 });
        if (flip.available) return;
        const victims = (await admin.instances()).filter((i: AdminInstanceView) => i.zone === flip.zone && i.project === PROJECT && preemptible(i));
        for (const vm of victims) {
          const when = Date.now();
          if (await admin.preempt(vm.project, vm.zone, vm.name).then(() => true, () => false)) injected.push({ name: vm.name, atMs: when });
        }
      });
    }

    // --- wait --------------------------------------------------------------------------
    const capAt = t0 + 2 * windowMs + o.outageSeconds * 1000 + SETTLE_MS;
    let lastReport = Date.now();
    for (;;) {
      await sleep(3000);
      if (!restarting && worker?.ended()) {
        log(`${secs(t0)} s: the worker exited (${worker.ended()}); restarting it`);
        worker = await startWorker();
      }
      const open = await openRuns(runClients, taskQueue);
      const faultsDone = Date.now() >= t0 + windowMs;
      if (open === 0 && faultsDone) break;
      if (Date.now() >= capAt) {
        log(`${secs(t0)} s: time cap: ${open ?? '?'} runs still open`);
        break;
      }
      if (Date.now() - lastReport >= 30_000) {
        lastReport = Date.now();
        log(`${secs(t0)} s: ${open ?? '?'} runs open, ${injected.length} trace preemptions`);
      }
    }
    stopping = true;
    await Promise.all(tasks);
    // The chaos is over: the reaper's pass and the benchmark's own reads see a healthy API.
    await admin.clearFaults();
    const closedAt = Date.now();

    // --- the reaper's next pass ----------------------------------------------------------
    const stuckIds = new Set<string>();
    for (const r of runs) if ((await r.handle.describe().catch(() => undefined))?.status.name === 'RUNNING') stuckIds.add(r.workflowId);
    const foreignNames = new Set(foreign.map((f) => `${f.zone}/${f.name}`));
    const leftovers = async () =>
      (await admin.instances()).filter((i) => i.project === PROJECT && i.labels[OwnerLabel.Run] && !foreignNames.has(`${i.zone}/${i.name}`) && ![...stuckIds].some((id) => runKey(id) === i.labels[OwnerLabel.Run]));
    const passDeadline = closedAt + (o.reaperGraceSeconds + 2 * o.reaperIntervalSeconds + 120) * 1000;
    const leftAtClose = await leftovers();
    log(`${secs(t0)} s: all runs ended; ${leftAtClose.length} Sterna VMs left for the reaper`);
    // The next pass that can judge every leftover: one that starts once the youngest is past the grace period.
    const judgeableFrom = Math.max(closedAt, ...leftAtClose.map((v) => Date.parse(v.lastStartTimestamp ?? '') || closedAt)) + o.reaperGraceSeconds * 1000;
    while (Date.now() < passDeadline) {
      if ((await leftovers()).length === 0) break;
      const passed = await client.workflow
        .count(`WorkflowType = 'sternaReaper' AND ExecutionStatus = 'Completed' AND StartTime > '${new Date(judgeableFrom).toISOString()}'`)
        .then((c) => c.count, () => 0);
      if (passed > 0) break;
      await sleep(2000);
    }
    const leaked = await leftovers();
    for (const vm of leaked) log(`leaked: ${vm.zone}/${vm.name} (${vm.status})`);
    // The pass that deleted the last leftovers may still be running: its result is the record.
    const recordedBy = Date.now() + 180_000;
    while (Date.now() < recordedBy && (await client.workflow.count(`WorkflowType = 'sternaReaper' AND ExecutionStatus = 'Running'`).then((c) => c.count, () => 0)) > 0) await sleep(2000);

    // --- what happened --------------------------------------------------------------------
    const tEnd = Date.now();
    const outcomes = await mapLimited(runs, 8, (r) => outcomeOf(r, stuckIds));
    const counted = tally(outcomes.map((x) => x.outcome));
    const failures: Record<string, number> = {};
    for (const x of outcomes) if (x.failure) failures[x.failure] = (failures[x.failure] ?? 0) + 1;
    const billing = (await admin.billing(PROJECT)).records;
    const gaps: number[] = [];
    let worstLedger: ChaosResult['worstLedger'];
    for (const [k, x] of outcomes.entries()) {
      if (x.outcome !== Outcome.Completed || !x.result || !x.execution) continue;
      const own = billing.filter((b) => b.labels[OwnerLabel.Run] === runKey(runs[k].workflowId) && b.labels[OwnerLabel.Execution] === x.execution);
      const billed = own.reduce((s, b) => s + b.costUsd, 0);
      const gap = ledgerGapPct(x.result.totalCostUsd, billed);
      gaps.push(gap);
      if (!worstLedger || gap > worstLedger.gapPct) {
        worstLedger = {
          workflowId: runs[k].workflowId,
          gapPct: Math.round(gap * 1000) / 1000,
          ledger: x.result.attempts.map((a) => ({ attempt: a.attempt, outcome: a.outcome, seconds: Math.round(a.runningSeconds * 10) / 10, usd: a.costUsd })),
          billed: own.map((b) => ({ attempt: Number(b.labels[OwnerLabel.Attempt]), seconds: Math.round(b.runningSeconds * 10) / 10, usd: b.costUsd })),
        };
      }
    }
    if (worstLedger) log(`largest ledger gap: ${JSON.stringify(worstLedger)}`);
    const duplicates = duplicateVms(billing);
    for (const owner of duplicates.owners) log(`duplicate VMs for ${owner}`);
    const reapedAt = new Map<string, number>();
    const log$ = await reaperLog(client, { limit: 1000 }).catch((err: Error) => {
      log(`reading the reaper log failed: ${err.message}`);
      return [];
    });
    const passes = await client.workflow.count(`WorkflowType = 'sternaReaper'`).then((c) => c.count, () => undefined);
    log(`${passes ?? '?'} reaper passes; ${log$.length} deleted something`);
    for (const entry of log$) {
      for (const r of entry.result.reaped) if (r.outcome === 'deleted' && r.workflowId) reapedAt.set(`${r.workflowId}/${r.ref.name}`, Date.parse(r.deletedAt ?? entry.result.at));
    }
    const lifetimes: number[] = [];
    for (const [key, atMs] of reapedAt) {
      const run = runs.find((r) => key.startsWith(`${r.workflowId}/`));
      if (run?.terminatedAtMs !== undefined) lifetimes.push(Math.max(0, (atMs - run.terminatedAtMs) / 1000));
    }
    const preemptions = await preemptionToInsert(emulator.endpoint, injected, t0);
    // Someone else's VMs must be exactly as they were: there, running, their labels theirs.
    const now = new Map((await admin.instances()).filter((i) => i.project === PROJECT).map((i) => [`${i.zone}/${i.name}`, i]));
    const touched = foreign.filter((f) => {
      const vm = now.get(`${f.zone}/${f.name}`);
      return !vm || vm.status !== 'RUNNING' || JSON.stringify(vm.labels) !== JSON.stringify(FOREIGN_LABELS);
    });
    for (const f of touched) log(`someone else's VM touched: ${f.zone}/${f.name} (${now.get(`${f.zone}/${f.name}`)?.status ?? 'gone'})`);
    return {
      runs: o.runs,
      completed: counted[Outcome.Completed],
      failedNamed: counted[Outcome.FailedNamed],
      stuck: counted[Outcome.Stuck],
      leakedAfterReap: leaked.length,
      duplicateVms: duplicates.count,
      foreignVms: foreign.length,
      foreignTouched: touched.length,
      maxLedgerGapPct: Math.round(Math.max(0, ...gaps) * 1000) / 1000,
      ledgersCompared: gaps.length,
      worstLedger,
      cancelled: counted[Outcome.Cancelled],
      terminated: counted[Outcome.Terminated],
      failedOther: counted[Outcome.FailedOther],
      failures,
      reusedIdOutcome: outcomes[0].outcome,
      orphanLifetime: spread(lifetimes),
      reaped: reapedAt.size,
      recovery: { ...Object.fromEntries(Object.entries(recovery).map(([k, v]) => [k, spread(v)])), 'preemption-to-insert': spread(preemptions.seconds) },
      faults: {
        workerKills: plan.workerKills.length,
        serverRestarts: 1,
        outageSeconds: o.outageSeconds,
        cancelsInFlight,
        terminated: terminationsLanded + 1,
        terminationsPlanned: plan.terminations.length + 1,
        traceFlips: flips.length,
        preemptions: injected.length,
        faultMixPct: o.faultMixPct,
        apiFaultRules: faultRules,
      },
      trainSeconds,
      minutes: o.minutes,
      seed: o.seed,
      teamNamespaces: o.teamNamespaces,
      wallSeconds: Math.round((tEnd - rampStart) / 1000),
      machine: machineLabel(),
      date: new Date(t0).toISOString(),
    };
  } finally {
    stopping = true;
    await connection?.close().catch(() => undefined);
    await worker?.stop().catch(() => undefined);
    await emulatorChild?.stop().catch(() => undefined);
    await temporal?.stop().catch(() => undefined);
    if (o.keep) log(`kept ${workDir}`);
    else rmSync(workDir, { recursive: true, force: true });
  }
}

/** Runs still open on `taskQueue`, over every namespace runs live in; undefined when a count failed (a server restart). */
async function openRuns(clients: Client[], taskQueue: string): Promise<number | undefined> {
  let open = 0;
  for (const c of clients) {
    const n = await c.workflow.count(`TaskQueue = '${taskQueue}' AND WorkflowType = 'trainingRun' AND ExecutionStatus = 'Running'`).then((r) => r.count, () => undefined);
    if (n === undefined) return undefined;
    open += n;
  }
  return open;
}

function secs(t0: number): number {
  return Math.round((Date.now() - t0) / 1000);
}

interface ForeignVm {
  zone: string;
  name: string;
}

/** Puts a plain VM of someone else's under a run's first two attempt names in each zone; returns those that landed first. */
async function occupyNames(instances: InstancesClient, zones: string[], workflowId: string, execution: string, log: (line: string) => void): Promise<ForeignVm[]> {
  const wanted = zones.flatMap((zone) => [1, 2].map((attempt) => ({ zone, name: resourceName(workflowId, execution, attempt) })));
  const landed = await Promise.all(
    wanted.map(async (vm) => {
      const instanceResource = {
        name: vm.name,
        labels: FOREIGN_LABELS,
        machineType: `zones/${vm.zone}/machineTypes/e2-standard-2`,
        disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: 'debian-12' } }],
        networkInterfaces: [{ network: 'global/networks/default' }],
      };
      // The background faults apply to this caller too: a few tries, as any client would.
      for (let tries = 0; tries < 5; tries++) {
        try {
          await instances.insert({ project: PROJECT, zone: vm.zone, instanceResource });
          return vm;
        } catch (err) {
          // The run's own attempt got there first: nothing of someone else's under that name.
          if ((err as { httpStatusCode?: number }).httpStatusCode === 409 || /already exists/i.test((err as Error).message)) return undefined;
          await sleep(1000);
        }
      }
      return undefined;
    }),
  );
  const placed = landed.filter((vm): vm is ForeignVm => vm !== undefined);
  log(`someone else's VMs under ${workflowId}'s names: ${placed.length} of ${wanted.length}`);
  return placed;
}

async function makeRoom(admin: EmulatorAdminClient, zones: string[], gpus: number): Promise<void> {
  const metric = `PREEMPTIBLE_${quotaMetric(ACCELERATOR)}`;
  for (const zone of zones) await admin.setCapacity(zone, { accelerator: ACCELERATOR, spot: gpus });
  for (const region of new Set(zones.map((z) => regionOf(z)))) await admin.setQuota(PROJECT, region, metric, gpus);
}

const NAMED = new Set<string>([...Object.values(FailureType), ...nonRetryableFailureTypes]);

async function outcomeOf(run: Tracked, stuck: Set<string>): Promise<{ outcome: Outcome; failure?: string; result?: RunResult; execution?: string }> {
  if (stuck.has(run.workflowId)) return { outcome: Outcome.Stuck };
  const handle = run.handle;
  const description = await handle.describe();
  const execution = executionToken(description.raw.workflowExecutionInfo?.firstRunId || handle.firstExecutionRunId);
  switch (description.status.name) {
    case 'COMPLETED':
      return { outcome: Outcome.Completed, result: (await handle.result()) as RunResult, execution };
    case 'CANCELLED':
      return { outcome: Outcome.Cancelled };
    case 'TERMINATED':
      return { outcome: Outcome.Terminated };
    default: {
      const failure = await handle.result().then(() => 'completed', failureName);
      return { outcome: NAMED.has(failure) ? Outcome.FailedNamed : Outcome.FailedOther, failure };
    }
  }
}
