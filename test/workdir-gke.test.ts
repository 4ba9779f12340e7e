/**
 * A workdir on GKE (a real Kubernetes control plane, test/helpers/kube.ts): the pod gets the
 * packed workdir as its STERNA_ATTR_sterna_workdir input, and its agent unpacks it and runs
 * the command there, as on GCE (test/workdir.test.ts).
 */
import { strict as assert } from 'node:assert';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTrainingRun, type PreparedWorkdir } from '../client';
import { statusQuery } from '../workflows/messages';
import { runKey } from '../workflows/naming';
import type { RunSpecInput } from '../workflows/spec';
import type { RunResult } from '../workflows/run/views';
import { eventually } from './helpers/processes';
import { startKubeStack, type KubeStack } from './helpers/kube';
import { testEnv } from './helpers/temporal';

const repoRoot = join(__dirname, '..', '..');

describe('a run started with a workdir (GKE: a real Kubernetes control plane)', function () {
  this.timeout(600_000);
  let stack: KubeStack;

  before(async function () {
    this.timeout(1_800_000); // the first run on a machine builds Kubernetes from source
    stack = await startKubeStack();
  });
  after(async () => stack?.stop());

  it('gives the pod the workdir as an input, and its agent unpacks it and runs the command there', async () => {
    const project = join(stack.bucketsDir, '..', 'gke-project');
    mkdirSync(join(project, 'data'), { recursive: true });
    writeFileSync(join(project, 'data', 'rows.txt'), 'from the workdir\n');
    // Records where it ran and what it read, in its checkpoint; waits to be looked at.
    writeFileSync(
      join(project, 'train.sh'),
      '#!/bin/bash\nset -e\nsleep 8\nprintf \'{"cwd": "%s", "rows": "%s"}\' "$PWD" "$(cat data/rows.txt)" > "$STERNA_CHECKPOINT_DIR/step-1.json.tmp"\nmv "$STERNA_CHECKPOINT_DIR/step-1.json.tmp" "$STERNA_CHECKPOINT_DIR/step-1.json"\n',
    );
    const example = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
    const spec: RunSpecInput = {
      ...example,
      backend: 'gke',
      command: ['bash', 'train.sh'],
      datasets: [],
      resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
      recovery: { ...example.recovery, pollSeconds: 0.3 },
    };
    const env = await testEnv();
    let prepared: PreparedWorkdir | undefined;
    const run = await startTrainingRun(env.client, spec, {
      taskQueue: stack.taskQueue,
      workflowId: `${stack.taskQueue}-workdir`,
      workdir: project,
      workdirStorage: { localBucketsDir: stack.bucketsDir },
      onWorkdir: (w) => (prepared = w),
    });
    assert.ok(prepared);
    const pod = await eventually('the pod', async () => {
      const s = await run.query(statusQuery);
      if (s.phase !== 'training') return undefined;
      return (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: `sterna-run=${runKey(run.workflowId)}` })).items[0];
    }, 120_000);
    const input = pod.spec!.containers[0].env!.find((e) => e.name === 'STERNA_ATTR_sterna_workdir')?.value;
    // The gs:// object, as the worker maps it for its pods (the test bed's local buckets).
    const object = `file://${stack.bucketsDir}/${prepared.uri.slice('gs://'.length)}`;
    assert.equal(input, `${prepared.sha256} ${object}`);
    await eventually('the agent says it unpacked it', async () => {
      const live = await stack.core.readNamespacedPod({ name: pod.metadata!.name!, namespace: 'default' }).catch(() => undefined);
      return live?.metadata?.annotations?.['sterna/workdir'] === prepared!.sha256 ? true : undefined;
    }, 60_000, 200);
    const result = (await run.result()) as RunResult;
    assert.deepEqual(result.attempts.map((a) => a.outcome), ['completed']);
    const uri = result.lastCheckpoint!.uri;
    const recorded = JSON.parse(readFileSync(uri.startsWith('file://') ? uri.slice('file://'.length) : join(stack.bucketsDir, uri.slice('gs://'.length)), 'utf8')) as { cwd: string; rows: string };
    assert.equal(recorded.rows, 'from the workdir');
    assert.ok(recorded.cwd.startsWith('/'), 'the command read data/rows.txt relative to where it ran: the unpacked workdir');
  });
});
