/**
 * Setup and the container image (issue 38), with a real OCI runtime: podman and runc
 * (config/podman.ts) run an image built here from this machine's own programs
 * (helpers/container-image.ts). First the agent as it really runs, the startup script of
 * an emulator VM; then whole runs on the stack, preempted in the middle.
 *
 * The trainer is a bash script staged as a dataset: it counts steps and checkpoints
 * "<step> <os-release ID> <setup's marker> <attempt> <step it resumed at> <sha256 of HF_TOKEN>",
 * so a checkpoint itself says where it was written. /etc/os-release's ID is the image's
 * (no machine the tests run on has it), and the marker is a file setup wrote in the
 * container's own file system: setup and the command shared one container.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { InstancesClient, ZoneOperationsClient } from '@google-cloud/compute';
import { agentAttributes, agentScript, AgentExit, IMAGE_ATTRIBUTE, type AgentInputs } from '../activities/agent/script';
import { parseLogLine, type LogLine } from '../activities/logs/layout';
import { ensurePodman, type PodmanSetup } from '../config/podman';
import { runLogs } from '../client/logs';
import { statusQuery } from '../workflows/messages';
import { runKey } from '../workflows/naming';
import { startTestEmulator, type TestEmulator } from './helpers/emulator';
import { collect, lines } from './helpers/logs';
import { eventually } from './helpers/processes';
import { exampleSpec, startStack, type Stack } from './helpers/stack';
import { TEST_IMAGE_ID, testImage } from './helpers/container-image';

const execFileP = promisify(execFile);
const PROJECT = 'container-test';
const ZONE = 'us-central1-a';
const MARKER = 'installed-by-setup';
const SECRET_VALUE = ` hf_$(touch pwned)'"\`x\` =\n\n`;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

// Steps of $2 seconds up to $1; a checkpoint every 5 steps, on SIGTERM (then exit 143) and at the end.
const TRAINER = `#!/bin/bash
steps=$1 pause=$2 step=0 resumed=0
if [ -n "\${STERNA_RESUME_FROM:-}" ]; then read -r step _ < "$STERNA_RESUME_FROM"; resumed=$step; fi
ID=none
[ -r /etc/os-release ] && . /etc/os-release
marker="$(cat /opt/sterna/marker 2>/dev/null || echo none)"
secret="$(printf '%s' "\${HF_TOKEN:-}" | sha256sum)"
secret="\${secret%% *}"
checkpoint() {
  printf '%s %s %s %s %s %s\\n' "$step" "$ID" "$marker" "$STERNA_ATTEMPT" "$resumed" "$secret" > "$STERNA_CHECKPOINT_DIR/.step.tmp"
  mv "$STERNA_CHECKPOINT_DIR/.step.tmp" "$STERNA_CHECKPOINT_DIR/step-$step"
}
trap 'echo "SIGTERM at step $step"; checkpoint; exit 143' TERM
echo "resumed at step $step in $ID"
while [ "$step" -lt "$steps" ]; do
  sleep "$pause" & wait $!
  step=$((step + 1))
  echo "step $step"
  echo "$step/$steps" > "$STERNA_PROGRESS_FILE"
  [ $((step % 5)) -ne 0 ] || checkpoint
done
checkpoint
echo done
`;

interface Checkpoint {
  step: number;
  id: string;
  marker: string;
  attempt: number;
  resumed: number;
  secretSha: string;
}

function parseCheckpoint(text: string): Checkpoint {
  const [step, id, marker, attempt, resumed, secretSha] = text.trim().split(' ');
  return { step: Number(step), id, marker, attempt: Number(attempt), resumed: Number(resumed), secretSha };
}

/** Every line an attempt's agent shipped under `prefix` (a local checkpoint URI's path). */
function shippedLines(prefix: string, attempt = 1): LogLine[] {
  const dir = join(prefix, 'logs', `attempt-${String(attempt).padStart(6, '0')}`, 'node-0');
  if (!existsSync(dir)) return [];
  const text = readdirSync(dir).filter((n) => n.endsWith('.log')).sort().map((n) => readFileSync(join(dir, n), 'utf8')).join('');
  let previous = 0;
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((raw) => {
      const line = parseLogLine(raw, attempt, 0, previous);
      previous = line.atMs;
      return line;
    });
}

