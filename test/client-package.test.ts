/**
 * The client as another service installs it (issue 38, item 4): packed with `npm pack`,
 * installed into a project outside the repository, type-checked there with tsc, and run
 * from there against the test stack (the real Temporal dev server, the emulator, a Sterna
 * worker). The service is packages/client/test/service.ts.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { builtinModules } from 'node:module';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import type { Payload } from '@temporalio/common';
import { loadCodecKeys } from '../config/codec-keys';
import { ENCRYPTED_ENCODING, KEY_ID_METADATA } from '../config/payload-codec';
import { allEvents } from './helpers/histories';
import { installConsumer, packClient, PACKAGE_DIR, readJson, REPO_ROOT, typecheck, type Packed } from './helpers/packed-client';
import { exampleSpec, startStack, type Stack } from './helpers/stack';
import { testEnv, testServerAddress, uniqueTaskQueue } from './helpers/temporal';

/** What the service printed: one JSON object per line. */
type Said = Record<string, unknown>;

const text = (bytes: Uint8Array | null | undefined) => (bytes ? Buffer.from(bytes).toString('utf8') : undefined);

/** Every payload in a raw history, with where it is; search attributes are plain by design and left out. */
function payloadsIn(node: unknown, path: string, out: { path: string; payload: Payload }[] = []): { path: string; payload: Payload }[] {
  if (node === null || typeof node !== 'object' || node instanceof Uint8Array) return out;
  const payload = node as Payload;
  if (payload.data instanceof Uint8Array && payload.metadata) {
    out.push({ path, payload });
    return out;
  }
  for (const [key, value] of Object.entries(node)) {
    if (key !== 'searchAttributes') payloadsIn(value, `${path}.${key}`, out);
  }
  return out;
}

