/**
 * The proof that secrets stay secret: a run with a secret reference (and an env
 * value whose name looks like a secret) goes through the real stack, and then everything
 * an operator or an attacker with read access could look at is searched for the secret's
 * value: the raw workflow histories (`temporal workflow show --output json`, no codec),
 * the VM's metadata and labels, the emulator's whole state directory (serial logs,
 * state file, log), the worker's log, the CLI's output, the run's status; on GKE, the
 * Job, pod and event objects. The value must be nowhere; the trainer proves it got it by
 * printing its sha256.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { InstancesClient } from '@google-cloud/compute';
import { startCodecServer, type CodecServer } from '../../codec/server';
import { sternaPayloadCodec } from '../../codec/data-converter';
import { findTemporalCli } from '../../processes/temporal-cli';
import { ENCRYPTED_ENCODING } from '../../codec/payload-codec';
import { statusQuery } from '../../workflows/messages';
import { runKey } from '../../workflows/naming';
import type { RunResult } from '../../workflows/run/views';
import type { RunSpecInput } from '../../workflows/spec';
import { startKubeStack, type KubeStack } from '../helpers/kube';
import { eventually, type Spawned } from '../helpers/processes';
import { exampleSpec, PROJECT, startStack, type Stack } from '../helpers/stack';
import { testEnv, testServerAddress } from '../helpers/temporal';

const run = promisify(execFile);
const repoRoot = join(__dirname, '..', '..', '..');
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** Every file under `dir`, as text (binary files too, as latin1, so no byte is missed). */
function everyFile(dir: string): { path: string; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return everyFile(path);
    return entry.isFile() ? [{ path, text: readFileSync(path, 'latin1') }] : [];
  });
}

/**
 * The text with every base64 run in it decoded too: payload data in `--output json`,
 * metadata lists (one base64 item per line), annotations. A secret encoded is still found.
 */
function searchable(text: string): string {
  // JSON escapes (a "\\n" between list items) must not glue onto a base64 run.
  const decoded = (text.replace(/\\[nrt]/g, '\n').match(/[A-Za-z0-9+/_-]{8,}={0,2}/g) ?? []).flatMap((run) => [Buffer.from(run, 'base64').toString('latin1'), Buffer.from(run, 'base64url').toString('latin1')]);
  return [text, ...decoded].join('\n');
}

function foundIn(needle: string, text: string): boolean {
  return searchable(text).includes(needle);
}

function assertNowhere(needle: string, places: Record<string, string>): void {
  for (const [where, text] of Object.entries(places)) assert.ok(!foundIn(needle, text), `the secret is in ${where}`);
}

async function temporalCli(args: string[]): Promise<string> {
  const temporal = await findTemporalCli();
  assert.ok(temporal, 'the Temporal CLI is installed by the setup step');
  const namespace = (await testEnv()).namespace ?? 'default';
  const { stdout } = await run(temporal!, [...args, '--address', await testServerAddress(), '--namespace', namespace], { maxBuffer: 64 << 20 });
  return stdout;
}

/** Raw histories (no codec) of every workflow on the task queue: the runs and the fleet observer. */
async function rawHistories(taskQueue: string): Promise<Record<string, string>> {
  const listed = JSON.parse((await temporalCli(['workflow', 'list', '--query', `TaskQueue = "${taskQueue}"`, '--output', 'json'])) || '[]') as { execution: { workflowId: string; runId: string } }[];
  const histories: Record<string, string> = {};
  for (const { execution } of listed) {
    histories[`history of ${execution.workflowId}/${execution.runId}`] = await temporalCli(['workflow', 'show', '--workflow-id', execution.workflowId, '--run-id', execution.runId, '--output', 'json']);
  }
  return histories;
}

function startedInput(historyJson: string): { metadata: Record<string, string>; data: string } {
  const history = JSON.parse(historyJson) as { events: { workflowExecutionStartedEventAttributes?: { input: { payloads: { metadata: Record<string, string>; data: string }[] } } }[] };
  return history.events[0].workflowExecutionStartedEventAttributes!.input.payloads[0];
}