const streamTexts = (all: readonly LogLine[], stream: string) => all.filter((l) => l.stream === stream).map((l) => l.text);

function filesText(dir: string): string {
  return readdirSync(dir, { withFileTypes: true })
    .map((entry) => (entry.isDirectory() ? filesText(join(dir, entry.name)) : entry.isFile() ? readFileSync(join(dir, entry.name), 'latin1') : ''))
    .join('\n');
}

async function containersOf(podman: PodmanSetup, runId: string): Promise<string[]> {
  const { stdout } = await execFileP(podman.podman, ['ps', '--all', '--quiet', '--filter', `label=sterna.run-id=${runId}`], { env: { ...process.env, ...podman.env } });
  return stdout.split('\n').filter(Boolean);
}

/** Removes what a test left behind: a container outlives a SIGKILLed VM (its runtime is the machine's). */
async function removeContainers(podman: PodmanSetup | undefined, label: string): Promise<void> {
  if (!podman) return;
  const env = { ...process.env, ...podman.env };
  const { stdout } = await execFileP(podman.podman, ['ps', '--all', '--quiet', '--filter', `label=${label}`], { env }).catch(() => ({ stdout: '' }));
  const ids = stdout.split('\n').filter(Boolean);
  if (ids.length > 0) await execFileP(podman.podman, ['rm', '--force', '--time', '0', ...ids], { env }).catch(() => undefined);
}

// A pure-Python wheel, by the format's own rules (PEP 427): a zip with the package, its
// METADATA and WHEEL, and a RECORD of every file's sha256.
const WHEEL_BUILDER = `
import base64, hashlib, sys, zipfile
name, version = "sterna_greeting", "1.0"
info = f"{name}-{version}.dist-info"
files = {
    f"{name}/__init__.py": 'def hello():\\n    return "hello from a wheel"\\n',
    f"{info}/METADATA": f"Metadata-Version: 2.1\\nName: sterna-greeting\\nVersion: {version}\\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: sterna-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = []
with zipfile.ZipFile(f"{sys.argv[1]}/{name}-{version}-py3-none-any.whl", "w") as whl:
    for path, text in files.items():
        data = text.encode()
        whl.writestr(path, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    whl.writestr(f"{info}/RECORD", "\\n".join(record) + "\\n")
`;

async function buildWheel(dir: string): Promise<void> {
  await execFileP('python3', ['-c', WHEEL_BUILDER, dir]);
}

interface AgentRun {
  guest: Record<string, string>;
  serialLog: string;
  /** The VM's directory: its work directory and everything the agent left. */
  dir: string;
  contents: string;
  log: LogLine[];
  checkpoints: Checkpoint[];
}

