/**
 * The processes the scale benchmark measures, each its own OS process so its memory and
 * CPU are its own: the Temporal dev server, the GCE emulator with synthetic guests, and
 * one Sterna worker exactly as `npm run worker` runs it (default tuning, prebuilt
 * workflow bundle). Every child dies with the benchmark, even a killed one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, type Connection } from '@temporalio/client';
import { sternaDataConverter } from '../../codec/data-converter';
import { startTemporalServer, type TemporalServer } from '../../processes/temporal-server-process';
import { guardProcessGroup, stopGuard, stopProcessGroup } from '../../processes/process-guard';
import { bundleWorkflows } from '../../workers/bundle';
import { workerProcess } from '../../workers/process-tuning';
import { WORKFLOW_BUNDLE } from '../../workers/bundle';

/** The compiled tree (build/): this file is build/bench/common/stack.js. */
const BUILD = join(__dirname, '..', '..');

/** The fleet observer's workflow type, once branch h/obs is merged. */
export const OBSERVER_WORKFLOW_TYPE = 'fleetObserver';

/** True when this build has the fleet observer (workflows/fleet/observer.ts). */
export function observerAvailable(): boolean {
  return existsSync(join(BUILD, 'workflows', 'fleet', 'observer.js'));
}

export interface Child {
  name: string;
  pid: number;
  logFile: string;
  exited: Promise<number | null>;
  /** Exit code or signal once it has exited. */
  ended(): string | undefined;
  stop(graceMs?: number): Promise<void>;
}

function spawnChild(name: string, args: string[], env: NodeJS.ProcessEnv, logFile: string): Child {
  const fd = openSync(logFile, 'a');
  const child: ChildProcess = spawn(process.execPath, args, { env, stdio: ['ignore', fd, fd], detached: true });
  closeSync(fd);
  if (child.pid === undefined) throw new Error(`could not start the ${name} (${args.join(' ')})`);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const guard = guardProcessGroup(child.pid);
  return {
    name,
    pid: child.pid,
    logFile,
    exited,
    ended: () => (child.exitCode !== null ? `exit code ${child.exitCode}` : child.signalCode !== null ? `signal ${child.signalCode}` : undefined),
    async stop(graceMs = 10_000) {
      stopGuard(guard);
      await stopProcessGroup(child, exited, graceMs);
    },
  };
}