describe('secrets stay out of history, metadata, labels, logs and status (GCE, the emulator)', function () {
  this.timeout(300_000);
  const SECRET = `hf_${randomBytes(16).toString('hex')}`;
  const ENV_VALUE = `wandb-${randomBytes(12).toString('hex')}`;
  let stack: Stack;
  let worker: Spawned;
  let codec: CodecServer;

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    worker = stack.spawnWorker();
    codec = await startCodecServer({ codec: sternaPayloadCodec(), corsOrigins: [] });
    await stack.emulator.admin.addSecretVersion(PROJECT, 'hf-token', SECRET);
  });
  after(async () => {
    await codec?.close();
    await worker?.kill('SIGKILL');
    await stack?.stop();
  });

  it('finds the secret only where the trainer reports its hash; the history holds ciphertext', async () => {
    const example = exampleSpec();
    const spec: RunSpecInput = {
      ...example,
      name: 'secret-run',
      command: [...example.command, '--hash-env', 'HF_TOKEN'],
      env: { WANDB_API_KEY: ENV_VALUE },
      secrets: { HF_TOKEN: `gcp-secret-manager://projects/${PROJECT}/secrets/hf-token/versions/latest` },
    };
    const specFile = join(stack.dir, 'secret-run.json');
    writeFileSync(specFile, JSON.stringify(spec));
    const workflowId = `secret-run-${Date.now().toString(36)}`;

    // Started as a user would, with the CLI (which encrypts with the environment's key).
    const { namespace } = await testEnv();
    const cli = await run(process.execPath, [join(repoRoot, 'build', 'cli', 'main.js'), 'start', specFile, '--id', workflowId, '--task-queue', stack.taskQueue], {
      env: { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: namespace },
    });
    assert.match(cli.stderr, /warning: env\.WANDB_API_KEY: looks like a secret/);

    // While it trains: the VM as anyone with compute.instances.get sees it.
    const instances = new InstancesClient(stack.emulator.clientOptions);
    const vm = await eventually('the run\'s VM', async () => (await stack.emulator.instances()).find((i) => i.labels['sterna-run'] === runKey(workflowId) && i.status === 'RUNNING'), 120_000, 250);
    const [instance] = await instances.get({ project: PROJECT, zone: vm.zone, instance: vm.name });
    const handle = stack.env.client.workflow.getHandle(workflowId);
    const status = JSON.stringify(await handle.query(statusQuery));
    const result = (await handle.result()) as RunResult;
    assert.equal(result.status, 'completed');

    // The secret arrived: the trainer printed its hash to the VM's serial log.
    const serialLog = readFileSync(join(vm.dir, 'serial-port.log'), 'utf8');
    assert.match(serialLog, new RegExp(`sha256\\(HF_TOKEN\\) = ${sha256(SECRET)}`));

    // Least privilege on the VM: no external IP; cloud-platform only because the run reads Secret Manager.
    assert.equal(instance.networkInterfaces?.[0].accessConfigs?.length ?? 0, 0);
    assert.ok(instance.serviceAccounts?.[0].scopes?.includes('https://www.googleapis.com/auth/cloud-platform'));
    assert.equal(instance.shieldedInstanceConfig?.enableVtpm, true);
    assert.ok(instance.metadata?.items?.some((item) => item.key === 'sterna-secrets'), 'the metadata names where the secret lives');

    // Raw history, as the server stores it: the run's input is ciphertext.
    // Every execution of the run (it may have continued as new) holds only ciphertext.
    const histories = await rawHistories(stack.taskQueue);
    const own = Object.entries(histories).filter(([where]) => where.includes(`${workflowId}/`));
    assert.ok(own.length >= 1, 'the run\'s history is listed');
    for (const [where, history] of own) {
      assert.equal(Buffer.from(startedInput(history).metadata.encoding, 'base64').toString(), ENCRYPTED_ENCODING, `${where}: its input is encrypted`);
      assert.ok(!foundIn(ENV_VALUE, history), `${where}: an env value is encrypted in history too`);
    }
    // Through the codec server, those allowed see the input decoded: the env value, and no secret.
    const decoded = await temporalCli(['workflow', 'show', '--workflow-id', workflowId, '--run-id', (await handle.describe()).raw.workflowExecutionInfo!.firstRunId!, '--output', 'json', '--codec-endpoint', codec.url]);
    const input = startedInput(decoded);
    assert.equal(Buffer.from(input.metadata.encoding, 'base64').toString(), 'json/plain');
    assert.equal((JSON.parse(Buffer.from(input.data, 'base64').toString()) as RunSpecInput).env?.WANDB_API_KEY, ENV_VALUE);
    // The search sees through encodings: the env value is in the VM's metadata (base64 in a list), as the warning said.
    assert.ok(foundIn(ENV_VALUE, JSON.stringify(instance)));
    assert.ok(Object.keys(histories).length >= 2, 'the run and the fleet observer');

    const workerLog = readFileSync(join(stack.dir, 'worker.log'), 'utf8');
    const emulatorFiles = Object.fromEntries(everyFile(stack.emulator.stateDir).map((f) => [`emulator file ${f.path}`, f.text]));
    assertNowhere(SECRET, {
      ...histories,
      'the history decoded by the codec server': decoded,
      'the VM (metadata, labels, everything instances.get shows)': JSON.stringify(instance),
      ...emulatorFiles,
      'the worker log': workerLog,
      'the CLI output': cli.stdout + cli.stderr,
      'the run status': status,
      'the run result': JSON.stringify(result),
    });
    // The env value's name looked like a secret: the run's timeline says so too.
    assert.match(status, /warning: env\.WANDB_API_KEY looks like a secret/);
  });
});

