import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { SternaClientError } from '../../client';
import { runLogs, type LogEvent } from '../../client/logs';
import { ClientErrorKind } from '../../client/errors';
import { runStoragePrefix } from '../../logs/layout';
import { attemptLogTail } from '../../activities/logs';
import { runKey } from '../../workflows/naming';
import { statusQuery } from '../../workflows/messages';
import { provisionRequest, freshRun } from '../../workflows/run/requests';
import type { trainingRun } from '../../workflows/run/training-run';
import { eventually } from '../helpers/processes';
import { collect, lines, PRINTER, texts, truth } from '../helpers/logs';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';
import { testEnv, testServerAddress } from '../helpers/temporal';

const cli = join(__dirname, '..', '..', 'cli', 'main.js');

type Run = WorkflowHandle<typeof trainingRun>;

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

async function sterna(args: string[], env: NodeJS.ProcessEnv): Promise<Outcome> {
  const { namespace } = await testEnv();
  const base = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: namespace };
  return new Promise((resolve) =>
    execFile(process.execPath, [cli, ...args], { env: { ...base, ...env }, timeout: 90_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr }),
    ),
  );
}

describe('a run\'s log outlives its VMs (GCE emulator)', function () {
  this.timeout(300_000);
  let stack: Stack;
  let truthDir: string;
  let run: Run;
  let followed: Promise<LogEvent[]>;
  let all: LogEvent[];

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
    const code = join(stack.bucketsDir, 'sterna-examples', 'logs-test');
    mkdirSync(code, { recursive: true });
    writeFileSync(join(code, 'printer.js'), PRINTER);
    truthDir = join(stack.dir, 'truth');
    mkdirSync(truthDir);
  });
  after(async () => stack?.stop());

  it('ships every line of a preempted attempt, and the next one\'s, in order, with the preemption between them', async () => {
    run = await stack.start(
      exampleSpec({
        command: ['node', 'printer.js', '300'],
        datasets: [{ uri: 'gs://sterna-examples/logs-test/printer.js', path: 'printer.js' }],
        env: { TRUTH_DIR: truthDir },
        time: { expectedDuration: '20s' },
      }),
    );
    // Followed from before the run has any log until it closes, as `sterna logs --follow` does.
    followed = collect(runLogs(stack.env.client, run.workflowId, { follow: true, pollMs: 300, storage: { localBucketsDir: stack.bucketsDir } }));
    await eventually('attempt 1 printing', async () => {
      const s = await run.query(statusQuery);
      return s.attempt === 1 && s.phase === 'training' && truth(truthDir, 1, 'out').length > 60 ? s : undefined;
    }, 90_000);
    const [vm] = (await stack.provider.listRunResources(runKey(run.workflowId))).map((r) => r.name);
    await stack.emulator.preempt((await run.query(statusQuery)).zone!, vm);
    const result = await run.result();
    assert.deepEqual(result.attempts.map((a) => a.outcome), ['preempted', 'completed']);

    all = await collect(runLogs(stack.env.client, run.workflowId, { attempt: 'all', storage: { localBucketsDir: stack.bucketsDir } }));
    for (const attempt of [1, 2]) {
      // Every line the trainer printed, each stream in its order, none lost to the preemption or the deletion.
      assert.deepEqual(texts(all, attempt, 'out'), truth(truthDir, attempt, 'out'), `attempt ${attempt} stdout`);
      assert.deepEqual(texts(all, attempt, 'err'), truth(truthDir, attempt, 'err'), `attempt ${attempt} stderr`);
    }
    const first = texts(all, 1, 'out');
    assert.match(first[first.length - 1], /^SIGTERM at line \d+$/, 'attempt 1 ends with what the trainer said on the notice');
    assert.equal(texts(all, 2, 'out').at(-1), 'done', 'a last line without a newline is kept');
    // Attempt markers: 1, then 2, each before its own lines.
    const markers = all.filter((e) => e.kind === 'attempt').map((e) => e.attempt);
    assert.deepEqual(markers, [1, 2]);
    const attemptsInOrder = lines(all).map((l) => l.attempt);
    assert.deepEqual(attemptsInOrder, [...attemptsInOrder].sort((a, b) => a - b), 'attempt 1\'s lines all come before attempt 2\'s');
    // The whole VM hears the notice at once: the trainer's last words, then the agent's account of the stop.
    const ofFirst = lines(all).filter((l) => l.attempt === 1);
    assert.ok(ofFirst.some((l) => l.stream === 'agent' && /SIGTERM/.test(l.text)), 'the agent says it was stopped by SIGTERM');
    assert.equal(ofFirst.at(-1)?.stream, 'agent', 'attempt 1 ends with the agent\'s lines');
    const times = lines(all).filter((l) => l.stream === 'out').map((l) => l.atMs);
    assert.deepEqual(times, [...times].sort((a, b) => a - b), 'stdout lines carry increasing times');
  });

  it('gives a follower exactly the lines a later read gives, and ends when the run closes', async () => {
    const events = await followed;
    assert.deepEqual(lines(events), lines(all));
    assert.deepEqual(events.filter((e) => e.kind === 'attempt').map((e) => e.attempt), [1, 2]);
  });

  it('reads the same log through the GCS JSON API (the emulator\'s storage API)', async () => {
    const viaApi = await collect(runLogs(stack.env.client, run.workflowId, { storage: { storageEndpoint: stack.emulator.endpoint } }));
    assert.deepEqual(viaApi, all);
  });

  it('reads one attempt, the last N lines, and lines since a time', async () => {
    const storage = { localBucketsDir: stack.bucketsDir };
    const second = await collect(runLogs(stack.env.client, run.workflowId, { attempt: 2, storage }));
    assert.deepEqual(lines(second), lines(all).filter((l) => l.attempt === 2));
    const tail = await collect(runLogs(stack.env.client, run.workflowId, { tail: 7, storage }));
    assert.deepEqual(lines(tail), lines(all).slice(-7));
    const middle = lines(all)[Math.floor(lines(all).length / 2)];
    const since = await collect(runLogs(stack.env.client, run.workflowId, { since: new Date(middle.atMs), storage }));
    assert.deepEqual(lines(since), lines(all).filter((l) => l.atMs >= middle.atMs));
    // The last lines of one attempt, for a failure's message: read from the end.
    const tail1 = await attemptLogTail({ checkpointUri: exampleSpec().checkpoint.uri, workflowId: run.workflowId, attempt: 1, lines: 5 }, storage);
    assert.deepEqual(tail1, lines(all).filter((l) => l.attempt === 1).slice(-5).map(({ attempt, node, stream, atMs, text }) => ({ attempt, node, stream, atMs, text })));
  });

  it('sterna logs --attempt all --json prints the same lines, with the preemption between the attempts', async () => {
    const out = await sterna(['logs', run.workflowId, '--attempt', 'all', '--json'], { STERNA_LOCAL_BUCKETS: stack.bucketsDir });
    assert.equal(out.code, 0, out.stderr);
    const objects = out.stdout.trim().split('\n').map((l) => JSON.parse(l) as { kind: string; attempt: number; outcome?: string; stream?: string; text?: string; at?: string });
    assert.deepEqual(
      objects.filter((o) => o.kind === 'line').map((o) => [o.attempt, o.stream, o.text, Date.parse(o.at!)]),
      lines(all).map((l) => [l.attempt, l.stream, l.text, l.atMs]),
    );
    assert.deepEqual(objects.filter((o) => o.kind !== 'line').map((o) => [o.kind, o.attempt, o.outcome]), [
      ['attempt', 1, undefined],
      ['attempt-ended', 1, 'preempted'],
      ['attempt', 2, undefined],
    ]);
  });

  it('says clearly that a run that never started has no log (client and CLI), and refuses a bad --attempt', async () => {
    const refused = await stack.start({ ...exampleSpec(), command: [] } as never);
    await refused.result().catch(() => undefined);
    const err = await collect(runLogs(stack.env.client, refused.workflowId)).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof SternaClientError, String(err));
    assert.equal(err.kind, ClientErrorKind.NoLogs);
    const out = await sterna(['logs', refused.workflowId], { STERNA_LOCAL_BUCKETS: stack.bucketsDir });
    assert.equal(out.code, 1);
    assert.equal(out.stdout, '');
    assert.doesNotMatch(out.stderr, /\n\s+at /, 'no stack trace');
    const unknown = await collect(runLogs(stack.env.client, 'no-such-run')).then(() => undefined, (e: unknown) => e);
    assert.ok(unknown instanceof SternaClientError && unknown.kind === ClientErrorKind.RunNotFound, String(unknown));
    const bad = await sterna(['logs', run.workflowId, '--attempt', '0'], {});
    assert.equal(bad.code, 2);
  });

  it('puts the log under the checkpoint prefix the run gives its agent', () => {
    const spec = exampleSpec();
    const { spec: parsed, state } = freshRun(spec, 'some/run id', 0);
    const attempt = { attempt: 1, ref: { name: 'vm' }, offer: { zone: 'z', region: 'r', accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: 'SPOT', pricePerHour: 1 } } as never;
    const request = provisionRequest(parsed, state, attempt, { run: 'r', execution: 'e', attempt: 1 }, 0);
    assert.equal(request.agent.checkpointUri, runStoragePrefix(spec.checkpoint.uri, 'some/run id'));
  });
});
