/**
 * The whole local stack for lifecycle tests: the real Temporal dev server, the GCE
 * emulator with real VM processes, the example published to a local bucket, and a
 * Sterna worker — in-process, or as a separate process the test can SIGKILL.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, type WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { catalogPriceBook } from '../../config/price-book';
import type { GceConfig } from '../../config/worker-config';
import { publishExampleLocally } from '../../examples/publish';
import type { GceProvider } from '../../activities/providers/gce';
import { buildCheckTargets, buildDatasetChecker, buildGceProvider } from '../../workers/providers';
import { BucketLocator } from '../../activities/storage';
import { observerOptions } from '../../activities/fleet';
import { NamespaceClients } from '../../activities/namespaces';
import { createSternaWorkers } from '../../workers/worker';
import { sternaDataConverter } from '../../codec/data-converter';
import type { RunSpecInput } from '../../workflows/spec';
import type { trainingRun } from '../../workflows/run/training-run';
import { loadTrace, traceCatalog } from '../../emulator/trace';
import { startTestEmulator, type TestEmulator } from './emulator';
import { spawnLogged, type Spawned } from './processes';
import { sternaTestWorker, TEST_SYSTEM_NAMESPACE, testEnv, testServerAddress, uniqueTaskQueue, workflowBundle } from './temporal';

export const PROJECT = 'sterna-test';
const repoRoot = join(__dirname, '..', '..', '..');

export interface Stack {
  env: TestWorkflowEnvironment;
  emulator: TestEmulator;
  provider: GceProvider;
  taskQueue: string;
  dir: string;
  bucketsDir: string;
  gce: GceConfig;
  /**
   * Starts a training run on this stack's task queue: in the test server's default
   * namespace, or with `teams`, in the next team's namespace in turn.
   */
  start(spec: RunSpecInput, workflowId?: string): Promise<WorkflowHandleWithFirstExecutionRunId<typeof trainingRun>>;
  /** The client of the namespace a run was started in (`start`). */
  clientOf(workflowId: string): Client;
  /** With `teams`: the system and team namespaces' clients, as the worker has them. */
  namespaces?: NamespaceClients;
  startWorker(): Promise<void>;
  stopWorker(): Promise<void>;
  /**
   * A worker in its own process, to be killed with SIGKILL like a crashed machine; `env`
   * adds to its environment. `how`: the node to run it with, through `npm run worker`'s
   * launcher (which starts the worker process tuned) rather than the worker itself, and
   * the name of its log file in the stack's directory.
   */
  spawnWorker(env?: NodeJS.ProcessEnv, how?: { node?: string; launcher?: boolean; logName?: string }): Spawned;
  stop(): Promise<void>;
}

let counter = 0;

/**
 * The example trains for about 10 s: read at the default cadence (a minute), its run would
 * hear of a checkpoint or its trainer's exit only after training ended. The stack's
 * observer reads progress every 2 s, so tests can act mid-training; the default cadence
 * is the observer tests' and the scale benchmark's.
 */
const STACK_OBSERVER = observerOptions({ settings: { progressReadSeconds: 2 } });

/**
 * `guestEnv`: added to every VM's environment (emulator/server.ts EmulatorOptions.guestEnv).
 * `gpusAllRegions`: the project's GPUS_ALL_REGIONS quota (a project granted GPUs by default).
 * `teams`: a namespace per team (docs/tenancy.md), from the test server's
 * TEST_TEAM_NAMESPACES: runs are started in each in turn, the fleet workflows live in
 * TEST_SYSTEM_NAMESPACE, and the worker (in-process or spawned) serves all of them.
 */
