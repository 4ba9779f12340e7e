import { strict as assert } from 'node:assert';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { runLogs } from '../../client/logs';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunSpecInput } from '../../workflows/spec';
import type { trainingRun } from '../../workflows/run/training-run';
import { collect, lines, PRINTER, texts, truth } from '../helpers/logs';
import { eventually } from '../helpers/processes';
import { NODES, startKubeStack, type KubeStack } from '../helpers/kube';
import { testEnv } from '../helpers/temporal';

const repoRoot = join(__dirname, '..', '..', '..');

describe('a run\'s log outlives its pods (GKE: a real Kubernetes control plane)', function () {
  this.timeout(600_000);
  let stack: KubeStack;
  let truthDir: string;

  before(async function () {
    this.timeout(1_800_000); // the first run on a machine builds Kubernetes from source
    stack = await startKubeStack();
    const code = join(stack.bucketsDir, 'sterna-examples', 'logs-test');
    mkdirSync(code, { recursive: true });
    writeFileSync(join(code, 'printer.js'), PRINTER);
    truthDir = join(dirname(stack.bucketsDir), 'truth');
    mkdirSync(truthDir);
  });
  after(async () => stack?.stop());

  it('ships what the pod\'s trainer printed, across a spot node\'s shutdown, in order', async () => {
    const example = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
    const spec: RunSpecInput = {
      ...example,
      backend: 'gke',
      command: ['node', 'printer.js', '300'],
      datasets: [{ uri: 'gs://sterna-examples/logs-test/printer.js', path: 'printer.js' }],
      env: { TRUTH_DIR: truthDir },
      resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
      recovery: { ...example.recovery, pollSeconds: 0.3 },
    };
    const env = await testEnv();
    const run = await env.client.workflow.start<typeof trainingRun>('trainingRun', { taskQueue: stack.taskQueue, workflowId: `${stack.taskQueue}-logs`, args: [spec] });
    await eventually('attempt 1 printing', async () => {
      const s = await run.query(statusQuery);
      return s.attempt === 1 && s.phase === 'training' && truth(truthDir, 1, 'out').length > 60 ? s : undefined;
    }, 120_000);
    const [pod] = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: `sterna-run=${runKey(run.workflowId)}` })).items;
    const node = pod.spec!.nodeName!;
    await stack.agent.shutdownNode(node);
    const result = await run.result();
    assert.deepEqual(result.attempts.map((a) => a.outcome), ['preempted', 'completed']);
    const all = await collect(runLogs(env.client, run.workflowId, { storage: { localBucketsDir: stack.bucketsDir } }));
    for (const attempt of [1, 2]) {
      assert.deepEqual(texts(all, attempt, 'out'), truth(truthDir, attempt, 'out'), `attempt ${attempt} stdout`);
      assert.deepEqual(texts(all, attempt, 'err'), truth(truthDir, attempt, 'err'), `attempt ${attempt} stderr`);
    }
    assert.deepEqual(all.filter((e) => e.kind === 'attempt').map((e) => e.attempt), [1, 2]);
    assert.ok(lines(all).some((l) => l.attempt === 1 && l.stream === 'agent' && /SIGTERM/.test(l.text)), 'the agent says it was stopped by SIGTERM');
    // The pod's agent published its trainer's last line as an annotation (sterna/last-line): the
    // last attempt's last line on stdout ("done") or stderr, whichever its annotator wrote last.
    const last = (await run.query(statusQuery)).lastLine;
    assert.ok([truth(truthDir, 2, 'out').at(-1), truth(truthDir, 2, 'err').at(-1)].includes(last), `last line ${JSON.stringify(last)}`);
    await stack.agent.addNode(NODES.find((n) => n.name === node)!);
  });
});
