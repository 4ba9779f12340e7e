/**
 * A user's own directory, end to end on the emulator: `sterna start` packs the directory a
 * spec names (relative to the spec file), uploads it to the run's bucket, and the run's
 * every attempt unpacks it and runs the command in it: a Python script that reads a data
 * file of the workdir by its relative path and records, in the checkpoint it carries
 * across attempts, where each attempt ran and what data it found. Preempted mid-run, the
 * second attempt (a new VM) unpacks the workdir again and resumes. A second start of the
 * same tree, through the client and the emulator's GCS JSON API, uploads nothing.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTrainingRun, type PreparedWorkdir } from '../client';
import { runLogs } from '../client/logs';
import { runKey } from '../workflows/naming';
import { statusQuery } from '../workflows/messages';
import type { RunResult } from '../workflows/run/views';
import { eventually } from './helpers/processes';
import { collect, lines } from './helpers/logs';
import { exampleSpec, startStack, type Stack } from './helpers/stack';
import { testEnv, testServerAddress } from './helpers/temporal';

const cli = join(__dirname, '..', 'cli', 'main.js');

/** Steps, checkpointing every 10 and on SIGTERM; it records each attempt in the checkpoint it resumes from. */
const TRAIN_PY = `
import hashlib, json, os, signal, sys, time
total = int(sys.argv[1])
with open('data/words.txt', 'rb') as f:
    raw = f.read()
words = raw.decode().split()
state = {'n': 0, 'attempts': []}
if os.environ.get('STERNA_RESUME_FROM'):
    with open(os.environ['STERNA_RESUME_FROM']) as f:
        state = json.load(f)
state['attempts'].append({'attempt': int(os.environ['STERNA_ATTEMPT']), 'cwd': os.getcwd(), 'script': os.path.abspath(__file__), 'data': hashlib.sha256(raw).hexdigest(), 'from': state['n']})

def checkpoint():
    path = os.path.join(os.environ['STERNA_CHECKPOINT_DIR'], 'step-%d.json' % state['n'])
    with open(path + '.tmp', 'w') as f:
        json.dump(state, f)
    os.rename(path + '.tmp', path)
    with open(os.environ['STERNA_PROGRESS_FILE'], 'w') as f:
        f.write('%d/%d' % (state['n'], total))

def stop(*_):
    print('SIGTERM at step %d' % state['n'])
    checkpoint()
    sys.exit(143)

signal.signal(signal.SIGTERM, stop)
print('attempt %s runs in %s' % (os.environ['STERNA_ATTEMPT'], os.getcwd()))
while state['n'] < total:
    state['n'] += 1
    print('step %d %s' % (state['n'], words[state['n'] % len(words)]))
    if state['n'] % 10 == 0:
        checkpoint()
    time.sleep(0.05)
checkpoint()
print('done')
`;

const WORDS = 'alpha beta gamma delta epsilon zeta eta theta\n';

interface Recorded {
  n: number;
  attempts: { attempt: number; cwd: string; script: string; data: string; from: number }[];
}

async function sterna(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { namespace } = await testEnv();
  const base = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: namespace };
  return new Promise((resolve) =>
    execFile(process.execPath, [cli, ...args], { env: { ...base, ...env }, timeout: 90_000 }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr })),
  );
}