describe('setup and the container image: the agent on an emulator VM (podman + runc)', function () {
  this.timeout(240_000);
  let podman: PodmanSetup;
  let image: string;
  let emu: TestEmulator;
  let instances: InstancesClient;
  let operations: ZoneOperationsClient;
  let scratch: string;
  let vms = 0;

  async function done(operation: string): Promise<void> {
    for (;;) {
      const [op] = await operations.wait({ project: PROJECT, zone: ZONE, operation });
      if (op.error) throw new Error(`operation ${operation} failed: ${JSON.stringify(op.error)}`);
      if (op.status === 'DONE') return;
    }
  }

  type Inputs = Pick<AgentInputs, 'runId'> & Partial<AgentInputs> & { image?: string; serviceAccounts?: { email: string; scopes: string[] }[] };

  /** Boots a VM whose startup script is the agent, waits for it to exit, reads what happened and deletes the VM. */
  async function runAgent({ image: img, serviceAccounts, ...inputs }: Inputs): Promise<AgentRun> {
    const name = `ctr-${++vms}`;
    const ckpt = join(scratch, inputs.runId);
    const attributes = {
      ...agentAttributes({
        attempt: 1,
        argv: ['bash', 'trainer.sh', '12', '0.05'],
        env: {},
        datasets: [{ uri: `file://${scratch}/trainer.sh`, path: 'trainer.sh' }],
        checkpointUri: `file://${ckpt}`,
        pollSeconds: 0.2,
        ...inputs,
      }),
      ...(img ? { [IMAGE_ATTRIBUTE]: img } : {}),
    };
    const items = [{ key: 'startup-script', value: agentScript() }, { key: 'enable-guest-attributes', value: 'TRUE' }, ...Object.entries(attributes).map(([key, value]) => ({ key, value }))];
    const [lro] = await instances.insert({
      project: PROJECT,
      zone: ZONE,
      instanceResource: {
        name,
        machineType: `zones/${ZONE}/machineTypes/g2-standard-4`,
        scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'STOP', onHostMaintenance: 'TERMINATE', automaticRestart: false },
        metadata: { items },
        disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: 'projects/debian-cloud/global/images/family/debian-12', diskSizeGb: '50' } }],
        networkInterfaces: [{ network: 'global/networks/default' }],
        serviceAccounts,
      },
    });
    await done(lro.latestResponse.name as string);
    const view = await eventually(`the agent on ${name} exits`, async () => (await emu.instances()).find((i) => i.name === name && i.exitCode !== undefined), 120_000, 100);
    const checkpoints = existsSync(ckpt) ? readdirSync(ckpt).filter((n) => /^step-\d+$/.test(n)).map((n) => parseCheckpoint(readFileSync(join(ckpt, n), 'utf8'))).sort((a, b) => a.step - b.step) : [];
    const result: AgentRun = {
      guest: view.guestAttributes.sterna ?? {},
      serialLog: readFileSync(join(view.dir, 'serial-port.log'), 'utf8'),
      dir: view.dir,
      contents: filesText(view.dir),
      log: shippedLines(ckpt),
      checkpoints,
    };
    const [del] = await instances.delete({ project: PROJECT, zone: ZONE, instance: name });
    await done(del.latestResponse.name as string);
    return result;
  }

  before(async () => {
    podman = await ensurePodman();
    image = await testImage(podman);
    emu = await startTestEmulator({ timeFactor: 20, guestEnv: podman.env });
    instances = new InstancesClient(emu.clientOptions);
    operations = new ZoneOperationsClient(emu.clientOptions);
    scratch = mkdtempSync(join(tmpdir(), 'sterna-container-'));
    writeFileSync(join(scratch, 'trainer.sh'), TRAINER);
    await emu.admin.addSecretVersion(PROJECT, 'hf-token', SECRET_VALUE);
  });
  after(async () => {
    await emu?.stop();
    await removeContainers(podman, 'sterna.run-id');
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('runs setup, then the command, in one container of the image: env and secrets in both, their output in the log, nothing left behind', async () => {
    const run = await runAgent({
      runId: 'in-image',
      image,
      env: { GREETING: 'hello from the spec' },
      secrets: { HF_TOKEN: `gcp-secret-manager://projects/${PROJECT}/secrets/hf-token/versions/latest` },
      serviceAccounts: [{ email: 'default', scopes: ['https://www.googleapis.com/auth/cloud-platform'] }],
      setup: [
        'echo "setup says $GREETING"; echo "to stderr" >&2',
        `mkdir -p /opt/sterna && echo ${MARKER} > /opt/sterna/marker`,
        'test -n "$HF_TOKEN" && echo "setup has the secret"',
      ],
    });
    assert.equal(run.guest.exit, '0', run.serialLog);
    assert.equal(run.guest.phase, 'exited');
    assert.equal(run.guest['setup-step'], '3/3');
    const last = run.checkpoints.at(-1);
    assert.ok(last, run.serialLog);
    assert.equal(last.step, 12);
    assert.equal(last.id, TEST_IMAGE_ID, 'the command ran in the image');
    assert.equal(last.marker, MARKER, 'in the container setup prepared');
    assert.equal(last.secretSha, sha256(SECRET_VALUE), 'the secret reached the command byte for byte');
    assert.ok(!existsSync('/opt/sterna/marker') || readFileSync('/opt/sterna/marker', 'utf8').trim() !== MARKER, 'setup did not run on the VM itself');
    assert.deepEqual(streamTexts(run.log, 'setup-out'), ['setup says hello from the spec', 'setup has the secret']);
    assert.deepEqual(streamTexts(run.log, 'setup-err'), ['to stderr']);
    const out = streamTexts(run.log, 'out');
    assert.equal(out[0], `resumed at step 0 in ${TEST_IMAGE_ID}`);
    assert.equal(out.at(-1), 'done');
    // Setup's lines all come before the command's.
    const lastSetup = Math.max(...run.log.map((l, i) => (l.stream.startsWith('setup-') ? i : -1)));
    assert.ok(lastSetup < run.log.findIndex((l) => l.stream === 'out'));
    assert.deepEqual(await containersOf(podman, 'in-image'), [], 'the container is removed');
    assert.ok(!run.contents.includes('hf_$(touch pwned)'), 'no file of the VM holds the secret (the env file held only ordinary variables, and is gone)');
    assert.ok(!run.serialLog.includes('hf_'));
    assert.ok(!existsSync(join(run.dir, 'sterna-work', '.sterna', 'container.env')));
  });

  it('installs a requirement with pip in setup (from a wheel built here: no network), which the command then imports', async () => {
    const python = await testImage(podman, { python: true });
    const project = join(scratch, 'py-project');
    mkdirSync(join(project, 'wheels'), { recursive: true });
    writeFileSync(join(project, 'requirements.txt'), 'sterna-greeting==1.0\n');
    await buildWheel(join(project, 'wheels'));
    const run = await runAgent({
      runId: 'pip-in-image',
      image: python,
      datasets: [
        { uri: `file://${project}/requirements.txt`, path: 'requirements.txt' },
        { uri: `file://${project}/wheels`, path: 'wheels' },
      ],
      setup: ['python3 -m pip install --no-index --find-links wheels -r requirements.txt'],
      argv: ['python3', '-c', 'import sterna_greeting, sys; print(sterna_greeting.hello(), sys.prefix)'],
    });
    assert.equal(run.guest.exit, '0', run.serialLog);
    assert.ok(streamTexts(run.log, 'setup-out').some((t) => t.includes('Successfully installed sterna-greeting-1.0')), JSON.stringify(run.log));
    assert.deepEqual(streamTexts(run.log, 'out'), ['hello from a wheel /usr']);
  });

  it('a setup command that fails ends the agent with exit 71 and its own code: later commands and the trainer never run, the log has its output', async () => {
    const run = await runAgent({ runId: 'setup-fails', image, setup: ['echo first', 'echo "no matching distribution for torch==9" >&2; exit 3', 'touch /opt/never'] });
    assert.equal(run.guest.phase, 'failed', run.serialLog);
    assert.equal(run.guest.exit, String(AgentExit.SetupFailed));
    assert.equal(run.guest['setup-exit'], '3');
    assert.equal(run.guest['setup-step'], '2/3');
    assert.deepEqual(run.checkpoints, [], 'the trainer never ran');
    assert.deepEqual(streamTexts(run.log, 'out'), []);
    assert.deepEqual(streamTexts(run.log, 'setup-out'), ['first']);
    assert.deepEqual(streamTexts(run.log, 'setup-err'), ['no matching distribution for torch==9']);
    assert.ok(streamTexts(run.log, 'agent').some((t) => /setup command 2\/3 failed with exit code 3/.test(t)), 'the agent names the command');
    assert.deepEqual(await containersOf(podman, 'setup-fails'), []);
  });

  it('runs setup on the VM itself when there is no image, in the work directory, with the same failure', async () => {
    const ok = await runAgent({ runId: 'host-setup', setup: ['echo "on the VM: $(cat /etc/os-release | grep -c sterna-test-image)"', 'echo prepared > prepared.txt'], argv: ['bash', '-c', 'cat prepared.txt'] });
    assert.equal(ok.guest.exit, '0', ok.serialLog);
    assert.deepEqual(streamTexts(ok.log, 'setup-out'), ['on the VM: 0']);
    assert.deepEqual(streamTexts(ok.log, 'out'), ['prepared']);
    const failed = await runAgent({ runId: 'host-setup-fails', setup: ['exit 7'] });
    assert.equal(failed.guest.exit, String(AgentExit.SetupFailed), failed.serialLog);
    assert.equal(failed.guest['setup-exit'], '7');
    assert.equal(failed.guest['setup-step'], '1/1');
  });

  it('a VM with neither docker nor podman: exit 73, the log says what to do', async () => {
    // This machine's programs but the container runtimes, as a VM image without them: a
    // second emulator whose guests get only this PATH.
    const farm = join(scratch, 'no-runtime-bin');
    mkdirSync(farm);
    for (const dir of ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
      if (!existsSync(dir)) continue;
      for (const name of readdirSync(dir)) {
        if (name === 'docker' || name === 'podman' || existsSync(join(farm, name))) continue;
        symlinkSync(join(dir, name), join(farm, name));
      }
    }
    const bare = await startTestEmulator({ timeFactor: 20, guestEnv: { ...podman.env, PATH: farm } });
    const saved = { emu, instances, operations };
    try {
      [emu, instances, operations] = [bare, new InstancesClient(bare.clientOptions), new ZoneOperationsClient(bare.clientOptions)];
      const run = await runAgent({ runId: 'no-runtime', image, setup: ['echo never'] });
      assert.equal(run.guest.phase, 'failed', run.serialLog);
      assert.equal(run.guest.exit, String(AgentExit.NoContainerRuntime));
      assert.ok(streamTexts(run.log, 'agent').some((t) => /neither docker \(with its daemon running\) nor podman/.test(t)), JSON.stringify(run.log));
      assert.deepEqual(run.checkpoints, []);
    } finally {
      ({ emu, instances, operations } = saved);
      await bare.stop();
    }
  });

  it('refuses an env value on two lines in a container (no env file can carry it): exit 65, before anything runs', async () => {
    const run = await runAgent({ runId: 'two-lines', image, env: { NEWLINES: 'x\nINJECTED=1' }, setup: ['echo never'] });
    assert.equal(run.guest.phase, 'failed', run.serialLog);
    assert.equal(run.guest.exit, '65');
    assert.deepEqual(streamTexts(run.log, 'setup-out'), []);
    assert.deepEqual(await containersOf(podman, 'two-lines'), []);
  });

  it('an image that does not exist: exit 72, the log says which and why, nothing ran', async () => {
    const run = await runAgent({ runId: 'no-image', image: 'localhost/sterna-no-such-image:1', setup: ['echo never'] });
    assert.equal(run.guest.phase, 'failed', run.serialLog);
    assert.equal(run.guest.exit, String(AgentExit.ImageUnavailable));
    assert.equal(run.guest['setup-step'], undefined);
    assert.ok(streamTexts(run.log, 'agent').some((t) => t.includes('localhost/sterna-no-such-image:1 could not be pulled')), JSON.stringify(run.log));
    assert.deepEqual(streamTexts(run.log, 'setup-out'), []);
  });
});

