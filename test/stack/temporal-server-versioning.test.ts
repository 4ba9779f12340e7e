/**
 * Sterna's own Temporal server (temporal-server/) supports Worker Versioning with
 * upgrade on continue-as-new, which the SDK in use (1.24) drives: workflows pinned to the
 * deployment version they started on; a new version made current; a pinned execution
 * told its target changed (`targetWorkerDeploymentVersionChanged`) continues as new with
 * `initialVersioningBehavior: 'AUTO_UPGRADE'` onto it; every execution runs wholly on one
 * version, and the old version drains so its workers can stop.
 */
import { strict as assert } from 'node:assert';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import { startTemporalServer, type TemporalServer } from '../../processes/temporal-server-process';
import { uniqueTaskQueue, workflowBundle } from '../helpers/temporal';
import { proceed, type LinkResult } from '../workflows/versioned';

const EventType = temporal.api.enums.v1.EventType;
const DrainageStatus = temporal.api.enums.v1.VersionDrainageStatus;
const RoutingState = temporal.api.enums.v1.RoutingConfigUpdateState;

/** Polls `probe` until it returns a value, for at most `ms`; the last error explains a timeout. */
async function eventually<T>(what: string, probe: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(`${what}: not within ${ms} ms${last ? ` (last error: ${String(last)})` : ''}`);
}

/** The build ids that completed the workflow tasks of one execution (one run). */
async function buildsOf(client: Client, workflowId: string, runId: string): Promise<{ builds: Set<string>; targetChanged: boolean; inheritedPin?: string }> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const builds = new Set<string>();
  let targetChanged = false;
  let inheritedPin: string | undefined;
  for (const event of history.events ?? []) {
    if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) builds.add(event.workflowTaskCompletedEventAttributes?.deploymentVersion?.buildId ?? '(unversioned)');
    if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED && event.workflowTaskStartedEventAttributes?.targetWorkerDeploymentVersionChanged) targetChanged = true;
    if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED) inheritedPin = event.workflowExecutionStartedEventAttributes?.inheritedPinnedVersion?.buildId ?? undefined;
  }
  return { builds, targetChanged, inheritedPin };
}

async function pinnedTo(handle: WorkflowHandle, buildId: string): Promise<string | undefined> {
  const { raw } = await handle.describe();
  const info = raw.workflowExecutionInfo?.versioningInfo;
  const pinned = info?.behavior === temporal.api.enums.v1.VersioningBehavior.VERSIONING_BEHAVIOR_PINNED && info.deploymentVersion?.buildId === buildId;
  return pinned ? raw.workflowExecutionInfo!.execution!.runId! : undefined;
}