async function waitForLine(child: Child, pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const match = pattern.exec(readFileSync(child.logFile, 'utf8'));
    if (match) return match;
    const ended = child.ended();
    if (ended) throw new Error(`the ${child.name} ended (${ended}) before it was ready; see ${child.logFile}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the ${child.name} was not ready after ${timeoutMs / 1000} s; see ${child.logFile}`);
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * The workflow bundle the worker loads: `npm run build`'s when it is newer than the
 * compiled workflows, otherwise one made now (a stale bundle would measure old code).
 */
export async function workflowBundlePath(workDir: string): Promise<{ path: string; built: boolean }> {
  if (existsSync(WORKFLOW_BUNDLE) && statSync(WORKFLOW_BUNDLE).mtimeMs >= newestMtime(join(BUILD, 'workflows'))) return { path: WORKFLOW_BUNDLE, built: false };
  const { code } = await bundleWorkflows();
  const path = join(workDir, 'workflow-bundle.js');
  writeFileSync(path, code);
  return { path, built: true };
}

export interface EmulatorSettings {
  stateDir: string;
  bucketsDir: string;
  steps: number;
  checkpointEvery: number;
  /** Completed operations the emulator keeps (its default 5,000 would drop a long run's first inserts). */
  operationsKept?: number;
  /** Real VM processes running the agent (bench:logs) instead of synthetic guests; steps and checkpointEvery are then unused. */
  guest?: 'process' | 'synthetic';
  timeFactor?: number;
  /** false: count API calls but never answer 403 rateLimitExceeded (bench:client's bursts of reads). */
  rateQuotas?: boolean;
}

/** The bucket the benchmarks' runs checkpoint to (gs://sterna-bench/...). */
export const BENCH_BUCKET = 'sterna-bench';

/** The emulator as `npm run emulator` runs it, with synthetic guests; resolves with its endpoint. */
export async function startEmulatorProcess(workDir: string, settings: EmulatorSettings): Promise<{ child: Child; endpoint: string }> {
  mkdirSync(settings.stateDir, { recursive: true });
  // The benchmarks' checkpoint bucket exists, as a real project's would: each run checks its buckets first.
  mkdirSync(join(settings.bucketsDir, BENCH_BUCKET), { recursive: true });
  const args = [
    join(BUILD, 'emulator', 'main.js'),
    '--port', '0',
    '--state-dir', settings.stateDir,
    ...(settings.guest === 'process'
      ? ['--guest', 'process']
      : ['--guest', 'synthetic', '--synthetic-steps', String(settings.steps), '--synthetic-step-seconds', '1', '--synthetic-checkpoint-every', String(settings.checkpointEvery)]),
    ...(settings.timeFactor !== undefined ? ['--time-factor', String(settings.timeFactor)] : []),
    ...(settings.rateQuotas === false ? ['--no-rate-quotas'] : []),
    // Preemption -> insert is read from the operations afterwards: keep all of them.
    ...(settings.operationsKept !== undefined ? ['--operations-kept', String(settings.operationsKept)] : []),
    '--buckets-dir', settings.bucketsDir,
    // The benchmarks measure orchestration: the project-wide GPU quota never binds (regional quotas are set per run).
    '--gpus-all-regions', '1000000',
    '--kill-vms-on-exit',
    '--quiet',
  ];
  const child = spawnChild('GCE emulator', args, { ...process.env }, join(workDir, 'emulator.out'));
  try {
    const [, endpoint] = await waitForLine(child, /listening on (http:\/\/\S+)/, 60_000);
    return { child, endpoint };
  } catch (err) {
    await child.stop();
    throw err;
  }
}

export interface WorkerSettings {
  address: string;
  namespace: string;
  taskQueue: string;
  project: string;
  emulatorEndpoint: string;
  bucketsDir: string;
  bundlePath: string;
  /** STERNA_OBSERVER_* settings; ignored by a build without the observer. */
  observer: { startOnBoot: boolean; intervalSeconds?: number };
  /** STERNA_WORKER_HEAP_MB, the V8 heap limit (MB): not default tuning, for memory experiments. */
  heapMb?: number;
  /** STERNA_MAX_CACHED_WORKFLOWS: not default tuning, for memory experiments. */
  maxCachedWorkflows?: number;
  /** More worker settings (e.g. STERNA_REAPER_*), for benchmarks that need them. */
  extraEnv?: Record<string, string>;
  /** Write the worker's CPU profiles here (`node --cpu-prof`: a file per thread when it exits). */
  cpuProfileDir?: string;
}

/**
 * One worker process as `npm run worker` starts it (workers/process-tuning.ts), spawned
 * directly so its pid is the worker's: default tuning unless `heapMb` or `maxCachedWorkflows` is set.
 */
export async function startWorkerProcess(workDir: string, s: WorkerSettings): Promise<Child> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TEMPORAL_ADDRESS: s.address,
    TEMPORAL_NAMESPACE: s.namespace,
    STERNA_TASK_QUEUE: s.taskQueue,
    STERNA_GCE_PROJECT: s.project,
    STERNA_GCE_ENDPOINT: s.emulatorEndpoint,
    STERNA_LOCAL_BUCKETS: s.bucketsDir,
    STERNA_WORKFLOW_BUNDLE: s.bundlePath,
    STERNA_OBSERVER_ON_START: String(s.observer.startOnBoot),
    STERNA_OBSERVER: s.observer.startOnBoot ? 'on' : 'off',
    ...(s.observer.intervalSeconds !== undefined ? { STERNA_OBSERVER_INTERVAL_SECONDS: String(s.observer.intervalSeconds) } : {}),
    ...s.extraEnv,
  };
  // The benchmark's own tuning must not leak into "default tuning".
  delete env.STERNA_MAX_CONCURRENT_ACTIVITIES;
  delete env.NODE_OPTIONS;
  delete env.STERNA_MAX_CACHED_WORKFLOWS;
  delete env.STERNA_WORKER_HEAP_MB;
  for (const name of Object.keys(env)) if (name.startsWith('MALLOC_')) delete env[name];
  if (s.maxCachedWorkflows !== undefined) env.STERNA_MAX_CACHED_WORKFLOWS = String(s.maxCachedWorkflows);
  if (s.heapMb !== undefined) env.STERNA_WORKER_HEAP_MB = String(s.heapMb);
  const tuned = workerProcess(env);
  const profiling = s.cpuProfileDir !== undefined ? ['--cpu-prof', `--cpu-prof-dir=${s.cpuProfileDir}`] : [];
  const child = spawnChild('Sterna worker', [...tuned.nodeFlags, ...profiling, join(BUILD, 'workers', 'main.js')], tuned.env, join(workDir, 'worker.log'));
  try {
    await waitForLine(child, /sterna worker on task queue/, 120_000);
    return child;
  } catch (err) {
    await child.stop();
    throw err;
  }
}