describe('a run in a container image on the stack: setup, a preemption, a resume in a new container', function () {
  this.timeout(300_000);
  let podman: PodmanSetup;
  let image: string;
  let stack: Stack;

  before(async () => {
    podman = await ensurePodman();
    image = await testImage(podman);
    stack = await startStack({ timeFactor: 10, guestEnv: podman.env });
    await stack.startWorker();
    const dir = join(stack.bucketsDir, 'sterna-examples', 'container-test');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'trainer.sh'), TRAINER);
  });
  after(async () => {
    await stack?.stop();
    await removeContainers(podman, 'sterna.run-id');
  });

  it('trains in the image, is preempted, and resumes from its checkpoint in a new container; setup runs on each VM and its lines are in the run\'s log', async () => {
    const run = await stack.start(
      exampleSpec({
        image,
        setup: [`mkdir -p /opt/sterna && echo ${MARKER} > /opt/sterna/marker`, 'echo "setup on attempt $STERNA_ATTEMPT"'],
        command: ['bash', 'trainer.sh', '80', '0.1'],
        datasets: [{ uri: 'gs://sterna-examples/container-test/trainer.sh', path: 'trainer.sh' }],
        time: { expectedDuration: '20s' },
      }),
    );
    await eventually('attempt 1 training past a checkpoint', async () => {
      const s = await run.query(statusQuery);
      return s.attempt === 1 && s.phase === 'training' && (s.lastCheckpoint?.step ?? 0) >= 10 ? s : undefined;
    }, 120_000);
    assert.equal((await containersOf(podman, run.workflowId)).length, 1, 'attempt 1 trains in one container');
    const [vm] = (await stack.provider.listRunResources(runKey(run.workflowId))).map((r) => r.name);
    await stack.emulator.preempt((await run.query(statusQuery)).zone!, vm);
    const result = await run.result();
    assert.deepEqual(result.attempts.map((a) => a.outcome), ['preempted', 'completed']);
    assert.equal(result.lastCheckpoint?.step, 80);

    const ckptRoot = join(stack.bucketsDir, 'sterna-examples', 'checkpoints', runKey(run.workflowId));
    const all = readdirSync(ckptRoot).filter((n) => /^step-\d+$/.test(n)).map((n) => parseCheckpoint(readFileSync(join(ckptRoot, n), 'utf8')));
    const final = all.find((c) => c.step === 80)!;
    assert.equal(final.id, TEST_IMAGE_ID, 'the command ran in the image');
    assert.equal(final.marker, MARKER, 'after setup, in the same container');
    assert.equal(final.attempt, 2);
    const firstAttempt = all.filter((c) => c.attempt === 1);
    const lastOfFirst = Math.max(...firstAttempt.map((c) => c.step));
    assert.ok(firstAttempt.every((c) => c.id === TEST_IMAGE_ID && c.marker === MARKER));
    // The final checkpoint written on the notice, or one before it if the run had not heard of it yet.
    assert.ok(final.resumed >= 10 && firstAttempt.some((c) => c.step === final.resumed), `attempt 2 resumed from one of attempt 1's checkpoints (at ${final.resumed})`);

    const logged = lines(await collect(runLogs(stack.env.client, run.workflowId, { attempt: 'all', storage: { localBucketsDir: stack.bucketsDir } })));
    const of = (attempt: number, stream: string) => logged.filter((l) => l.attempt === attempt && l.stream === stream).map((l) => l.text);
    assert.deepEqual(of(1, 'setup-out'), ['setup on attempt 1']);
    assert.deepEqual(of(2, 'setup-out'), ['setup on attempt 2']);
    // The notice reached the trainer through the runtime: its last words, then attempt 2 from there.
    assert.equal(of(1, 'out').at(-1), `SIGTERM at step ${lastOfFirst}`);
    assert.equal(of(2, 'out')[0], `resumed at step ${final.resumed} in ${TEST_IMAGE_ID}`);
    assert.equal(of(2, 'out').at(-1), 'done');
    assert.deepEqual(await containersOf(podman, run.workflowId), [], 'each attempt removed its container');
  });
});