/** The module names a packed file requires or imports that are not relative paths. */
function bareSpecifiers(source: string): string[] {
  return [...source.matchAll(/(?:require\(|from |import\()\s*['"]([^'"./][^'"]*)['"]/g)].map((m) => m[1]);
}

/** `@scope/name/sub` -> `@scope/name`; `name/sub` -> `name`. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

describe('the client package, packed and installed by a service outside the repository', function () {
  this.timeout(600_000);
  let work: string;
  let service: string;
  let packed: Packed;
  let stack: Stack | undefined;

  /** Runs the service's compiled program; its lines, and its exit code. */
  async function runService(args: string[], env: NodeJS.ProcessEnv): Promise<{ said: Said[]; code: number; stderr: string }> {
    const result = await promisify(execFile)(process.execPath, [join(service, 'dist', 'service.js'), ...args], { cwd: service, env, timeout: 300_000 }).then(
      ({ stdout, stderr }) => ({ stdout, stderr, code: 0 }),
      (err: { stdout: string; stderr: string; code: number }) => ({ stdout: err.stdout, stderr: err.stderr, code: err.code }),
    );
    const said = result.stdout
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Said);
    return { said, code: result.code, stderr: result.stderr };
  }

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'sterna-client-package-'));
    assert.ok(relative(REPO_ROOT, work).startsWith('..'), 'the service lives outside the repository');
    packed = await packClient(work);
    service = join(work, 'service');
    // A service's own build needs Node's types; the client brings everything else.
    await installConsumer(service, packed, ['@types/node']);
    copyFileSync(join(PACKAGE_DIR, 'test', 'service.ts'), join(service, 'service.ts'));
    // README's example is type-checked too (compiled, never run), so it stays true.
    const readme = /```ts\n\/\/ 3\. from another service[^\n]*\n([\s\S]*?)```/.exec(readFileSync(join(REPO_ROOT, 'README.md'), 'utf8'));
    assert.ok(readme, 'README.md has its "3. from another service" example');
    writeFileSync(join(service, 'readme-example.ts'), readme[1]);
    // Strict, with Node's own module resolution (package `exports`); skipLibCheck as services
    // build, so the misuses in service.ts are what show that the declarations are real types.
    const tsconfig = { compilerOptions: { target: 'ES2022', module: 'nodenext', moduleResolution: 'nodenext', strict: true, skipLibCheck: true, types: ['node'], outDir: 'dist' }, files: ['service.ts', 'readme-example.ts'] };
    writeFileSync(join(service, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
    await typecheck(service);
  });

  after(async () => {
    await stack?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('holds the client and the plain modules it reaches, with declarations, and requires only its declared dependencies, pinned as the repository pins them', () => {
    // Nothing of the worker, the providers, the emulator, the CLI, the benchmarks or the tests.
    const top = new Set(packed.files.filter((f) => f.startsWith('dist/')).map((f) => f.split('/')[1]));
    assert.deepEqual([...top].sort(), ['activities', 'client', 'config', 'workflows']);
    // activities/ holds the worker's side effects: only the log reader comes along (runLogs).
    assert.deepEqual([...new Set(packed.files.filter((f) => f.startsWith('dist/activities/')).map((f) => f.replace(/\.(d\.ts|js)$/, '')))].sort(), ['dist/activities/logs/layout', 'dist/activities/logs/reader', 'dist/activities/logs/store']);
    // config/ holds node-only worker settings too: only the payload codec comes along.
    assert.deepEqual([...new Set(packed.files.filter((f) => f.startsWith('dist/config/')).map((f) => f.replace(/\.(d\.ts|js)$/, '')))].sort(), ['dist/config/codec-keys', 'dist/config/data-converter', 'dist/config/payload-codec']);
    for (const entry of ['client/index', 'client/plan']) {
      assert.ok(packed.files.includes(`dist/${entry}.js`) && packed.files.includes(`dist/${entry}.d.ts`), `${entry}: code and declarations`);
    }
    assert.deepEqual(Object.keys(readJson<{ exports: object }>(join(PACKAGE_DIR, 'package.json')).exports), ['.', './plan', './package.json']);

    // What the installed files require, against what the package declares.
    const installed = join(service, 'node_modules', ...packed.manifest.name.split('/'));
    const used = new Set<string>();
    for (const file of filesUnder(join(installed, 'dist'))) {
      for (const specifier of bareSpecifiers(readFileSync(file, 'utf8'))) used.add(packageOf(specifier));
    }
    const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
    const declared = packed.manifest.dependencies ?? {};
    assert.deepEqual([...used].filter((m) => !builtins.has(m)).sort(), Object.keys(declared).sort(), 'every dependency used, none undeclared');
    const root = readJson<{ dependencies: Record<string, string> }>(join(REPO_ROOT, 'package.json')).dependencies;
    for (const [name, version] of Object.entries(declared)) assert.equal(version, root[name], `${name}: the version the repository builds and tests with`);
  });

  it('without a codec key, refuses to connect, and says how to supply one or opt out', async () => {
    const empty = join(work, 'no-config');
    mkdirSync(empty);
    const env: NodeJS.ProcessEnv = { ...process.env, XDG_CONFIG_HOME: empty };
    delete env.STERNA_CODEC_KEYS;
    delete env.STERNA_CODEC_KEYS_FILE;
    const { said, code } = await runService(['connect'], env);
    assert.equal(code, 1);
    const { error } = said.at(-1) as { error: { name: string; kind: string; message: string; hint: string } };
    assert.equal(error.name, 'SternaClientError');
    assert.equal(error.kind, 'PayloadEncryption');
    assert.match(error.message, /no payload encryption key/);
    assert.match(error.hint, /STERNA_CODEC_KEYS_FILE/);
    assert.match(error.hint, /plaintextPayloads: true/);
  });

  it('starts a run with the service\'s own workdir (packed and uploaded by the installed client), follows it, reads its log, cancels it; its payloads in history are encrypted', async () => {
    stack = await startStack();
    await stack.startWorker();
    const { env } = stack;
    // Trains for minutes: long enough to be followed and cancelled mid-training.
    const base = exampleSpec();
    const specFile = join(work, 'run.json');
    writeFileSync(specFile, JSON.stringify({ ...base, command: base.command.map((arg) => (arg === '400' ? '100000' : arg)) }));
    const workflowId = `${stack.taskQueue}-from-a-service`;
    const serviceEnv = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: env.namespace };

    // The service's own working directory, packed and uploaded by the installed client
    // through the storage API (the emulator's), as a deployed service's would be to GCS.
    const workdir = join(work, 'service-workdir');
    mkdirSync(workdir);
    writeFileSync(join(workdir, 'notes.txt'), 'the service\'s own files\n');
    const { said, code, stderr } = await runService(['run', specFile, workflowId, stack.taskQueue, workdir], { ...serviceEnv, STERNA_STORAGE_ENDPOINT: stack.emulator.endpoint });
    assert.equal(code, 0, `the service failed: ${JSON.stringify(said)}\n${stderr}`);
    const line = (key: string) => said.find((s) => key in s)?.[key];
    assert.equal(line('started'), workflowId);
    const followed = line('followed') as { phases: string[]; step: number; zone: string };
    assert.equal(followed.phases.at(-1), 'training');
    assert.equal(typeof followed.step, 'number');
    assert.match(followed.zone, /^us-/);
    const uploaded = line('workdir') as { uri: string; sha256: string; uploaded: boolean; entries: number };
    assert.deepEqual([uploaded.uploaded, uploaded.entries], [true, 1]);
    assert.equal(uploaded.uri, `${base.checkpoint.uri}/workdirs/${uploaded.sha256}.tar.gz`);
    // LOGS: what the service read through the client's runLogs, from the bucket through the
    // storage API: the agent's lines of attempt 1, up to the workdir it unpacked.
    const logs = line('logs') as { attempt: number; stream: string; text: string }[];
    assert.ok(logs.length > 0 && logs.every((l) => l.attempt === 1 && l.stream === 'agent'), JSON.stringify(logs));
    assert.ok(logs.at(-1)!.text.includes(uploaded.sha256), 'the agent says it unpacked the service\'s workdir');
    assert.equal(line('cancelRequested'), true);
    assert.deepEqual((line('outcome') as { failed?: { kind: string } }).failed?.kind, 'RunFailed');
    const handle = env.client.workflow.getHandle(workflowId);
    assert.equal((await handle.describe()).status.name, 'CANCELLED');

    // The raw history, as the server stores it: every payload (the spec, updates, results,
    // failure details, the summary) is ciphertext under this test run's key.
    const payloads = payloadsIn(await allEvents(env.client, workflowId), 'events');
    assert.ok(payloads.some((p) => p.path.includes('workflowExecutionStartedEventAttributes.input')), 'the run\'s input is among them');
    // Except the patch markers, which Temporal's core writes itself, past any codec: they
    // hold the patch's id (a name in workflows/, e.g. sterna-team-sweep-by-describe) and nothing else.
    const isPatch = (p: { path: string }) => /markerRecordedEventAttributes\.details\.patch-data\./.test(p.path);
    for (const patch of payloads.filter(isPatch)) {
      const data = JSON.parse(text(patch.payload.data)!) as Record<string, unknown>;
      assert.deepEqual(Object.keys(data).filter((k) => k !== 'id' && k !== 'deprecated'), [], `${patch.path}: ${JSON.stringify(data)}`);
      assert.match(String(data.id), /^sterna-/);
    }
    const activeKey = loadCodecKeys()!.activeId;
    const plain = payloads.filter((p) => !isPatch(p) && (text(p.payload.metadata?.encoding) !== ENCRYPTED_ENCODING || text(p.payload.metadata?.[KEY_ID_METADATA]) !== activeKey));
    assert.deepEqual(plain.map((p) => `${p.path}: ${text(p.payload.metadata?.encoding)}`), []);
    assert.ok(payloads.length - payloads.filter(isPatch).length >= 3, `the run's input, its activities' inputs and results: ${payloads.length} payloads`);
  });

  it('with the explicit opt-out, the run\'s input is stored in plain text', async () => {
    const { client } = await testEnv();
    // No worker polls this queue: the run is only started, and its input read back.
    const taskQueue = uniqueTaskQueue('plaintext');
    const workflowId = `${taskQueue}-run`;
    const specFile = join(work, 'plain.json');
    writeFileSync(specFile, JSON.stringify(exampleSpec()));
    const { said, code, stderr } = await runService(['plaintext', specFile, workflowId, taskQueue], { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: client.options.namespace });
    try {
      assert.equal(code, 0, `the service failed: ${JSON.stringify(said)}\n${stderr}`);
      const [started] = await allEvents(client, workflowId);
      const input = started.workflowExecutionStartedEventAttributes!.input!.payloads![0];
      assert.equal(text(input.metadata?.encoding), 'json/plain');
      assert.equal((JSON.parse(text(input.data)!) as { name: string }).name, exampleSpec().name);
    } finally {
      await client.workflow.getHandle(workflowId).terminate('test over').catch(() => undefined);
    }
  });
});