/** The fleet's namespace when the runs are spread over team namespaces (docs/tenancy.md). */
export const SYSTEM_NAMESPACE = 'sterna-system';

/** The namespaces of `n` teams (`--team-namespaces n`): team-1 ... team-n. */
export function teamNamespaces(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `team-${i + 1}`);
}

/**
 * Where a benchmark's workflows live (`--team-namespaces n`): with teams, the fleet in the
 * system namespace and the runs spread over team-1 ... team-n, one worker serving all
 * (docs/tenancy.md); without, everything in the server's own namespace.
 */
export class BenchNamespaces {
  readonly teams: string[];

  constructor(teamCount: number) {
    this.teams = teamNamespaces(teamCount);
  }

  /** What the server must create besides its own namespace. */
  get created(): string[] | undefined {
    return this.teams.length > 0 ? [SYSTEM_NAMESPACE, ...this.teams] : undefined;
  }

  /** The worker's own namespace: the fleet's. */
  fleet(server: TemporalServer): string {
    return this.teams.length > 0 ? SYSTEM_NAMESPACE : server.namespace;
  }

  /** The worker's environment for the team namespaces it serves beside the fleet's. */
  workerEnv(): Record<string, string> {
    return this.teams.length > 0 ? { STERNA_TEAM_NAMESPACES: this.teams.join(',') } : {};
  }

  /** Clients that encrypt as production does: the fleet's namespace, and the runs' (each team's, in turn). */
  clients(connection: Connection, server: TemporalServer): { fleet: Client; runs: Client[] } {
    const of = (namespace: string) => new Client({ connection, namespace, dataConverter: sternaDataConverter() });
    const fleet = of(this.fleet(server));
    return { fleet, runs: this.teams.length > 0 ? this.teams.map(of) : [fleet] };
  }
}

/** The Temporal server; with `dbFile` it keeps its state there (SQLite), so it can be restarted on `port`. */
export async function startTemporal(workDir: string, persistent?: { dbFile: string; port?: number }, namespaces?: string[]): Promise<TemporalServer> {
  const options = { headless: true, logFile: join(workDir, 'temporal.log'), readyTimeoutMs: 120_000, dbFile: persistent?.dbFile, namespaces };
  // A restart must come back on the port its clients know; a first start may take any.
  return startTemporalServer({ ...options, ...(persistent?.port !== undefined ? { port: persistent.port } : {}) });
}
