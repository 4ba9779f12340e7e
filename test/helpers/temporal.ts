/**
 * One real Temporal dev server for the whole test run, started on first use (tests that
 * need no Temporal, like the emulator's, never pay for it) and stopped by the global
 * teardown in test/global.ts.
 */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Client } from '@temporalio/client';
import type { Worker, WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { bundleWorkflows } from '../../workers/bundle';
import type { Providers } from '../../activities';
import { createSternaWorker, type SternaWorkerOptions } from '../../workers/worker';
import { freePort as anyFreePort } from '../../processes/ports';
import { sternaDataConverter } from '../../codec/data-converter';
import { SYSTEM_NAMESPACE } from '../../bench/common/stack';
import { startTemporalServer, type TemporalServer } from '../../processes/temporal-server-process';

let started: Promise<{ server: TemporalServer; env: TestWorkflowEnvironment }> | undefined;
let exitHook: (() => void) | undefined;
const bundles = new Map<string, Promise<WorkflowBundleWithSourceMap>>();

/** The test server's namespaces for a stack with a namespace per team: where its fleet lives, and its teams. */
export const TEST_SYSTEM_NAMESPACE = SYSTEM_NAMESPACE;
export const TEST_TEAM_NAMESPACES = ['team-a', 'team-b'] as const;

export async function freePort(): Promise<number> {
  return (await anyFreePort(0))!;
}

/**
 * The SDK's `createLocal` waits only ~5 s for the server, too short on a cold 2-core
 * machine, so we start the server ourselves and attach with `createFromExistingServer`.
 */
export async function testEnv(): Promise<TestWorkflowEnvironment> {
  started ??= (async () => {
    // The server fires a timer up to a second late unless told to shift its timers less;
    // runs here wait on many sub-second timers (polls, cooldowns, backoffs).
    // And a version that stopped being current is checked for pinned runs every 2 s, not 3 min,
    // so the deploy test sees it drain.
    const server = await startTemporalServer({
      headless: true,
      // A stack may spread its runs over team namespaces, the fleet in the system one (docs/tenancy.md).
      namespaces: [TEST_SYSTEM_NAMESPACE, ...TEST_TEAM_NAMESPACES],
      dynamicConfig: { 'history.timerProcessorMaxTimeShift': '10ms', 'matching.wv.VersionDrainageStatusRefreshInterval': '2s', 'matching.wv.VersionDrainageStatusVisibilityGracePeriod': '2s' },
    });
    // A parallel mocha worker has no teardown hook of its own: it stops its server as it exits.
    exitHook = () => stopAtExit(server.pid);
    process.once('exit', exitHook);
    // Its client encrypts payloads as the CLI and the client library do.
    const env = await TestWorkflowEnvironment.createFromExistingServer({ address: server.address, namespace: server.namespace, client: { dataConverter: sternaDataConverter() } });
    return { server, env };
  })();
  return (await started).env;
}

export async function testServerAddress(): Promise<string> {
  await testEnv();
  return (await started!).server.address;
}

/** Bundling takes seconds; every worker of the run shares one bundle per workflows file. */
export function workflowBundle(workflowsPath: string): Promise<WorkflowBundleWithSourceMap> {
  let bundle = bundles.get(workflowsPath);
  if (!bundle) {
    bundle = bundleWorkflows(workflowsPath);
    bundles.set(workflowsPath, bundle);
  }
  return bundle;
}

/** A Sterna worker (the real workflow and activities) on the test server. */
/** `extra`: further worker options (a storage API client...). */
export async function sternaTestWorker(taskQueue: string, providers: Providers, extra: Partial<SternaWorkerOptions> = {}): Promise<Worker> {
  const env = await testEnv();
  return createSternaWorker({
    connection: env.nativeConnection,
    namespace: env.namespace,
    taskQueue,
    providers,
    workflowBundle: await workflowBundle(require.resolve('../../workflows')),
    ...extra,
  });
}

let taskQueueCounter = 0;
export function uniqueTaskQueue(prefix = 'test'): string {
  taskQueueCounter += 1;
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${taskQueueCounter}`;
}

function stopAtExit(pid: number): void {
  try {
    process.kill(-pid, 'SIGTERM');
  } catch {
    // Already gone.
  }
}

export async function stopTestEnv(): Promise<void> {
  if (!started) return;
  const { server, env } = await started;
  started = undefined;
  if (exitHook) process.off('exit', exitHook);
  exitHook = undefined;
  await env.teardown();
  await server.stop();
}

/** A client of `env` that counts the workflow queries it sends (`queries()`), for tests of what is read how. */
export function queryCountingClient(env: TestWorkflowEnvironment): { client: Client; queries: () => number } {
  let queries = 0;
  const client = new Client({ connection: env.client.connection, namespace: env.namespace, dataConverter: sternaDataConverter(), interceptors: { workflow: [{ query: (input, next) => ((queries += 1), next(input)) }] } });
  return { client, queries: () => queries };
}