/** The run's last checkpoint, read where the agent put it (the emulator's local bucket). */
function lastCheckpoint(stack: Stack, result: RunResult): Recorded {
  const uri = result.lastCheckpoint?.uri ?? '';
  const file = uri.startsWith('file://') ? uri.slice('file://'.length) : join(stack.bucketsDir, uri.replace(/^gs:\/\//, ''));
  return JSON.parse(readFileSync(file, 'utf8')) as Recorded;
}

describe('a run started with a workdir (GCE emulator)', function () {
  this.timeout(300_000);
  let stack: Stack;
  let project: string;
  let first: { workflowId: string; workdir: { uri: string; sha256: string; uploaded: boolean } };

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
    project = join(stack.dir, 'my-project');
    mkdirSync(join(project, 'data'), { recursive: true });
    writeFileSync(join(project, 'train.py'), TRAIN_PY);
    writeFileSync(join(project, 'data', 'words.txt'), WORDS);
    writeFileSync(join(project, '.gitignore'), '*.pyc\n');
  });
  after(async () => stack?.stop());

  it('sterna start packs the spec\'s directory, uploads it, and every attempt unpacks it and runs the script there, across a preemption', async () => {
    const spec = exampleSpec({ command: ['python3', 'train.py', '300'], datasets: [], time: { expectedDuration: '20s' } });
    // As a user writes it: the workdir relative to the spec file, wherever sterna runs.
    const specFile = join(stack.dir, 'run.json');
    writeFileSync(specFile, JSON.stringify({ ...spec, workdir: 'my-project' }));
    const started = await sterna(['start', specFile, '--json', '--task-queue', stack.taskQueue, '--id', `${stack.taskQueue}-workdir`], { STERNA_LOCAL_BUCKETS: stack.bucketsDir });
    assert.equal(started.code, 0, started.stderr);
    const said = started.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    const workdir = said.find((s) => 'workdir' in s)?.workdir as { uri: string; sha256: string; uploaded: boolean; entries: number };
    const workflowId = said.find((s) => 'started' in s)?.started as string;
    first = { workflowId, workdir };
    assert.equal(workdir.uploaded, true);
    assert.equal(workdir.uri, `gs://sterna-examples/checkpoints/workdirs/${workdir.sha256}.tar.gz`);
    assert.equal(workdir.entries, 4, '.gitignore, data/, data/words.txt, train.py');
    const object = join(stack.bucketsDir, 'sterna-examples', 'checkpoints', 'workdirs', `${workdir.sha256}.tar.gz`);
    assert.equal(createHash('sha256').update(readFileSync(object)).digest('hex'), workdir.sha256);

    const run = stack.env.client.workflow.getHandle(workflowId);
    await eventually('attempt 1 training past step 20', async () => {
      const s = await run.query(statusQuery);
      return s.attempt === 1 && s.phase === 'training' && (s.step ?? 0) >= 20 ? s : undefined;
    }, 90_000);
    const [vm] = (await stack.provider.listRunResources(runKey(workflowId))).map((r) => r.name);
    await stack.emulator.preempt((await run.query(statusQuery)).zone!, vm);
    const result = (await run.result()) as RunResult;
    assert.deepEqual(result.attempts.map((a) => a.outcome), ['preempted', 'completed']);

    // What the script recorded: each attempt ran the workdir's train.py in its own VM's
    // work directory and read the workdir's data file; the second resumed the first.
    const recorded = lastCheckpoint(stack, result);
    assert.equal(recorded.n, 300);
    assert.deepEqual(recorded.attempts.map((a) => a.attempt), [1, 2]);
    const wordsSha = createHash('sha256').update(WORDS).digest('hex');
    for (const a of recorded.attempts) {
      assert.equal(a.script, join(a.cwd, 'train.py'), `attempt ${a.attempt} ran the workdir's script from its working directory`);
      assert.equal(a.data, wordsSha, `attempt ${a.attempt} read the workdir's data file`);
    }
    assert.notEqual(recorded.attempts[0].cwd, recorded.attempts[1].cwd, 'each attempt unpacked it on its own VM');
    assert.ok(recorded.attempts[1].from >= 20, 'attempt 2 resumed from attempt 1\'s checkpoint');

    // And its log says what it printed, attempt by attempt.
    const all = await collect(runLogs(stack.env.client, workflowId, { attempt: 'all', storage: { localBucketsDir: stack.bucketsDir } }));
    for (const attempt of [1, 2]) {
      const out = lines(all).filter((l) => l.attempt === attempt && l.stream === 'out').map((l) => l.text);
      assert.equal(out[0], `attempt ${attempt} runs in ${recorded.attempts[attempt - 1].cwd}`);
      assert.ok(out.some((t) => /^step \d+ (alpha|beta|gamma|delta|epsilon|zeta|eta|theta)$/.test(t)), `attempt ${attempt} printed steps with the data file's words`);
    }
  });

  it('sterna validate lists a spec\'s workdir as a start would pack it; a workdir that cannot be packed starts nothing and says why (exit 2)', async () => {
    const spec = exampleSpec({ command: ['python3', 'train.py', '10'], datasets: [] });
    const good = join(stack.dir, 'validate-good.json');
    writeFileSync(good, JSON.stringify({ ...spec, workdir: 'my-project' }));
    const valid = await sterna(['validate', good], {});
    assert.equal(valid.code, 0, valid.stderr);

    const broken = join(stack.dir, 'broken-project');
    mkdirSync(broken);
    writeFileSync(join(broken, 'train.py'), 'print(1)\n');
    symlinkSync('../../../etc/passwd', join(broken, 'passwd'));
    const brokenSpec = join(stack.dir, 'validate-broken.json');
    writeFileSync(brokenSpec, JSON.stringify({ ...spec, workdir: 'broken-project' }));
    const invalid = await sterna(['validate', brokenSpec], {});
    assert.equal(invalid.code, 2);
    assert.match(invalid.stderr, /workdir: symlink passwd -> \.\.\/\.\.\/\.\.\/etc\/passwd leaves the workdir/);

    const started = await sterna(['start', brokenSpec, '--task-queue', stack.taskQueue, '--id', `${stack.taskQueue}-never`], { STERNA_LOCAL_BUCKETS: stack.bucketsDir });
    assert.equal(started.code, 2);
    assert.match(started.stderr, /sterna start: workdir .*broken-project cannot be packed: symlink passwd/);
    assert.match(started.stderr, /to fix: .*\.sternaignore/);
    const tooBig = await sterna(['start', good, '--workdir-max-mb', '0.0001', '--task-queue', stack.taskQueue, '--id', `${stack.taskQueue}-never`], { STERNA_LOCAL_BUCKETS: stack.bucketsDir });
    assert.equal(tooBig.code, 2);
    assert.match(tooBig.stderr, /packs to more than the 100 bytes cap; its largest paths: /);
    await assert.rejects(stack.env.client.workflow.getHandle(`${stack.taskQueue}-never`).describe(), 'no run was started');
  });

  it('a second start of the unchanged tree, through the client and the GCS JSON API, uploads nothing and runs the same workdir', async () => {
    assert.ok(first, 'the first run started');
    const object = join(stack.bucketsDir, 'sterna-examples', 'checkpoints', 'workdirs', `${first.workdir.sha256}.tar.gz`);
    const writtenAt = statSync(object).mtimeMs;
    let prepared: PreparedWorkdir | undefined;
    const spec = exampleSpec({ command: ['python3', 'train.py', '20'], datasets: [] });
    const handle = await startTrainingRun(stack.env.client, spec, {
      taskQueue: stack.taskQueue,
      workflowId: `${stack.taskQueue}-workdir-again`,
      workdir: project,
      workdirStorage: { storageEndpoint: stack.emulator.endpoint },
      onWorkdir: (w) => (prepared = w),
    });
    assert.deepEqual([prepared?.uri, prepared?.sha256, prepared?.uploaded], [first.workdir.uri, first.workdir.sha256, false]);
    assert.equal(statSync(object).mtimeMs, writtenAt, 'the object was not written again');
    assert.deepEqual(readdirSync(join(stack.bucketsDir, 'sterna-examples', 'checkpoints', 'workdirs')), [`${first.workdir.sha256}.tar.gz`]);
    const result = (await handle.result()) as RunResult;
    assert.deepEqual(result.attempts.map((a) => a.outcome), ['completed']);
    assert.equal(lastCheckpoint(stack, result).attempts[0].data, createHash('sha256').update(WORDS).digest('hex'));
  });
});