describe('Sterna Temporal server: worker versioning', function () {
  // A cold build of the server (first run on a machine) takes minutes; later runs find it cached.
  this.timeout(30 * 60_000);
  let server: TemporalServer;
  let connection: Connection;
  let native: NativeConnection;
  let client: Client;
  const workers: Worker[] = [];
  const running: Promise<void>[] = [];
  const workerErrors: unknown[] = [];

  before(async () => {
    server = await startTemporalServer({
      headless: true,
      // A version that stopped being current is checked for open pinned workflows every
      // 2 s instead of 3 min, so the test sees it drain.
      dynamicConfig: { 'matching.wv.VersionDrainageStatusRefreshInterval': '2s', 'matching.wv.VersionDrainageStatusVisibilityGracePeriod': '2s' },
    });
    connection = await Connection.connect({ address: server.address });
    native = await NativeConnection.connect({ address: server.address });
    client = new Client({ connection, namespace: 'default' });
  });

  after(async () => {
    for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
    await Promise.allSettled(running);
    await native?.close();
    await connection?.close();
    await server?.stop();
  });

  async function startWorker(taskQueue: string, deploymentName: string, buildId: string): Promise<Worker> {
    const worker = await Worker.create({
      connection: native,
      namespace: 'default',
      taskQueue,
      workflowBundle: await workflowBundle(require.resolve('../workflows/versioned')),
      workerDeploymentOptions: { version: { deploymentName, buildId }, useWorkerVersioning: true, defaultVersioningBehavior: 'PINNED' },
    });
    workers.push(worker);
    running.push(worker.run().catch((err: unknown) => void workerErrors.push(err)));
    return worker;
  }

  /**
   * The version exists once its worker has polled; until then the server refuses it. The
   * new routing then reaches the task queues in the background: only once the deployment
   * says so does a pinned workflow's next task learn that its target changed.
   */
  async function makeCurrent(deploymentName: string, buildId: string): Promise<void> {
    await eventually(`${deploymentName}.${buildId} made current`, async () => {
      await client.workflowService.setWorkerDeploymentCurrentVersion({ namespace: 'default', deploymentName, buildId, identity: 'versioning-test' });
      return true;
    });
    await eventually(`${deploymentName}.${buildId} routed to`, async () => {
      const { workerDeploymentInfo: info } = await client.workflowService.describeWorkerDeployment({ namespace: 'default', deploymentName });
      const done = info?.routingConfig?.currentDeploymentVersion?.buildId === buildId && info.routingConfigUpdateState === RoutingState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED;
      return done ? true : undefined;
    });
  }

  it('pins workflows to their version and moves a chain to the new current version at continue-as-new', async () => {
    const taskQueue = uniqueTaskQueue('versioned');
    const deploymentName = `sterna-${taskQueue}`;
    const workerA = await startWorker(taskQueue, deploymentName, 'A');
    await makeCurrent(deploymentName, 'A');

    const chain = await client.workflow.start('chain', { taskQueue, workflowId: `${taskQueue}-chain`, args: [0] });
    const pinned = await client.workflow.start('pinned', { taskQueue, workflowId: `${taskQueue}-pinned` });
    const firstRun = await eventually('chain pinned to A', () => pinnedTo(chain, 'A'));
    await eventually('pinned workflow pinned to A', () => pinnedTo(pinned, 'A'));

    // Deploy B and make it current while both executions are open on A.
    await startWorker(taskQueue, deploymentName, 'B');
    await makeCurrent(deploymentName, 'B');

    await chain.signal(proceed);
    await pinned.signal(proceed);
    const firstClosed = await eventually('first run of the chain closed', async () => {
      const { status } = await client.workflow.getHandle(chain.workflowId, firstRun).describe();
      return status.name === 'RUNNING' ? undefined : status.name;
    });
    assert.equal(firstClosed, 'CONTINUED_AS_NEW', 'the run on A ended instead of continuing as new: its task was not told the target changed');
    const secondRun = await eventually('chain continued as new onto B', async () => {
      const runId = await pinnedTo(chain, 'B');
      return runId && runId !== firstRun ? runId : undefined;
    });
    await chain.signal(proceed);

    assert.deepEqual(await chain.result(), { generation: 1, buildId: 'B' } satisfies LinkResult);
    assert.deepEqual(await pinned.result(), { generation: 0, buildId: 'A' } satisfies LinkResult);

    // Each execution ran wholly on one version.
    const first = await buildsOf(client, chain.workflowId, firstRun);
    assert.deepEqual([...first.builds], ['A']);
    assert.equal(first.targetChanged, true, 'the server told the pinned run on A that its target changed');
    const second = await buildsOf(client, chain.workflowId, secondRun);
    assert.deepEqual([...second.builds], ['B']);
    assert.equal(second.targetChanged, false);
    // A pinned run's continue-as-new inherits its pin unless it asks for AUTO_UPGRADE (the
    // server does not copy that request into the ContinuedAsNew event, so the new run's
    // start shows it: no inherited pin).
    assert.equal(second.inheritedPin, undefined);
    assert.deepEqual([...(await buildsOf(client, pinned.workflowId, pinned.firstExecutionRunId)).builds], ['A']);

    // A has no open pinned workflow left: the server says it drained, and its worker can stop.
    await eventually('version A drained', async () => {
      const { workerDeploymentVersionInfo } = await client.workflowService.describeWorkerDeploymentVersion({
        namespace: 'default',
        deploymentVersion: { deploymentName, buildId: 'A' },
      });
      return workerDeploymentVersionInfo?.drainageInfo?.status === DrainageStatus.VERSION_DRAINAGE_STATUS_DRAINED ? true : undefined;
    });
    workerA.shutdown();
    await running[0];
    assert.deepEqual(workerErrors, []);
    const { workerDeploymentInfo } = await client.workflowService.describeWorkerDeployment({ namespace: 'default', deploymentName });
    assert.equal(workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId, 'B');
  });
});