describe('secrets stay out of the Kubernetes objects (GKE, a real control plane)', function () {
  this.timeout(600_000);
  const SECRET = `wandb_${randomBytes(16).toString('hex')}`;
  let stack: KubeStack;

  before(async function () {
    this.timeout(1_800_000);
    stack = await startKubeStack();
    await stack.core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'wandb' }, stringData: { 'api-key': SECRET } } });
  });
  after(async () => stack?.stop());

  it('passes the secret by secretKeyRef: the Job, pod and events never hold it, the trainer does', async () => {
    const example = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
    const spec: RunSpecInput = {
      ...example,
      backend: 'gke',
      resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
      recovery: { ...example.recovery, pollSeconds: 0.3 },
      command: [...example.command, '--hash-env', 'WANDB_API_KEY'],
      secrets: { WANDB_API_KEY: 'k8s://wandb/api-key' },
    };
    const env = await testEnv();
    const workflowId = `${stack.taskQueue}-secret`;
    const handle = await env.client.workflow.start('trainingRun', { taskQueue: stack.taskQueue, workflowId, args: [spec] });
    const selector = `sterna-run=${runKey(workflowId)}`;
    // Every object of the run while it trains, as `kubectl get -o json` shows them.
    const objects = await eventually(
      'the run\'s Job and running pod',
      async () => {
        const jobs = (await stack.batch.listNamespacedJob({ namespace: 'default', labelSelector: selector })).items;
        const pods = (await stack.core.listNamespacedPod({ namespace: 'default', labelSelector: selector })).items;
        return pods.some((p) => p.status?.phase === 'Running') ? { jobs, pods } : undefined;
      },
      120_000,
      250,
    );
    const result = (await handle.result()) as RunResult;
    assert.equal(result.status, 'completed');
    const events = (await stack.core.listNamespacedEvent({ namespace: 'default' })).items;
    const container = objects.jobs[0].spec!.template.spec!.containers[0];
    const ref = container.env?.find((e) => e.name === 'STERNA_SECRET_WANDB_API_KEY')?.valueFrom?.secretKeyRef;
    assert.deepEqual({ name: ref?.name, key: ref?.key }, { name: 'wandb', key: 'api-key' });

    const nodeFiles = everyFile(join(dirname(stack.bucketsDir), 'nodes'));
    const logs = nodeFiles.filter((f) => f.path.endsWith('container.log'));
    assert.ok(logs.some((f) => f.text.includes(`sha256(WANDB_API_KEY) = ${sha256(SECRET)}`)), 'the trainer got the secret');
    assertNowhere(SECRET, {
      'the Jobs': JSON.stringify(objects.jobs),
      'the pods': JSON.stringify(objects.pods),
      'the events': JSON.stringify(events),
      ...Object.fromEntries(nodeFiles.map((f) => [`node file ${f.path}`, f.text])),
      ...(await rawHistories(stack.taskQueue)),
      'the run result': JSON.stringify(result),
    });
  });

  it('a command that prints its secret shows *** in the last line its pod publishes, which its run keeps', async () => {
    const example = JSON.parse(readFileSync(join(repoRoot, 'examples', 'run.json'), 'utf8')) as RunSpecInput;
    const spec: RunSpecInput = {
      ...example,
      backend: 'gke',
      resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
      recovery: { ...example.recovery, pollSeconds: 0.3 },
      command: ['node', '-e', 'console.log(`logged in with ${process.env.WANDB_API_KEY}, ok`)'],
      secrets: { WANDB_API_KEY: 'k8s://wandb/api-key' },
    };
    const env = await testEnv();
    const workflowId = `${stack.taskQueue}-secret-printed`;
    const handle = await env.client.workflow.start('trainingRun', { taskQueue: stack.taskQueue, workflowId, args: [spec] });
    const result = (await handle.result()) as RunResult;
    assert.equal(result.status, 'completed');
    // The pod published it as its annotation sterna/last-line; the pod is gone with the run's release, the line is in the run.
    assert.equal((await handle.query(statusQuery)).lastLine, 'logged in with ***, ok');
    const nodeFiles = everyFile(join(dirname(stack.bucketsDir), 'nodes'));
    assert.ok(nodeFiles.some((f) => f.path.endsWith('container.log') && f.text.includes(`logged in with ${SECRET}`)), 'the command did print it');
    assertNowhere(SECRET, await rawHistories(stack.taskQueue));
  });
});
