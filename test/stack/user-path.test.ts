/**
 * The user's path of issue 38, end to end, through the real CLI: a directory with a Python
 * training script and its requirements (examples/python) started with `sterna start
 * --workdir`, its setup installing the requirement offline (a wheel it builds, pip
 * --no-index), preempted in the middle with its zone then stocked out, resumed in another
 * zone from its checkpoint, and read back with `sterna logs RUN --attempt all --json`:
 * every line the script printed, in order, attempt 1 ending at the notice, attempt 2
 * resuming where it checkpointed. Twice: on the VM itself, and in a container image
 * (podman + runc, built here) whose user is not root.
 *
 * The script's every step prints its loss, a pure function of the weights it resumed
 * from: the lines are compared with an uninterrupted run of the same script on this
 * machine, so a lost, repeated or reordered line, or a resume from the wrong weights,
 * shows.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { listWorkdir } from '../../client/workdir';
import { ensurePodman, type PodmanSetup } from '../../processes/podman';
import { loadWorkerConfig } from '../../config/worker-config';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunResult } from '../../workflows/run/views';
import type { RunSpecInput } from '../../workflows/spec';
import { testImage } from '../helpers/container-image';
import { eventually } from '../helpers/processes';
import { startStack, type Stack } from '../helpers/stack';
import { testEnv, testServerAddress } from '../helpers/temporal';

const execFileP = promisify(execFile);
const repoRoot = join(__dirname, '..', '..', '..');
const cli = join(repoRoot, 'build', 'cli', 'main.js');
const EXAMPLE = join(repoRoot, 'examples', 'python');
const ACCELERATORS = ['nvidia-l4', 'nvidia-tesla-t4'];

interface Cli {
  code: number | null;
  stdout: string;
  stderr: string;
}

async function sterna(args: string[], env: NodeJS.ProcessEnv): Promise<Cli> {
  const { namespace } = await testEnv();
  const base = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: namespace };
  return new Promise((resolve) =>
    execFile(process.execPath, [cli, ...args], { env: { ...base, ...env }, timeout: 120_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr }),
    ),
  );
}

const jsonLines = (text: string) => text.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);

type LogJson = { kind: 'line'; attempt: number; node: number; stream: string; at: string; text: string } | { kind: 'attempt'; attempt: number; zone?: string } | { kind: 'attempt-ended'; attempt: number; outcome: string };

/** `step N loss X` for every step of an uninterrupted run of the example's script here (its library from source). */
async function referenceSteps(steps: number): Promise<string[]> {
  const scratch = mkdtempSync(join(tmpdir(), 'sterna-user-path-'));
  try {
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('STERNA_')));
    const { stdout } = await execFileP('python3', [join(EXAMPLE, 'train.py'), '--steps', String(steps)], {
      cwd: scratch,
      // No __pycache__ left in the repository's example.
      env: { ...clean, PYTHONPATH: join(EXAMPLE, 'lib'), PYTHONDONTWRITEBYTECODE: '1', STERNA_CHECKPOINT_DIR: join(scratch, 'checkpoints') },
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout.split('\n').filter((l) => l.startsWith('step '));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

async function removeContainers(podman: PodmanSetup, runId: string): Promise<void> {
  const env = { ...process.env, ...podman.env };
  const { stdout } = await execFileP(podman.podman, ['ps', '--all', '--quiet', '--filter', `label=sterna.run-id=${runId}`], { env }).catch(() => ({ stdout: '' }));
  const ids = stdout.split('\n').filter(Boolean);
  if (ids.length > 0) await execFileP(podman.podman, ['rm', '--force', '--time', '0', ...ids], { env }).catch(() => undefined);
}

describe('a user\'s directory end to end: sterna start --workdir examples/python, a preemption, sterna logs --attempt all', function () {
  this.timeout(600_000);
  let podman: PodmanSetup;
  let stack: Stack;
  let reference: string[];
  const spec = JSON.parse(readFileSync(join(EXAMPLE, 'run.json'), 'utf8')) as RunSpecInput & { workdir: string };
  const totalSteps = Number(spec.command[spec.command.indexOf('--steps') + 1]);
  const runIds: string[] = [];

  before(async () => {
    podman = await ensurePodman();
    stack = await startStack({ timeFactor: 10, guestEnv: podman.env });
    await stack.startWorker();
    reference = await referenceSteps(totalSteps);
    assert.equal(reference.length, totalSteps);
  });
  after(async () => {
    await stack?.stop();
    for (const id of runIds) if (podman) await removeContainers(podman, id);
  });

  /** Starts the example through the CLI, preempts it mid-training with its zone stocked out, and reads its log through the CLI. */
  async function runThePath(specFile: string, id: string): Promise<{ result: RunResult; log: LogJson[]; workdir: { uri: string; entries: number; uploaded: boolean } }> {
    runIds.push(id);
    const env = { STERNA_LOCAL_BUCKETS: stack.bucketsDir };
    const started = await sterna(['start', specFile, '--workdir', EXAMPLE, '--json', '--task-queue', stack.taskQueue, '--id', id], env);
    assert.equal(started.code, 0, started.stderr);
    const said = jsonLines(started.stdout);
    assert.equal(said.find((s) => 'started' in s)?.started, id);
    const workdir = said.find((s) => 'workdir' in s)?.workdir as { uri: string; entries: number; uploaded: boolean };

    const run = stack.env.client.workflow.getHandle(id);
    const training = await eventually('attempt 1 training past a checkpoint', async () => {
      const s = await run.query(statusQuery);
      return s.attempt === 1 && s.phase === 'training' && (s.lastCheckpoint?.step ?? 0) >= 1 && (s.step ?? 0) >= 30 ? s : undefined;
    }, 180_000, 250);
    const zone = training.zone!;
    // The zone has no spot GPUs after the preemption, so the run resumes elsewhere.
    for (const accelerator of ACCELERATORS) await stack.emulator.setSpotCapacity(zone, accelerator, 0);
    const [vm] = (await stack.provider.listRunResources(runKey(id))).map((r) => r.name);
    await stack.emulator.preempt(zone, vm);
    const result = (await run.result()) as RunResult;
    for (const accelerator of ACCELERATORS) await stack.emulator.setSpotCapacity(zone, accelerator, undefined);

    const logs = await sterna(['logs', id, '--attempt', 'all', '--json'], env);
    assert.equal(logs.code, 0, logs.stderr);
    return { result, log: jsonLines(logs.stdout) as LogJson[], workdir };
  }

  /** What every run of the path must show, wherever the script ran. */
  function assertThePath(result: RunResult, log: LogJson[]): void {
    assert.equal(result.status, 'completed');
    assert.deepEqual(result.attempts.map((a) => a.outcome), ['preempted', 'completed']);
    assert.notEqual(result.attempts[1].zone, result.attempts[0].zone, 'attempt 2 ran in another zone');
    assert.equal(result.lastCheckpoint?.step, totalSteps);

    // Attempt markers: 1, its end (preempted), 2; every line between its own markers.
    const markers = log.filter((e) => e.kind !== 'line');
    assert.deepEqual(markers.map((m) => [m.kind, m.attempt]), [['attempt', 1], ['attempt-ended', 1], ['attempt', 2]]);
    assert.equal((markers[1] as { outcome: string }).outcome, 'preempted');
    assert.deepEqual(markers.filter((m) => m.kind === 'attempt').map((m) => (m as { zone?: string }).zone), result.attempts.map((a) => a.zone));
    let attempt = 0;
    for (const e of log) {
      if (e.kind === 'attempt') attempt = e.attempt;
      else if (e.kind === 'line') assert.equal(e.attempt, attempt, `a line of attempt ${e.attempt} under attempt ${attempt}'s marker: ${e.text}`);
    }
    const of = (n: number, stream: string) => log.filter((e): e is Extract<LogJson, { kind: 'line' }> => e.kind === 'line' && e.attempt === n && e.stream === stream).map((e) => e.text);

    for (const n of [1, 2]) {
      // Setup on each VM: the wheel built, then installed from it with no index.
      const setup = of(n, 'setup-out');
      assert.ok(setup.some((t) => t === 'built wheels/tinylogreg-0.1.0-py3-none-any.whl'), `attempt ${n}'s setup built the wheel: ${JSON.stringify(setup)}`);
      assert.ok(setup.some((t) => t.includes('Successfully installed tinylogreg-0.1.0')), `attempt ${n}'s setup installed it: ${JSON.stringify(setup)}`);
      // Setup's lines come before the script's.
      const lines = log.filter((e) => e.kind === 'line' && e.attempt === n);
      const lastSetup = Math.max(...lines.map((e, i) => (e.kind === 'line' && e.stream.startsWith('setup-') ? i : -1)));
      const firstOut = lines.findIndex((e) => e.kind === 'line' && e.stream === 'out');
      assert.ok(lastSetup >= 0 && lastSetup < firstOut, `attempt ${n}: setup before the command`);
      assert.deepEqual(of(n, 'err'), [], `attempt ${n} printed nothing on stderr`);
    }

    // Attempt 1: from step 0, every step in order, up to the notice, then its last words.
    const first = of(1, 'out');
    assert.deepEqual(first.slice(0, 2), ['starting at step 0', 'tinylogreg 0.1.0 from .deps/tinylogreg/__init__.py'], 'the library came from what setup installed');
    const last = /^SIGTERM: checkpointed step (\d+), exiting$/.exec(first.at(-1) ?? '');
    assert.ok(last, `attempt 1 ended on the notice: ${first.at(-1)}`);
    const stoppedAt = Number(last[1]);
    assert.deepEqual(first.slice(2, -1), reference.slice(0, stoppedAt), 'attempt 1 printed every step to the notice, in order, with the losses of an uninterrupted run');

    // Attempt 2: from one of attempt 1's checkpoints, every step to the end.
    const second = of(2, 'out');
    const resumed = /^resumed from step (\d+)$/.exec(second[0] ?? '');
    assert.ok(resumed, `attempt 2 resumed: ${second[0]}`);
    const from = Number(resumed[1]);
    assert.ok(from >= 1 && from <= stoppedAt, `attempt 2 resumed at step ${from}, one attempt 1 reached (${stoppedAt})`);
    assert.equal(second[1], 'tinylogreg 0.1.0 from .deps/tinylogreg/__init__.py');
    assert.deepEqual(second.slice(2, -1), reference.slice(from), 'attempt 2 printed every step from its checkpoint, with the same losses');
    assert.equal(second.at(-1), `done: step ${totalSteps} ${reference.at(-1)!.split(' ').slice(2).join(' ')}`);
  }

  it('on the VM: the example\'s own spec (workdir, setup), preempted, resumed in another zone, every printed line in sterna logs', async () => {
    const { result, log, workdir } = await runThePath(join(EXAMPLE, 'run.json'), `${stack.taskQueue}-python`);
    // What .gitignore and .sternaignore leave: the script, its requirements, the library's source and the ignore files.
    const listed = (await listWorkdir(EXAMPLE)).entries.map((e) => e.path);
    assert.deepEqual(listed, ['.gitignore', '.sternaignore', 'lib', 'lib/build_wheel.py', 'lib/tinylogreg', 'lib/tinylogreg/__init__.py', 'requirements.txt', 'train.py']);
    assert.equal(workdir.entries, listed.length);
    assert.equal(workdir.uploaded, true);
    assertThePath(result, log);
  });

  it('in a container image whose user is not root: the same path, setup and the script in the image', async () => {
    const image = await testImage(podman, { python: true, user: '1000:1000' });
    const specFile = join(stack.dir, 'python-in-image.json');
    writeFileSync(specFile, JSON.stringify({ ...spec, image }));
    const { result, log } = await runThePath(specFile, `${stack.taskQueue}-python-image`);
    assertThePath(result, log);
    for (const n of [1, 2]) {
      const agent = log.filter((e) => e.kind === 'line' && e.attempt === n && e.stream === 'agent').map((e) => (e as { text: string }).text);
      assert.ok(agent.some((t) => t.startsWith(`container `) && t.includes(`of ${image} (podman)`)), `attempt ${n} ran in the image: ${JSON.stringify(agent)}`);
      assert.ok(agent.some((t) => t.includes('the image runs as user 1000:1000')), `attempt ${n} shared the work directory with the image's user`);
    }
  });
});

describe('the README\'s local setup: a relative STERNA_LOCAL_BUCKETS', () => {
  it('is resolved where the worker starts: its VMs run elsewhere and are given file:// URIs under it', () => {
    const config = loadWorkerConfig({ STERNA_GCE_ENDPOINT: 'http://127.0.0.1:9090', STERNA_LOCAL_BUCKETS: '.state/buckets' });
    assert.equal(config.gce?.localBucketsDir, join(process.cwd(), '.state', 'buckets'));
  });
});
