/**
 * A deploy, as docs/versions.md tells it, through the production worker (workers/main.ts)
 * on the full stack: training runs start on version A; version B, whose cost rules differ,
 * starts and makes itself current; the runs move to B at their next continue-as-new and
 * finish there; every execution ran wholly on one version; A drains, and its worker stops
 * with nothing left pinned to it.
 */
import { strict as assert } from 'node:assert';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { temporal } from '@temporalio/proto';
import webpack from 'webpack';
import { describeDeployment } from '../client/deployments';
import { bundleWorkflows, workflowsPath } from '../workers/bundle';
import { statusQuery } from '../workflows/messages';
import { COST_MEMO } from '../workflows/run/cost-refresh';
import { executionHistories } from './helpers/histories';
import { eventually } from './helpers/processes';
import { exampleSpec, startStack, type Stack } from './helpers/stack';

const EventType = temporal.api.enums.v1.EventType;

/** Version B: the production workflows, with test/workflows/version-b/cost-refresh.ts in place of the cost rules. */
async function bundleB(): Promise<string> {
  const replacement = require.resolve('./workflows/version-b/cost-refresh');
  const { code } = await bundleWorkflows(workflowsPath(), (config) => ({ ...config, plugins: [...(config.plugins ?? []), new webpack.NormalModuleReplacementPlugin(/[\\/]cost-refresh$/, replacement)] }));
  return code;
}

/** The build ids that completed each execution's workflow tasks, oldest execution first. */
async function buildsPerExecution(stack: Stack, workflowId: string): Promise<string[][]> {
  const executions = await executionHistories(stack.env.client, workflowId);
  return executions.map((events) => [...new Set(events.filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED).map((e) => e.workflowTaskCompletedEventAttributes?.deploymentVersion?.buildId ?? '(unversioned)'))]);
}

describe('worker versioning: a deploy of changed rules (production worker, full stack)', function () {
  this.timeout(600_000);
  let stack: Stack;

  before(async () => {
    stack = await startStack();
  });

  after(async () => {
    await stack?.stop();
  });

  it('moves running runs from A to B at their continue-as-new, each execution on one version, and lets A stop once drained', async () => {
    const client = stack.env.client;
    const deployment = `sterna-${stack.taskQueue}`;
    const versioned = (buildId: string, bundle?: string) => ({ STERNA_WORKER_VERSIONING: 'on', STERNA_DEPLOYMENT: deployment, STERNA_BUILD_ID: buildId, ...(bundle ? { STERNA_WORKFLOW_BUNDLE: bundle } : {}) });
    const current = (buildId: string) => eventually(`${buildId} current`, async () => ((await describeDeployment(client, deployment)).current === buildId ? true : undefined), 120_000);

    const workerA = stack.spawnWorker(versioned('A'));
    await current('A');
    // About 50 s of training each: long enough to be running when B is deployed.
    const long = exampleSpec({ command: ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', '2000', '--step-ms', '25'] });
    const early = await Promise.all([stack.start(long), stack.start(long)]);
    for (const run of early) await eventually(`${run.workflowId} training`, async () => (await run.query(statusQuery)).phase === 'training' || undefined, 120_000);

    const pathB = join(stack.dir, 'workflow-bundle-b.js');
    writeFileSync(pathB, await bundleB());
    stack.spawnWorker(versioned('B', pathB));
    await current('B');
    const late = await stack.start(exampleSpec());

    const results = await Promise.all([...early, late].map((run) => run.result()));
    assert.deepEqual(results.map((r) => r.status), ['completed', 'completed', 'completed']);

    // Each execution ran on one version: the early runs began on A and ended on B, the late one ran on B only.
    for (const run of early) {
      const builds = await buildsPerExecution(stack, run.workflowId);
      assert.ok(builds.every((b) => b.length === 1), `${run.workflowId}: an execution ran on more than one version: ${JSON.stringify(builds)}`);
      assert.deepEqual([builds[0][0], builds.at(-1)![0]], ['A', 'B'], JSON.stringify(builds));
    }
    const lateBuilds = await buildsPerExecution(stack, late.workflowId);
    assert.deepEqual(lateBuilds, lateBuilds.map(() => ['B']));
    // B's rules wrote every run's end.
    for (const run of [...early, late]) {
      const { memo } = await run.describe();
      assert.equal((memo?.[COST_MEMO] as { rules?: string } | undefined)?.rules, 'B', run.workflowId);
    }

    // Nothing is pinned to A any more (the fleet workflows moved too): A drains, and its worker may stop.
    const pinnedToA = async (): Promise<string[]> => {
      const pinned: string[] = [];
      for await (const w of client.workflow.list({ query: `TaskQueue = "${stack.taskQueue}" AND ExecutionStatus = "Running"` })) {
        const { raw } = await client.workflow.getHandle(w.workflowId, w.runId).describe();
        if (raw.workflowExecutionInfo?.versioningInfo?.deploymentVersion?.buildId === 'A') pinned.push(`${w.type} ${w.workflowId}`);
      }
      return pinned;
    };
    await eventually('A drained', async () => ((await describeDeployment(client, deployment)).versions.find((v) => v.buildId === 'A')?.state === 'drained' ? true : undefined), 180_000).catch(async (err: Error) => {
      throw new Error(`${err.message}; still pinned to A: ${JSON.stringify(await pinnedToA())}`);
    });
    assert.deepEqual(await pinnedToA(), []);
    await workerA.kill('SIGTERM');
    assert.equal(await workerA.exited, 0, 'A stopped gracefully');
  });
});
