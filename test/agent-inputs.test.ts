/**
 * The agent (activities/agent/sterna-agent.sh) as it really runs: the startup script of
 * an emulator VM, reading its inputs from the VM's metadata server, encoded by
 * `agentAttributes`. The trainer is a recorder that writes down the argv and the exact
 * environment it was exec'd with (from /proc/self/environ), so each test proves what
 * reached it and that nothing else ran.
 */
import { strict as assert } from 'node:assert';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { InstancesClient, ZoneOperationsClient } from '@google-cloud/compute';
import { agentAttributes, agentScript, type AgentInputs } from '../activities/agent/script';
import { packWorkdir } from '../client/workdir';
import { eventually } from './helpers/processes';
import { startTestEmulator, type TestEmulator } from './helpers/emulator';

const PROJECT = 'agent-test';
const ZONE = 'us-central1-a';

interface TrainerRecord {
  /** The name the trainer was started under (the recorder is linked under several). */
  program: string;
  argv: string[];
  env: Record<string, string>;
}

interface AgentRun {
  phase?: string;
  exit?: string;
  /** What the agent published as its last checkpoint (`sterna/checkpoint`). */
  checkpoint?: string;
  /** The sha256 of the workdir it unpacked (`sterna/workdir`). */
  workdir?: string;
  /** Every trainer start of this run (the recorder keys them by STERNA_RUN_ID). */
  trainers: TrainerRecord[];
  serialLog: string;
  /** Every file under the VM's directory (its work directory included), by name. */
  files: string[];
  /** All those files' bytes, as one text to search. */
  contents: string;
}

// Writes one JSON line per start: the program name, argv after it, and the environment
// exactly as exec'd (the kernel's copy, untouched by node).
const RECORDER = (records: string) => `#!${process.execPath}
const fs = require('fs');
const path = require('path');
const env = {};
for (const entry of fs.readFileSync('/proc/self/environ', 'latin1').split('\\0')) {
  if (entry === '') continue;
  const eq = entry.indexOf('=');
  env[Buffer.from(entry.slice(0, eq), 'latin1').toString('utf8')] = Buffer.from(entry.slice(eq + 1), 'latin1').toString('utf8');
}
const line = JSON.stringify({ program: path.basename(process.argv[1]), argv: process.argv.slice(2), env });
fs.appendFileSync(${JSON.stringify(records)}, line + '\\n');
`;

function filesText(dir: string): string {
  return readdirSync(dir, { withFileTypes: true })
    .map((entry) => (entry.isDirectory() ? filesText(join(dir, entry.name)) : entry.isFile() ? readFileSync(join(dir, entry.name), 'latin1') : ''))
    .join('\n');
}

function fileNames(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => [entry.name, ...(entry.isDirectory() ? fileNames(join(dir, entry.name)) : [])]);
}

