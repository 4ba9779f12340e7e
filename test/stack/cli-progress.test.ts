/**
 * Live progress in the CLI, the client and the web UI: `sterna start --follow --json` and
 * `sterna watch --json` as a user runs them (a separate process, against the real dev
 * server and the emulator stack with the real agent and example trainer), the client's
 * status, the workflow's current details (what the web UI shows), and the progress bar
 * drawn on a terminal.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { getStatus } from '../../client';
import { ProgressDisplay, progressView, type ProgressView } from '../../cli/progress';
import type { RunResult, RunStatus } from '../../workflows/run/views';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';
import { testServerAddress } from '../helpers/temporal';

const cli = join(__dirname, '..', '..', 'cli', 'main.js');

async function sterna(stack: Stack, args: string[]): Promise<{ code: number | null; lines: unknown[]; stderr: string }> {
  const env = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: stack.env.namespace };
  return new Promise((resolve) =>
    execFile(process.execPath, [cli, ...args], { env, timeout: 180_000, maxBuffer: 8 << 20 }, (err, stdout, stderr) =>
      resolve({
        code: err ? (typeof err.code === 'number' ? err.code : null) : 0,
        lines: stdout
          .split('\n')
          .filter((l) => l.trim())
          .map((l) => JSON.parse(l) as unknown),
        stderr,
      }),
    ),
  );
}

const KEYS = ['phase', 'zone', 'model', 'step', 'totalSteps', 'percent', 'etaSeconds', 'costUsd', 'predictedCostUsd', 'gpuUtilisation', 'preemptions'];

/** A status as the query answers it, for the display's own tests. */
function status(overrides: Partial<RunStatus>): RunStatus {
  return { runId: 'r', phase: 'training', attempt: 1, zone: 'us-central1-a', provisioningModel: 'SPOT', costUsd: 0.0123, onDemandCostUsd: 0.05, preemptions: 0, restarts: 0, ledger: [], timeline: [], ...overrides };
}

describe('progress in the CLI', () => {
  it('a view per status: exactly the --json keys; percent, ETA and prediction only when the total is known', () => {
    const known = progressView(status({ step: 120, progress: { step: 120, totalSteps: 400, percent: 30, stepsPerSecond: 40, etaSeconds: 7, predictedCostUsd: 0.0131 }, gpu: { utilisation: 88, memoryUsedMiB: 1, memoryTotalMiB: 2, gpus: 1, meanUtilisation: 80, at: '2026-12-01T00:00:00Z', idle: false } }));
    assert.deepEqual(Object.keys(known), KEYS);
    assert.deepEqual(known, { phase: 'training', zone: 'us-central1-a', model: 'SPOT', step: 120, totalSteps: 400, percent: 30, etaSeconds: 7, costUsd: 0.0123, predictedCostUsd: 0.0131, gpuUtilisation: 88, preemptions: 0 });
    const unknown = progressView(status({ step: 120, progress: { step: 120 } }));
    assert.deepEqual({ percent: unknown.percent, etaSeconds: unknown.etaSeconds, predictedCostUsd: unknown.predictedCostUsd, totalSteps: unknown.totalSteps }, { percent: null, etaSeconds: null, predictedCostUsd: null, totalSteps: null });
  });

  it('on a terminal: a bar with percent, step of total and ETA, redrawn in place; without a total: no bar', () => {
    const out = Object.assign(new PassThrough(), { isTTY: true, columns: 160, cursorTo: () => true, clearLine: () => true, moveCursor: () => true });
    let drawn = '';
    out.on('data', (chunk: Buffer) => (drawn += chunk.toString()));
    const display = ProgressDisplay.for(out as unknown as NodeJS.WriteStream, false);
    display.update(status({ step: 100, progress: { step: 100, totalSteps: 400, percent: 25, etaSeconds: 90, predictedCostUsd: 0.02 } }));
    display.update(status({ step: 200, progress: { step: 200, totalSteps: 400, percent: 50, etaSeconds: 60, predictedCostUsd: 0.02 } }));
    display.stop();
    assert.match(drawn, /█{12}░{12}\s+50\.0% \| 200\/400 \| ETA 1m 00s \| cost \$0\.01 -> \$0\.02/);
    drawn = '';
    const noTotal = ProgressDisplay.for(out as unknown as NodeJS.WriteStream, false);
    noTotal.update(status({ step: 7, progress: { step: 7 } }));
    noTotal.stop();
    assert.match(drawn, /step 7 \| cost/);
    assert.doesNotMatch(drawn, /█|░|ETA/);
  });

  it('not on a terminal: one plain line per change, none for a repeated status', () => {
    const out = Object.assign(new PassThrough(), { isTTY: false });
    const lines: string[] = [];
    out.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)));
    const display = ProgressDisplay.for(out as unknown as NodeJS.WriteStream, false);
    const s = status({ step: 3, progress: { step: 3, totalSteps: 10, percent: 30 } });
    display.update(s);
    display.update(s);
    display.update(status({ step: 4, progress: { step: 4, totalSteps: 10, percent: 40 } }));
    assert.equal(lines.length, 2);
  });
});

