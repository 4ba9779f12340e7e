/**
 * Which Node.js Sterna's processes run on (scripts/node-runtime.js, scripts/bootstrap.js):
 * the test process itself, the `node` its children find on PATH, an emulator VM's
 * trainer, and the worker as `npm run worker`'s launcher starts it, which reports its
 * version in its metrics (`sterna_node_info`). On a machine whose own node is older, the
 * launcher run by that node still starts the worker on the cached supported one.
 */
import { strict as assert } from 'node:assert';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { InstancesClient, ZoneOperationsClient } from '@google-cloud/compute';
import { eventually, type Spawned } from '../helpers/processes';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';
import { startStack, type Stack } from '../helpers/stack';
import { freePort } from '../helpers/temporal';

const repoRoot = join(__dirname, '..', '..', '..');

interface NodeRuntime {
  NODE_MAJOR: number;
  NODE_VERSION: string;
  isSupported(version: string): boolean;
  cachedNodePath(env?: NodeJS.ProcessEnv): string;
  isCached(binary: string, env?: NodeJS.ProcessEnv): boolean;
  machineNode(env?: NodeJS.ProcessEnv): { path: string; version: string } | undefined;
  ensureNode(options: { env?: NodeJS.ProcessEnv; version?: string; execPath?: string; log?: (line: string) => void }): { path: string; version: string; source: string };
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const runtime = require(join(repoRoot, 'scripts', 'node-runtime.js')) as NodeRuntime;
const major = (version: string): number => Number(version.replace(/^v/, '').split('.')[0]);

describe('the Node.js runtime of Sterna and its tests', function () {
  this.timeout(240_000);

  it('the test process, and the `node` its child processes find on PATH, are a supported Node.js', () => {
    assert.ok(major(process.version) >= runtime.NODE_MAJOR, `mocha runs on ${process.version} (${process.execPath})`);
    const onPath = execFileSync('node', ['-p', 'JSON.stringify({ version: process.version, execPath: process.execPath })'], { encoding: 'utf8' });
    const child = JSON.parse(onPath) as { version: string; execPath: string };
    assert.ok(major(child.version) >= runtime.NODE_MAJOR, `\`node\` on PATH is ${child.version} (${child.execPath})`);
    // Either the machine's own node is supported and runs everything, or everything runs on the cached build.
    if (runtime.isCached(process.execPath)) assert.equal(child.version, process.version);
  });

  it('the bootstrap decides: a supported node is used as it is, an older one gets the cached build', () => {
    const cache = mkdtempSync(join(tmpdir(), 'sterna-node-cache-'));
    try {
      const env = { ...process.env, XDG_CACHE_HOME: cache };
      const own = runtime.ensureNode({ env, version: `v${runtime.NODE_MAJOR}.0.0`, execPath: '/opt/node/bin/node' });
      assert.deepEqual({ path: own.path, source: own.source }, { path: '/opt/node/bin/node', source: 'own' });

      // The cached build already there (this machine's, linked into a fresh cache): found, not installed again.
      const cached = runtime.cachedNodePath(env);
      assert.ok(cached.startsWith(join(cache, 'sterna') + '/'), cached);
      mkdirSync(dirname(cached), { recursive: true });
      symlinkSync(process.execPath, cached);
      const lines: string[] = [];
      const old = runtime.ensureNode({ env, version: 'v20.20.2', execPath: '/usr/bin/node', log: (l) => lines.push(l) });
      assert.deepEqual({ path: old.path, source: old.source, version: old.version, logged: lines }, { path: cached, source: 'cached', version: process.version, logged: [] });

      // A process launched through the link asks PATH which node the machine has; node_modules/.bin does not count.
      const bin = join(cache, 'node_modules', '.bin');
      const machineBin = join(cache, 'machine');
      mkdirSync(bin, { recursive: true });
      mkdirSync(machineBin);
      symlinkSync(cached, join(bin, 'node'));
      writeFileSync(join(machineBin, 'node'), '#!/bin/sh\necho v20.20.2\n', { mode: 0o755 });
      const pathEnv = { ...env, PATH: [bin, machineBin].join(delimiter) };
      assert.deepEqual(runtime.machineNode(pathEnv), { path: join(machineBin, 'node'), version: 'v20.20.2' });
      assert.equal(runtime.ensureNode({ env: pathEnv, version: process.version, execPath: cached }).source, 'cached');
      writeFileSync(join(machineBin, 'node'), `#!/bin/sh\necho v${runtime.NODE_MAJOR}.1.0\n`, { mode: 0o755 });
      assert.deepEqual(runtime.ensureNode({ env: pathEnv, version: process.version, execPath: cached }), {
        path: join(machineBin, 'node'),
        version: `v${runtime.NODE_MAJOR}.1.0`,
        source: 'own',
        machine: { path: join(machineBin, 'node'), version: `v${runtime.NODE_MAJOR}.1.0` },
      });
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  });

  describe('an emulator VM', () => {
    let emu: TestEmulator;
    before(async () => {
      emu = await startTestEmulator({ timeFactor: 20 });
    });
    after(async () => {
      await emu?.stop();
    });

    it('runs its trainer on the node the tests run on', async () => {
      const instances = new InstancesClient(emu.clientOptions);
      const operations = new ZoneOperationsClient(emu.clientOptions);
      const zone = 'us-central1-a';
      const [lro] = await instances.insert({
        project: 'node-runtime-test',
        zone,
        instanceResource: {
          name: 'node-version',
          machineType: `zones/${zone}/machineTypes/g2-standard-4`,
          scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'STOP', onHostMaintenance: 'TERMINATE', automaticRestart: false },
          metadata: { items: [{ key: 'startup-script', value: `node -p 'JSON.stringify({ trainerNode: process.version })'` }] },
          disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: 'projects/debian-cloud/global/images/family/debian-12', diskSizeGb: '50' } }],
          networkInterfaces: [{ network: 'global/networks/default' }],
        },
      });
      for (;;) {
        const [op] = await operations.wait({ project: 'node-runtime-test', zone, operation: lro.latestResponse.name as string });
        assert.ok(!op.error, JSON.stringify(op.error));
        if (op.status === 'DONE') break;
      }
      const output = await eventually('the startup script to print its node', async () => {
        const [serial] = await instances.getSerialPortOutput({ project: 'node-runtime-test', zone, instance: 'node-version' });
        const line = (serial.contents ?? '').split('\n').find((l) => l.startsWith('{"trainerNode"'));
        return line ? (JSON.parse(line) as { trainerNode: string }) : undefined;
      });
      assert.deepEqual(output, { trainerNode: process.version });
    });
  });

  describe('the worker', () => {
    let stack: Stack;
    const workers: Spawned[] = [];
    before(async () => {
      stack = await startStack();
    });
    after(async () => {
      for (const worker of workers) await worker.kill('SIGTERM');
      await stack?.stop();
    });

    /** Starts `npm run worker`'s launcher with `node`, and reads the worker's sterna_node_info from its metrics. */
    async function workerNode(node: string, name: string): Promise<{ version: string; major: string }> {
      const port = await freePort();
      const worker = stack.spawnWorker(
        { STERNA_PRICES: 'catalog', STERNA_METRICS_PORT: String(port), STERNA_METRICS_HOST: '127.0.0.1', STERNA_SDK_METRICS_PORT: String(await freePort()) },
        { node, launcher: true, logName: name },
      );
      workers.push(worker);
      const info = await eventually(
        `${name}'s metrics`,
        async () => {
          const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
          const match = /^sterna_node_info\{version="([^"]+)",major="(\d+)"\} 1$/m.exec(text);
          return match ? { version: match[1], major: match[2] } : undefined;
        },
        120_000,
        500,
      );
      await worker.kill('SIGTERM');
      return info;
    }

    it('started by the launcher, reports the supported node it runs on', async () => {
      const { version, major: reported } = await workerNode(process.execPath, 'worker');
      assert.deepEqual({ version, major: Number(reported) }, { version: process.version, major: major(process.version) });
    });

    it('started by the launcher on an older node, runs on the cached supported one', async function () {
      // The machine's own node, when it is older than the supported line (this machine's is 20).
      const machine = runtime.machineNode();
      if (!machine || runtime.isSupported(machine.version)) this.skip();
      const launched = spawnSync(machine!.path, ['-p', 'process.version'], { encoding: 'utf8' });
      assert.equal(launched.stdout.trim(), machine!.version);
      const { version } = await workerNode(machine!.path, 'worker-from-old-node');
      assert.equal(version, `v${runtime.NODE_VERSION}`);
    });
  });
});