describe('the agent runs exactly the trainer it was given', function () {
  this.timeout(120_000);
  let emu: TestEmulator;
  let instances: InstancesClient;
  let operations: ZoneOperationsClient;
  let scratch: string;
  let bin: string;
  let records: string;
  let baseline: AgentRun;
  let vms = 0;

  async function done(operation: string): Promise<void> {
    for (;;) {
      const [op] = await operations.wait({ project: PROJECT, zone: ZONE, operation });
      if (op.error) throw new Error(`operation ${operation} failed: ${JSON.stringify(op.error)}`);
      if (op.status === 'DONE') return;
    }
  }

  type Inputs = Pick<AgentInputs, 'runId' | 'argv' | 'env'> & Partial<AgentInputs> & { serviceAccounts?: { email: string; scopes: string[] }[] };

  /** Boots a spot VM whose startup script is the agent with these inputs; returns its name. */
  async function bootAgent({ serviceAccounts, ...inputs }: Inputs): Promise<string> {
    const name = `agent-${++vms}`;
    const attributes = agentAttributes({ attempt: 1, datasets: [], checkpointUri: `file://${scratch}/ckpt`, pollSeconds: 0.2, ...inputs });
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
    return name;
  }

  /** Boots a VM whose startup script is the agent, waits for the agent to exit, and reads what happened. */
  async function runAgent(inputs: Inputs): Promise<AgentRun> {
    const name = await bootAgent(inputs);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const view = (await emu.instances()).find((i) => i.name === name);
      if (view?.exitCode !== undefined) {
        const guest = view.guestAttributes.sterna ?? {};
        const trainers = existsSync(records)
          ? readFileSync(records, 'utf8')
              .split('\n')
              .filter(Boolean)
              .map((line) => JSON.parse(line) as TrainerRecord)
              .filter((r) => r.env.STERNA_RUN_ID === inputs.runId)
          : [];
        const files = fileNames(view.dir);
        const run = { phase: guest.phase, exit: guest.exit, checkpoint: guest.checkpoint, workdir: guest.workdir, trainers, serialLog: readFileSync(join(view.dir, 'serial-port.log'), 'utf8'), files, contents: filesText(view.dir) };
        const [del] = await instances.delete({ project: PROJECT, zone: ZONE, instance: name });
        await done(del.latestResponse.name as string);
        return run;
      }
      if (Date.now() > deadline) throw new Error(`the agent on ${name} did not exit`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  before(async () => {
    emu = await startTestEmulator({ timeFactor: 20 });
    instances = new InstancesClient(emu.clientOptions);
    operations = new ZoneOperationsClient(emu.clientOptions);
    scratch = mkdtempSync(join(tmpdir(), 'sterna-agent-inputs-'));
    bin = join(scratch, 'bin');
    records = join(scratch, 'trainers.jsonl');
    mkdirSync(bin);
    writeFileSync(join(bin, 'record'), RECORDER(records));
    chmodSync(join(bin, 'record'), 0o755);
    // The same recorder under names an argv or env parser would misread.
    symlinkSync(join(bin, 'record'), join(bin, '-trainer'));
    symlinkSync(join(bin, 'record'), join(bin, 'a=b'));
    baseline = await runAgent({ runId: 'baseline', argv: [join(bin, 'record')], env: {} });
  });
  after(async () => {
    await emu?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  describe('a workdir (client/workdir packs it; the agent fetches, checks and unpacks it)', () => {
    /** A packed project whose run.sh records where it ran and what data it found, then execs the recorder. */
    async function packedProject(name: string): Promise<{ uri: string; sha256: string; data: string }> {
      const root = join(scratch, name);
      mkdirSync(join(root, 'data'), { recursive: true });
      const data = `rows for ${name}\n`;
      writeFileSync(join(root, 'data', 'input.txt'), data);
      writeFileSync(join(root, 'run.sh'), '#!/bin/bash\nset -e\npwd > ran-in.txt\ncp data/input.txt seen.txt\nexec "$@"\n');
      chmodSync(join(root, 'run.sh'), 0o755);
      writeFileSync(join(root, '.sternaignore'), 'left-out.txt\n');
      writeFileSync(join(root, 'left-out.txt'), 'not packed');
      const packed = await packWorkdir(root);
      const object = join(scratch, 'bucket', 'workdirs', `${packed.sha256}.tar.gz`);
      mkdirSync(dirname(object), { recursive: true });
      writeFileSync(object, packed.data);
      return { uri: `file://${object}`, sha256: packed.sha256, data };
    }

    it('unpacks it into the work directory and runs the command there (an executable of the workdir, by a relative path)', async () => {
      const project = await packedProject('unpacked');
      const run = await runAgent({ runId: 'workdir', argv: ['./run.sh', join(bin, 'record'), 'arg'], env: {}, workdir: { uri: project.uri, sha256: project.sha256 } });
      assert.equal(run.exit, '0', run.serialLog);
      assert.deepEqual(run.trainers.map((t) => [t.program, t.argv]), [['record', ['arg']]]);
      assert.ok(run.files.includes('run.sh') && run.files.includes('input.txt') && run.files.includes('seen.txt'), run.files.join(' '));
      assert.ok(!run.files.includes('left-out.txt'), '.sternaignore is honoured');
      assert.ok(run.contents.includes(project.data), 'the command read the workdir\'s data file by its relative path');
      assert.equal(run.workdir, project.sha256, 'the agent says which workdir it unpacked');
    });

    it('a workdir that is missing or does not match its sha256 ends the agent with 69 before the command runs', async () => {
      const project = await packedProject('mismatch');
      const other = await packedProject('other');
      const mismatch = await runAgent({ runId: 'workdir-sha', argv: ['./run.sh', join(bin, 'record')], env: {}, workdir: { uri: project.uri, sha256: other.sha256 } });
      const missing = await runAgent({ runId: 'workdir-missing', argv: ['./run.sh', join(bin, 'record')], env: {}, workdir: { uri: `${project.uri}.gone`, sha256: project.sha256 } });
      for (const run of [mismatch, missing]) {
        assert.deepEqual([run.phase, run.exit, run.trainers], ['failed', '69', []], run.serialLog);
        assert.ok(!run.files.includes('run.sh'), 'nothing was unpacked');
      }
      assert.match(mismatch.serialLog, new RegExp(`workdir: .* has sha256 ${project.sha256}, not the ${other.sha256} the run was started with`));
      assert.match(missing.serialLog, /workdir: .*\.gone could not be fetched/);
      const malformed = await runAgent({ runId: 'workdir-malformed', argv: [join(bin, 'record')], env: {}, workdir: { uri: project.uri, sha256: 'not-a-sha256' } });
      assert.deepEqual([malformed.phase, malformed.exit, malformed.trainers], ['failed', '65', []]);
    });
  });

  it('publishes GCE\'s preemption notice as a guest attribute the moment the metadata server says so', async () => {
    const name = await bootAgent({ runId: 'notice', argv: ['sleep', '60'], env: {} });
    const guest = async () => (await emu.instances()).find((i) => i.name === name)?.guestAttributes.sterna ?? {};
    await eventually('training', async () => ((await guest()).phase === 'training' ? true : undefined), 30_000, 100);
    assert.equal((await guest()).preempted, undefined, 'no notice before the preemption');
    await emu.preempt(ZONE, name);
    await eventually('the notice published', async () => ((await guest()).preempted === 'TRUE' ? true : undefined), 30_000, 50);
    const [del] = await instances.delete({ project: PROJECT, zone: ZONE, instance: name });
    await done(del.latestResponse.name as string);
  });

  it('passes hostile argv items and env values through byte for byte, and adds nothing', async () => {
    const argv = [join(bin, 'record'), '-x', '--', '-', '--help', 'X=1', 'a b', `q'uo"te`, '$(touch pwned)', '`touch pwned`', '', '*', 'ünï€😀', '\\', 'line1\nline2', 'trailing\n\n', ' ', '%s%n'];
    const env = {
      EQUALS: 'a=b=c',
      NEWLINES: 'x\nINJECTED=1\n',
      DASH: '-i',
      QUOTES: `'"$(touch pwned)"\`touch pwned\``,
      EMPTY: '',
      SECRET_TOKEN: 'hunter2',
    };
    const run = await runAgent({ runId: 'hostile', argv, env });
    assert.equal(run.exit, '0');
    assert.equal(run.trainers.length, 1, 'the trainer ran once');
    const [trainer] = run.trainers;
    assert.equal(trainer.program, 'record');
    assert.deepEqual(trainer.argv, argv.slice(1));
    for (const [key, value] of Object.entries(env)) assert.equal(trainer.env[key], value, `env ${key}`);
    // Exactly the variables a plain run gets, plus the spec's: nothing injected.
    const expected = [...Object.keys(baseline.trainers[0].env), ...Object.keys(env)].sort();
    assert.deepEqual(Object.keys(trainer.env).sort(), expected);
    assert.ok(!run.files.includes('pwned'), 'no smuggled command ran');
  });

  it('gives a gang\'s node its rank and where rank 0 listens (rank 0: its own internal address), and publishes checkpoints from rank 0 only', async () => {
    // A trainer that writes a checkpoint, then records what it was given.
    const argv = ['bash', '-c', 'mkdir -p "$STERNA_CHECKPOINT_DIR" && echo "{}" > "$STERNA_CHECKPOINT_DIR/step-5.json" && exec "$0"', join(bin, 'record')];
    const lead = await runAgent({ runId: 'gang-lead', argv, env: {}, gang: { rank: 0, nodes: 2, masterPort: 29500 } });
    const other = await runAgent({ runId: 'gang-other', argv, env: {}, gang: { rank: 1, nodes: 2, masterAddr: '127.64.0.9', masterPort: 29500 } });
    assert.equal(lead.exit, '0', lead.serialLog);
    assert.equal(other.exit, '0', other.serialLog);
    const gangVars = ['STERNA_MASTER_ADDR', 'STERNA_MASTER_PORT', 'STERNA_NODE_RANK', 'STERNA_NUM_NODES'];
    // `_` is the last command's path, which the test's bash wrapper keeps to itself: not the agent's doing.
    const keys = (run: AgentRun) => Object.keys(run.trainers[0].env).filter((k) => k !== '_');
    for (const run of [lead, other]) assert.deepEqual(keys(run).sort(), [...keys(baseline), ...gangVars].sort());
    const { env: leadEnv } = lead.trainers[0];
    assert.deepEqual([leadEnv.STERNA_NODE_RANK, leadEnv.STERNA_NUM_NODES, leadEnv.STERNA_MASTER_PORT], ['0', '2', '29500']);
    assert.match(leadEnv.STERNA_MASTER_ADDR, /^127\.\d{2,3}\.\d{1,3}\.\d{1,3}$/, 'rank 0 listens on its own internal address');
    const { env: otherEnv } = other.trainers[0];
    assert.deepEqual([otherEnv.STERNA_NODE_RANK, otherEnv.STERNA_MASTER_ADDR], ['1', '127.64.0.9']);
    assert.match(lead.checkpoint ?? '', /^5 [0-9a-f]{64} /);
    assert.equal(other.checkpoint, undefined, 'rank 1 publishes no checkpoint');
  });

  it('runs a program whose name looks like an assignment or an option', async () => {
    const path = `${bin}:${baseline.trainers[0].env.PATH}`;
    const equals = await runAgent({ runId: 'equals-name', argv: [join(bin, 'a=b'), 'X=1'], env: {} });
    assert.equal(equals.exit, '0');
    assert.deepEqual(
      equals.trainers.map((t) => [t.program, t.argv]),
      [['a=b', ['X=1']]],
    );
    const dash = await runAgent({ runId: 'dash-name', argv: ['-trainer', '--version'], env: { PATH: path } });
    assert.equal(dash.exit, '0');
    assert.deepEqual(
      dash.trainers.map((t) => [t.program, t.argv]),
      [['-trainer', ['--version']]],
    );
  });

  it('treats command ["X=1"] as a program that does not exist, not as env printing the secrets', async () => {
    const run = await runAgent({ runId: 'assignment-argv', argv: ['X=1'], env: { SECRET_TOKEN: 'hunter2-in-the-log' } });
    assert.equal(run.exit, '127', 'command not found');
    assert.equal(run.phase, 'exited');
    assert.deepEqual(run.trainers, []);
    assert.ok(!run.serialLog.includes('hunter2-in-the-log'), 'the environment is not printed to the serial log');
  });

  it('refuses a NUL inside an env value instead of splitting it into an injected command', async () => {
    const run = await runAgent({
      runId: 'nul-env',
      argv: [join(bin, 'record')],
      env: { X: 'x\u0000INJECTED=1\u0000/bin/sh\u0000-c\u0000touch pwned' },
    });
    assert.equal(run.phase, 'failed');
    assert.equal(run.exit, '65');
    assert.deepEqual(run.trainers, [], 'nothing ran');
    assert.ok(!run.files.includes('pwned'), 'no smuggled command ran');
  });

  it('refuses a NUL inside a dataset URI instead of staging a smuggled extra dataset', async () => {
    const data = join(scratch, 'data.txt');
    writeFileSync(data, 'ok');
    // Split at the NULs, this would read as two datasets: data.txt, and /etc/hostname as "stolen".
    const datasets = [{ uri: `file://${data}\u0000data.txt\u0000file:///etc/hostname`, path: 'stolen' }];
    const run = await runAgent({ runId: 'nul-dataset', argv: [join(bin, 'record')], env: {}, datasets });
    assert.equal(run.phase, 'failed');
    assert.equal(run.exit, '65');
    assert.deepEqual(run.trainers, []);
    assert.ok(!run.files.includes('stolen'), 'nothing was staged');
  });
  describe('secrets from Secret Manager', () => {
    const CLOUD_PLATFORM = 'https://www.googleapis.com/auth/cloud-platform';
    const LEAST = ['https://www.googleapis.com/auth/devstorage.read_write', 'https://www.googleapis.com/auth/logging.write'];
    // Spaces, quotes, a command substitution, non-ASCII and trailing newlines: all must arrive as they are.
    const VALUE = ` hf_$(touch pwned)'"\`x\` ünï€ =\n\n`;
    const ref = (secret: string) => `gcp-secret-manager://projects/${PROJECT}/secrets/${secret}/versions/latest`;
    before(async () => {
      await emu.admin.addSecretVersion(PROJECT, 'hf-token', 'an older version');
      await emu.admin.addSecretVersion(PROJECT, 'hf-token', VALUE);
      await emu.admin.addSecretVersion(PROJECT, 'team-b-only', 'not for this VM', { accessors: ['team-b@agent-test.iam.gserviceaccount.com'] });
      await emu.admin.addSecretVersion(PROJECT, 'has-nul', 'a\u0000b');
    });

    it('gives the trainer the exact value, in its environment only: not in the serial log nor any file of the VM', async () => {
      const run = await runAgent({
        runId: 'secret-ok',
        argv: [join(bin, 'record')],
        env: {},
        secrets: { HF_TOKEN: ref('hf-token') },
        serviceAccounts: [{ email: 'default', scopes: [...LEAST, CLOUD_PLATFORM] }],
      });
      assert.equal(run.exit, '0', run.serialLog);
      assert.equal(run.trainers.length, 1);
      assert.equal(run.trainers[0].env.HF_TOKEN, VALUE);
      // Nothing else: the same variables as a plain run, plus the secret's (bash's own `$_` aside).
      const names = (env: Record<string, string>) => Object.keys(env).filter((k) => k !== '_');
      assert.deepEqual(names(run.trainers[0].env).sort(), [...names(baseline.trainers[0].env), 'HF_TOKEN'].sort());
      assert.ok(!run.serialLog.includes('hf_'), 'the serial log does not hold the secret');
      // The recorder's own file holds it (it records the trainer's environment); nothing else does.
      const trainerRecords = readFileSync(records, 'utf8');
      assert.ok(!run.contents.replace(trainerRecords, '').includes('hf_$(touch pwned)'), 'no file of the VM holds the secret');
      assert.ok(!run.files.includes('pwned'), 'the value was never evaluated');
    });

    it('a VM with the least-privilege scopes only cannot read it: exit 68, the trainer never runs, the log says why', async () => {
      const run = await runAgent({ runId: 'secret-scope', argv: [join(bin, 'record')], env: {}, secrets: { HF_TOKEN: ref('hf-token') }, serviceAccounts: [{ email: 'default', scopes: LEAST }] });
      assert.equal(run.exit, '68');
      assert.equal(run.phase, 'failed');
      assert.deepEqual(run.trainers, []);
      assert.match(run.serialLog, /secret HF_TOKEN could not be read: HTTP 403 .*insufficient authentication scopes/);
    });

    it('refuses a secret its service account may not read, a VM with no service account, and a value no environment can carry', async () => {
      const sa = [{ email: 'default', scopes: [CLOUD_PLATFORM] }];
      const denied = await runAgent({ runId: 'secret-iam', argv: [join(bin, 'record')], env: {}, secrets: { B: ref('team-b-only') }, serviceAccounts: sa });
      assert.equal(denied.exit, '68');
      assert.match(denied.serialLog, /secret B could not be read: HTTP 403 .*secretmanager.versions.access/);
      const noAccount = await runAgent({ runId: 'secret-nosa', argv: [join(bin, 'record')], env: {}, secrets: { HF_TOKEN: ref('hf-token') } });
      assert.equal(noAccount.exit, '68');
      assert.match(noAccount.serialLog, /no service-account token/);
      const nul = await runAgent({ runId: 'secret-nul', argv: [join(bin, 'record')], env: {}, secrets: { N: ref('has-nul') }, serviceAccounts: sa });
      assert.equal(nul.exit, '68');
      assert.match(nul.serialLog, /NUL byte/);
      for (const run of [denied, noAccount, nul]) assert.deepEqual(run.trainers, []);
    });

    it('command ["X=1"] or ["A=1", "printenv"] prints neither the secrets nor the environment', async () => {
      for (const argv of [['X=1'], ['A=1', 'printenv'], ['=', 'env']]) {
        const run = await runAgent({ runId: `secret-argv-${argv.length}-${argv[0].length}`, argv, env: { WANDB_MODE: 'offline-in-the-env' }, secrets: { HF_TOKEN: ref('hf-token') }, serviceAccounts: [{ email: 'default', scopes: [CLOUD_PLATFORM] }] });
        assert.equal(run.exit, '127', `${JSON.stringify(argv)}: a program of that name does not exist`);
        assert.ok(!run.serialLog.includes('hf_'), `${JSON.stringify(argv)}: no secret in the serial log`);
        assert.ok(!run.serialLog.includes('offline-in-the-env'), `${JSON.stringify(argv)}: no environment in the serial log`);
      }
    });
  });
});