describe('following a run on the emulator stack', function () {
  this.timeout(300_000);
  let stack: Stack;
  let specFile: string;
  before(async () => {
    stack = await startStack();
    await stack.startWorker();
    specFile = join(stack.dir, 'run.json');
    writeFileSync(specFile, JSON.stringify(exampleSpec()));
  });
  after(async () => stack?.stop());

  it('`sterna start --follow --json`: started, progress towards the total the trainer reported, then the result', async () => {
    const id = `follow-${Date.now().toString(36)}`;
    const { code, lines, stderr } = await sterna(stack, ['start', specFile, '--id', id, '--task-queue', stack.taskQueue, '--follow', '--json']);
    assert.equal(code, 0, stderr);
    assert.deepEqual(lines[0], { started: id });
    const views = lines.slice(1, -1) as ProgressView[];
    for (const v of views) assert.deepEqual(Object.keys(v), KEYS);
    const training = views.filter((v) => v.phase === 'training' && v.totalSteps !== null);
    assert.ok(training.length > 0, `no training progress among ${JSON.stringify(views.map((v) => v.phase))}`);
    assert.ok(training.every((v) => v.totalSteps === 400 && v.percent === Number(((v.step! / 400) * 100).toFixed(1))));
    // Cost only grows, and a step only moves forward.
    for (let i = 1; i < views.length; i++) assert.ok(views[i].costUsd >= views[i - 1].costUsd);
    assert.ok(training.some((v) => v.etaSeconds !== null && v.predictedCostUsd! >= v.costUsd), 'an ETA and a predicted cost while it trained');
    const last = views[views.length - 1];
    assert.deepEqual({ phase: last.phase, step: last.step, percent: last.percent }, { phase: 'completed', step: 400, percent: 100 });
    const { result } = lines[lines.length - 1] as { result: RunResult };
    assert.equal(result.status, 'completed');
    assert.equal(result.finalStep, 400);

    // `sterna watch` on the finished run: its final state and the result at once.
    const watched = await sterna(stack, ['watch', id, '--json']);
    assert.equal(watched.code, 0, watched.stderr);
    assert.deepEqual({ phase: (watched.lines[0] as ProgressView).phase, percent: (watched.lines[0] as ProgressView).percent }, { phase: 'completed', percent: 100 });
    assert.deepEqual((watched.lines[watched.lines.length - 1] as { result: RunResult }).result, result);
  });

  it('the client and the web UI read the same progress: status.progress and the workflow current details', async () => {
    const run = await stack.start(exampleSpec({ monitoring: { totalSteps: 800 } }));
    await run.result();
    const s = await getStatus(stack.env.client, run.workflowId);
    // The spec's total wins over the trainer's report (400).
    assert.deepEqual({ step: s.progress?.step, totalSteps: s.progress?.totalSteps, percent: s.progress?.percent }, { step: 400, totalSteps: 800, percent: 50 });
    assert.equal(s.gpu?.utilisation, 90);
    // What the web UI shows under "Current details", however the run was started.
    const metadata = (await run.query('__temporal_workflow_metadata')) as { currentDetails?: string };
    assert.match(metadata.currentDetails ?? '', /\*\*Phase\*\* completed/);
    assert.match(metadata.currentDetails ?? '', /\*\*Step\*\* 400 of 800 \(50\.0%\)/);
    assert.match(metadata.currentDetails ?? '', /\*\*Cost so far\*\* \d+\.\d{4} USD of a 5 USD budget/);
    assert.doesNotMatch(metadata.currentDetails ?? '', /\$/, 'no dollar signs: the UI renders a pair as math');
    // The last line the trainer printed (examples/trainer.ts ends with "done: ..."), from its agent's sterna/last-line.
    assert.match(s.lastLine ?? '', /^done: step 400, loss \d+\.\d{6}$/);
    assert.match(metadata.currentDetails ?? '', /\*\*Last line\*\* `done: step 400, loss \d+\.\d{6}`$/);
    // The details (and so the line) leave the worker encrypted, as every payload does: the
    // raw answer to the query the web UI sends is binary/encrypted, readable only through the codec.
    const raw = await stack.env.client.workflowService.queryWorkflow({
      namespace: stack.env.namespace,
      execution: { workflowId: run.workflowId },
      query: { queryType: '__temporal_workflow_metadata' },
    });
    const [payload] = raw.queryResult?.payloads ?? [];
    assert.equal(Buffer.from(payload?.metadata?.encoding ?? []).toString(), 'binary/encrypted');
    assert.ok(!Buffer.from(payload?.data ?? []).toString('latin1').includes('done: step'), 'no plain text of the line on the wire');
  });
});