export async function startStack(options: { timeFactor?: number; trace?: string; traceStartTick?: number; taskQueue?: string; guestEnv?: Record<string, string>; gpusAllRegions?: number; teams?: readonly string[] } = {}): Promise<Stack> {
  const env = await testEnv();
  const dir = mkdtempSync(join(tmpdir(), 'sterna-stack-'));
  const bucketsDir = join(dir, 'buckets');
  publishExampleLocally(bucketsDir);
  const trace = options.trace ? loadTrace(options.trace) : undefined;
  // The emulator serves the buckets' metadata (their location) from the same directory.
  const emulator = await startTestEmulator({ stateDir: join(dir, 'emulator'), timeFactor: options.timeFactor ?? 10, trace, traceStartTick: options.traceStartTick, bucketsDir, guestEnv: options.guestEnv, ...(options.gpusAllRegions !== undefined ? { gpusAllRegions: options.gpusAllRegions } : {}) });
  const gce: GceConfig = { project: PROJECT, emulatorEndpoint: { host: '127.0.0.1', port: emulator.port, protocol: 'http' }, localBucketsDir: bucketsDir };
  // A replayed trace brings its own zones and prices; the provider prices offers from them.
  const provider = buildGceProvider(gce, catalogPriceBook(trace ? traceCatalog(trace) : undefined), 200);
  const taskQueue = options.taskQueue ?? uniqueTaskQueue('stack');
  let workers: Worker[] = [];
  const teams = options.teams ?? [];
  const dataConverter = sternaDataConverter();
  const namespaces = teams.length > 0 ? new NamespaceClients({ system: TEST_SYSTEM_NAMESPACE, teams, mode: 'namespaces' }, (namespace) => new Client({ connection: env.connection, namespace, dataConverter })) : undefined;
  /** The namespace each run was started in. */
  const startedIn = new Map<string, string>();
  let checks: Awaited<ReturnType<typeof buildCheckTargets>> | undefined;
  let running: Promise<unknown> | undefined;
  const spawned: Spawned[] = [];
  const address = await testServerAddress();
  // A spawned worker loads a prebuilt bundle, as `npm run worker` does: this run's own.
  const bundlePath = join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, (await workflowBundle(require.resolve('../../workflows'))).code);

  const stack: Stack = {
    env,
    emulator,
    provider,
    taskQueue,
    dir,
    bucketsDir,
    gce,
    namespaces,
    async start(spec, workflowId) {
      counter += 1;
      const id = workflowId ?? `${taskQueue}-run-${counter}`;
      if (namespaces) startedIn.set(id, teams[counter % teams.length]!);
      return stack.clientOf(id).workflow.start('trainingRun', { taskQueue, workflowId: id, args: [spec] });
    },
    clientOf(workflowId) {
      const namespace = startedIn.get(workflowId);
      return namespaces && namespace ? namespaces.of(namespace) : env.client;
    },
    async startWorker() {
      // The checks before each run read the emulator as a worker reads GCE (Temporal's own check is the test server's).
      checks ??= await buildCheckTargets({ gce, storage: { endpoint: emulator.endpoint } }, undefined);
      const extra = { checks: checks.targets, storage: BucketLocator.forEmulator(emulator.endpoint), datasets: buildDatasetChecker({ endpoint: emulator.endpoint }, bucketsDir), observer: STACK_OBSERVER, logs: { localBucketsDir: bucketsDir } };
      workers = namespaces
        ? (await createSternaWorkers({ connection: env.nativeConnection, namespaces, taskQueue, providers: { gce: provider }, workflowBundle: await workflowBundle(require.resolve('../../workflows')), dataConverter, ...extra })).map((w) => w.worker)
        : [await sternaTestWorker(taskQueue, { gce: provider }, extra)];
      running = Promise.all(workers.map((w) => w.run()));
    },
    async stopWorker() {
      if (workers.length === 0) return;
      for (const w of workers) w.shutdown();
      await running;
      workers = [];
    },
    spawnWorker(extraEnv = {}, how = {}) {
      const child = spawnLogged(how.node ?? process.execPath, [join(repoRoot, 'build', 'workers', how.launcher ? 'start.js' : 'main.js')], {
        logFile: join(dir, `${how.logName ?? 'worker'}.log`),
        env: {
          ...process.env,
          TEMPORAL_ADDRESS: address,
          TEMPORAL_NAMESPACE: namespaces ? TEST_SYSTEM_NAMESPACE : env.namespace,
          ...(namespaces ? { STERNA_TEAM_NAMESPACES: teams.join(',') } : {}),
          STERNA_TASK_QUEUE: taskQueue,
          STERNA_GCE_PROJECT: PROJECT,
          STERNA_GCE_ENDPOINT: `http://127.0.0.1:${emulator.port}`,
          STERNA_LOCAL_BUCKETS: bucketsDir,
          STERNA_WORKFLOW_BUNDLE: bundlePath,
          STERNA_OBSERVER_PROGRESS_SECONDS: String(STACK_OBSERVER.settings.progressReadSeconds),
          // Unversioned, as the stack's in-process worker is, unless a test deploys versions.
          STERNA_WORKER_VERSIONING: 'off',
          ...extraEnv,
        },
      });
      spawned.push(child);
      return child;
    },
    async stop() {
      await stack.stopWorker();
      await Promise.all(spawned.map((c) => c.kill('SIGKILL')));
      await checks?.close();
      await emulator.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return stack;
}

/** The example run spec, shortened for tests; every test run gets its own checkpoint prefix. */
export function exampleSpec(overrides: Partial<RunSpecInput> = {}): RunSpecInput {
  const spec = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
  return { ...spec, recovery: { ...spec.recovery, pollSeconds: 0.3 }, ...overrides };
}
