/**
 * A team is a Temporal namespace, and Temporal's own authorization says who may do what
 * (docs/tenancy.md). Against Sterna's Temporal server with JWT authorization switched on
 * (the default claim mapper and authorizer, keys from a JWKS this test serves), through the
 * real Temporal client, with tokens for team A, team B, an admin and the platform's worker:
 *   - A cannot start, signal, update, cancel, terminate, query, describe, list or read the
 *     history of B's runs, nor write (or read) the system namespace, where the ledgers are;
 *   - the admin can do all of it;
 *   - one worker process, with the platform's credentials (write on the system and the two
 *     team namespaces, not admin), serves all three namespaces: a run started by A in A's
 *     namespace completes, admitted by A's ledger, with the fleet in the system namespace;
 *   - a fleet workflow a team starts in its own namespace (a forged ledger naming B) gets
 *     nothing from the worker's activities: they act only for the system namespace.
 */
import { strict as assert } from 'node:assert';
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { Client, Connection, WorkflowNotFoundError, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { MockActivityEnvironment } from '@temporalio/testing';
import { startTemporalServer, type TemporalServer } from '../../processes/temporal-server-process';
import { sternaDataConverter } from '../../codec/data-converter';
import { catalogPriceBook } from '../../config/price-book';
import type { GceConfig } from '../../config/worker-config';
import { publishExampleLocally } from '../../examples/publish';
import { observerOptions } from '../../activities/fleet';
import { NamespaceClients, RunLocator } from '../../activities/namespaces';
import { ownerRunIn } from '../../activities/reaper';
import { createTeamActivities } from '../../activities/teams';
import { createAdmissionGate } from '../../activities/teams/admission-gate';
import type { ComputeProvider } from '../../activities/providers/provider';
import type { Whoami } from '../../client/identity';
import { buildGceProvider } from '../../workers/providers';
import { createSternaWorkers } from '../../workers/worker';
import { setBudgetUpdate, statusQuery } from '../../workflows/messages';
import { admissionOfQuery, admissionRequestSignal, setTeamLimitsUpdate, teamQuery, teamWorkflowId, type AdmissionAsked } from '../../workflows/teams/contract';
import type { TeamView } from '../../workflows/teams/rules';
import type { RunSpecInput } from '../../workflows/spec';
import type { ProvisionRequest } from '../../workflows/activity-contract';
import { executionToken, ownerLabels, resourceName, runKey } from '../../workflows/naming';
import { ProvisioningModel, type Offer } from '../../workflows/types';
import type { RunResult, RunStatus } from '../../workflows/run/views';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';
import { spawnLogged } from '../helpers/processes';
import { typesIn } from '../helpers/runs';
import { exampleSpec, PROJECT } from '../helpers/stack';
import { TEST_SYSTEM_NAMESPACE, TEST_TEAM_NAMESPACES, uniqueTaskQueue, workflowBundle } from '../helpers/temporal';

const execFileP = promisify(execFile);

/** gRPC's status code for a caller without the permission. */
const PERMISSION_DENIED = 7;
const SYSTEM = TEST_SYSTEM_NAMESPACE;
const [TEAM_A, TEAM_B] = TEST_TEAM_NAMESPACES;

const base64url = (value: object | Buffer) => (Buffer.isBuffer(value) ? value : Buffer.from(JSON.stringify(value))).toString('base64url');

/** An RS256 JWT as an identity provider would issue it. */
function token(key: KeyObject, kid: string, subject: string, permissions: string[], expiresInSeconds = 3600): string {
  const now = Math.floor(Date.now() / 1000);
  const signingInput = `${base64url({ alg: 'RS256', typ: 'JWT', kid })}.${base64url({ sub: subject, permissions, iat: now - 7200, exp: now + expiresInSeconds })}`;
  return `${signingInput}.${base64url(sign('sha256', Buffer.from(signingInput), key))}`;
}

/** The gRPC status a failed call ended with (the client wraps it in a ServiceError or a WorkflowUpdate/Query failure). */
function grpcCode(err: unknown): number | undefined {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (typeof e.code === 'number') return e.code;
  }
  return undefined;
}

/** 'allowed' when the call succeeds, its gRPC code when the server refuses it. */
async function outcome(call: () => Promise<unknown>): Promise<'allowed' | number> {
  try {
    await call();
    return 'allowed';
  } catch (err) {
    const code = grpcCode(err);
    if (code === undefined) throw err;
    return code;
  }
}

/** A run that trains long enough (40 minutes) for every check below to find it running. */
function longSpec(): RunSpecInput {
  const base = exampleSpec();
  return { ...base, command: ['node', 'trainer.js', '--data', 'data/train.csv', '--steps', '100000', '--step-ms', '25'], labels: { project: 'tenancy' } };
}

describe('tenancy: a team is a namespace, enforced by Temporal\'s JWT authorization', function () {
  this.timeout(20 * 60_000);
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = 'sterna-tenancy-key';
  const tokens = {
    a: token(privateKey, kid, 'alice@team-a', [`${TEAM_A}:write`]),
    b: token(privateKey, kid, 'bob@team-b', [`${TEAM_B}:write`]),
    admin: token(privateKey, kid, 'admin', ['temporal-system:admin']),
    // The platform's worker: write on the namespaces it serves, no system-wide role.
    platform: token(privateKey, kid, 'sterna-worker', [`${SYSTEM}:write`, `${TEAM_A}:write`, `${TEAM_B}:write`]),
  };
  const taskQueue = uniqueTaskQueue('tenancy');
  let jwks: Server;
  let server: TemporalServer;
  let emulator: TestEmulator;
  let dir: string;
  let workerConnection: NativeConnection;
  let workers: { namespace: string; worker: Worker }[] = [];
  let running: Promise<unknown> | undefined;
  const connections: Connection[] = [];
  let bRun: WorkflowHandle;
  let namespaces: NamespaceClients;
  let provider: ComputeProvider;

  before(async () => {
    jwks = createServer((req, res) => {
      if (req.url !== '/jwks.json') return void res.writeHead(404).end();
      const jwk = { ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
    // Every namespace gets Sterna's search attributes at creation (the server's --namespace and --search-attribute).
    server = await startTemporalServer({
      headless: true,
      namespaces: [SYSTEM, TEAM_A, TEAM_B],
      jwt: { jwksUrl, adminToken: tokens.admin },
      dynamicConfig: { 'history.timerProcessorMaxTimeShift': '10ms' },
    });
    dir = mkdtempSync(join(tmpdir(), 'sterna-tenancy-'));
    const bucketsDir = join(dir, 'buckets');
    publishExampleLocally(bucketsDir);
    emulator = await startTestEmulator({ stateDir: join(dir, 'emulator'), timeFactor: 10, bucketsDir });
    const gce: GceConfig = { project: PROJECT, emulatorEndpoint: { host: '127.0.0.1', port: emulator.port, protocol: 'http' }, localBucketsDir: bucketsDir };
    provider = buildGceProvider(gce, catalogPriceBook(), 200);

    // tls: false: this server serves plain gRPC, and an API key alone would make the client ask for TLS.
    workerConnection = await NativeConnection.connect({ address: server.address, apiKey: tokens.platform, tls: false });
    const dataConverter = sternaDataConverter();
    namespaces = new NamespaceClients({ system: SYSTEM, teams: [TEAM_A, TEAM_B], mode: 'namespaces' }, (namespace) => new Client({ connection: workerConnection, namespace, dataConverter }));
    workers = await createSternaWorkers({
      connection: workerConnection,
      namespaces,
      taskQueue,
      providers: { gce: provider },
      workflowBundle: await workflowBundle(require.resolve('../../workflows')),
      observer: observerOptions({ settings: { progressReadSeconds: 2 } }),
      dataConverter,
    });
    running = Promise.all(workers.map(({ worker }) => worker.run()));
    bRun = await (await clientFor(TEAM_B, tokens.b)).workflow.start('trainingRun', { taskQueue, workflowId: `${taskQueue}-b-run`, args: [longSpec()] });
  });

  after(async () => {
    for (const { worker } of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
    await running?.catch(() => undefined);
    await workerConnection?.close();
    await Promise.allSettled(connections.map((c) => c.close()));
    await emulator?.stop();
    await server?.stop();
    await new Promise((resolve) => jwks?.close(resolve));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A client of `namespace` presenting `bearer`, encrypting payloads as the CLI does. */
  async function clientFor(namespace: string, bearer: string): Promise<Client> {
    const connection = await Connection.connect({ address: server.address, apiKey: bearer, tls: false });
    connections.push(connection);
    return new Client({ connection, namespace, dataConverter: sternaDataConverter() });
  }

  /** Every operation on a run, through the client's own calls. */
  async function everything(client: Client, runId: string): Promise<Record<string, 'allowed' | number>> {
    const handle = client.workflow.getHandle(runId);
    return {
      start: await outcome(() => client.workflow.start('trainingRun', { taskQueue, workflowId: `${runId}-other-${Date.now()}`, args: [longSpec()] }).then((h) => h.terminate('the admin\'s own test run'))),
      describe: await outcome(() => handle.describe()),
      list: await outcome(async () => {
        for await (const _ of client.workflow.list({ query: `WorkflowId = '${runId}'` })) void _;
      }),
      history: await outcome(() => handle.fetchHistory()),
      query: await outcome(() => handle.query(statusQuery)),
      signal: await outcome(() => handle.signal('sterna-tenancy-probe')),
      update: await outcome(() => handle.executeUpdate(setBudgetUpdate, { args: [50] })),
      cancel: await outcome(() => handle.cancel()),
      terminate: await outcome(() => handle.terminate('the test, as whoever it is')),
    };
  }

  it('A can do nothing to B\'s runs: start, describe, list, history, query, signal, update, cancel, terminate are all refused', async () => {
    const asA = await clientFor(TEAM_B, tokens.a);
    const tried = await everything(asA, bRun.workflowId);
    assert.deepEqual(tried, Object.fromEntries(Object.keys(tried).map((k) => [k, PERMISSION_DENIED])));
    // And B's run is untouched.
    assert.equal((await bRun.describe()).status.name, 'RUNNING');
  });

  it('A can neither write nor read the system namespace: no ledger of its own to re-budget, none to start', async () => {
    const asA = await clientFor(SYSTEM, tokens.a);
    const ledger = asA.workflow.getHandle(teamWorkflowId(taskQueue, TEAM_A));
    assert.deepEqual(
      {
        setOwnLimits: await outcome(() => ledger.executeUpdate(setTeamLimitsUpdate, { args: [{ maxGpus: 1000, budgetUsd: null }] })),
        readLedger: await outcome(() => ledger.query(teamQuery)),
        signalLedger: await outcome(() => ledger.signal(admissionRequestSignal, { runId: 'x', gpus: 1, reserveUsd: 0, priority: 9, askedAt: 0 })),
        startFleetWorkflow: await outcome(() => asA.workflow.start('teamLedger', { taskQueue, workflowId: teamWorkflowId(taskQueue, 'intruder'), args: [{ team: TEAM_A }] })),
      },
      { setOwnLimits: PERMISSION_DENIED, readLedger: PERMISSION_DENIED, signalLedger: PERMISSION_DENIED, startFleetWorkflow: PERMISSION_DENIED },
    );
  });

  it('runs A\'s run in A\'s namespace to completion on the multi-namespace worker, admitted by A\'s ledger in the system namespace', async () => {
    const asA = await clientFor(TEAM_A, tokens.a);
    const spec = { ...exampleSpec(), labels: { project: 'tenancy' } };
    const run = await asA.workflow.start('trainingRun', { taskQueue, workflowId: `${taskQueue}-a-run`, args: [spec] });
    const result = (await run.result()) as RunResult;
    assert.equal(result.status, 'completed');
    assert.equal(result.attempts.at(-1)?.outcome, 'completed');
    const admin = await clientFor(SYSTEM, tokens.admin);
    // The ledger is A's namespace's, in the system namespace: it admitted this run, and the
    // run's own end report (reportToTeam, across namespaces) gave its GPUs back with its total.
    const after = await eventually(async () => {
      const view = (await admin.workflow.getHandle(teamWorkflowId(taskQueue, TEAM_A)).query(teamQuery)) as TeamView;
      return view.runs.some((r) => r.runId === run.workflowId && !r.running) ? view : undefined;
    });
    assert.equal(after.team, TEAM_A);
    assert.deepEqual(after.runs.find((r) => r.runId === run.workflowId), { runId: run.workflowId, spentUsd: result.totalCostUsd, running: false });
    assert.ok(!after.running.some((r) => r.runId === run.workflowId));
    // Its spec names no team: it is shown as its namespace's run.
    assert.deepEqual((await run.describe()).searchAttributes.SternaTeam, [TEAM_A]);
    // The observer (system namespace) told the run (A's namespace) of its VM: signals the platform's worker sent.
    const signals = (await (await clientFor(TEAM_A, tokens.admin)).workflow.getHandle(run.workflowId).fetchHistory()).events?.filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'observation') ?? [];
    assert.ok(signals.length > 0, 'the observer signalled the run across namespaces');
    // The team askAdmission says it charges is the run's namespace, whatever the run names.
    const teamActivities = createTeamActivities({ namespaces });
    const asked: AdmissionAsked | undefined = await new MockActivityEnvironment({ namespace: TEAM_A, taskQueue, workflowType: 'trainingRun', workflowExecution: { workflowId: `${taskQueue}-a-probe`, runId: 'any' } }).run(() =>
      teamActivities.askAdmission({ team: 'default', request: { runId: 'ignored', gpus: 1, reserveUsd: 0, priority: 3, askedAt: 0 } }).then((a) => a || undefined),
    );
    assert.equal(asked?.team, TEAM_A);
    // The fleet workflows it used live in the system namespace, and none of them in A's.
    const system = await typesIn(admin, taskQueue);
    assert.ok(system.includes('teamLedger') && system.includes('fleetObserver'), system.join(', '));
    assert.deepEqual(await typesIn(await clientFor(TEAM_A, tokens.admin), taskQueue), ['trainingRun']);
  });

  it('refuses a fleet workflow a team starts in its own namespace: a forged ledger naming B cannot signal B\'s run', async () => {
    const asA = await clientFor(TEAM_A, tokens.a);
    const forged = await asA.workflow.signalWithStart('teamLedger', {
      taskQueue,
      workflowId: teamWorkflowId(taskQueue, TEAM_B),
      args: [{ team: TEAM_B }],
      signal: admissionRequestSignal,
      signalArgs: [{ runId: bRun.workflowId, gpus: 1, reserveUsd: 0, priority: 9, askedAt: Date.now(), namespace: TEAM_B }],
    });
    // The forged ledger admits B's run and asks the worker to tell it; the worker refuses.
    const refused = await eventually(async () => {
      const { events } = await forged.fetchHistory();
      for (const event of events ?? []) {
        const failure = event.activityTaskFailedEventAttributes?.failure;
        if (failure) return failure;
      }
      return undefined;
    });
    assert.equal(refused.applicationFailureInfo?.type, 'NamespaceNotAllowed', refused.message ?? '');
    assert.equal(refused.applicationFailureInfo?.nonRetryable, true);
    await forged.terminate('forged by the test');
  });

  it('`npm run worker` with STERNA_TEAM_NAMESPACES and the platform\'s token serves the system namespace and both teams\' (versioned, as in production)', async () => {
    const tq = uniqueTaskQueue('tenancy-main');
    const bundlePath = join(dir, 'workflow-bundle.js');
    writeFileSync(bundlePath, (await workflowBundle(require.resolve('../../workflows'))).code);
    const logFile = join(dir, 'worker.log');
    const worker = spawnLogged(process.execPath, [join(__dirname, '..', '..', 'workers', 'main.js')], {
      logFile,
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: server.address,
        TEMPORAL_NAMESPACE: SYSTEM,
        TEMPORAL_API_KEY: tokens.platform,
        TEMPORAL_TLS: 'false',
        STERNA_TEAM_NAMESPACES: `${TEAM_A},${TEAM_B}`,
        STERNA_TASK_QUEUE: tq,
        STERNA_GCE_PROJECT: PROJECT,
        STERNA_GCE_ENDPOINT: `http://127.0.0.1:${emulator.port}`,
        STERNA_LOCAL_BUCKETS: join(dir, 'buckets'),
        STERNA_WORKFLOW_BUNDLE: bundlePath,
        STERNA_PRICES: 'catalog',
        STERNA_OBSERVER_PROGRESS_SECONDS: '2',
        STERNA_DEPLOYMENT: `sterna-${tq}`,
      },
    });
    try {
      const asB = await clientFor(TEAM_B, tokens.b);
      const run = await asB.workflow.start('trainingRun', { taskQueue: tq, workflowId: `${tq}-b-run`, args: [{ ...exampleSpec(), labels: { project: 'tenancy' } }] });
      const result = (await run.result()) as RunResult;
      assert.equal(result.status, 'completed', readFileSync(logFile, 'utf8'));
      const types = await typesIn(await clientFor(SYSTEM, tokens.admin), tq);
      for (const type of ['fleetObserver', 'priceBook', 'teamLedger']) assert.ok(types.includes(type), `${type} in the system namespace: ${types.join(', ')}`);
      const log = readFileSync(logFile, 'utf8');
      assert.match(log, new RegExp(`namespaces: system ${SYSTEM}, teams ${TEAM_A}, ${TEAM_B}`));
    } finally {
      await worker.kill('SIGTERM');
    }
  });

  it('finds a resource\'s run among the team namespaces, and judges none when two teams run the same workflow id', async () => {
    const id = `${taskQueue}-same-id`;
    const locator = new RunLocator(namespaces);
    assert.equal(await locator.locate(id), 'not-found');
    // Workflows nobody runs (no worker polls this queue): running as far as the server says.
    const inA = await (await clientFor(TEAM_A, tokens.a)).workflow.start('anyWorkflow', { taskQueue: `${taskQueue}-idle`, workflowId: id });
    const found = await new RunLocator(namespaces).locate(id);
    assert.equal(typeof found === 'object' ? found.namespace : found, TEAM_A);
    assert.deepEqual((await ownerRunIn(namespaces.teams(), id)).found, true);
    const inB = await (await clientFor(TEAM_B, tokens.b)).workflow.start('anyWorkflow', { taskQueue: `${taskQueue}-idle`, workflowId: id });
    assert.equal(await new RunLocator(namespaces).locate(id), 'ambiguous');
    // The reaper keeps what it cannot judge.
    assert.equal((await ownerRunIn(namespaces.teams(), id)).found, 'unreadable');
    await Promise.all([inA.terminate(), inB.terminate()]);
  });

  /** `sterna ARGS` as alice of team A: a profile in Temporal's environment configuration file, as `temporal config set` writes one. */
  function sternaAsAlice(args: string[], extra: NodeJS.ProcessEnv = {}): Promise<{ stdout: string; stderr: string; exit: number }> {
    return sternaAs(tokens.a, args, extra);
  }

  /** `sterna ARGS` with `bearer`'s profile (namespace A's unless `extra` says otherwise). */
  async function sternaAs(bearer: string, args: string[], extra: NodeJS.ProcessEnv = {}): Promise<{ stdout: string; stderr: string; exit: number }> {
    const configFile = join(dir, `temporal-${createHash('sha256').update(bearer).digest('hex').slice(0, 8)}.toml`);
    writeFileSync(configFile, `[profile.team-a]\naddress = "${server.address}"\nnamespace = "${TEAM_A}"\napi_key = "${bearer}"\n\n[profile.team-a.tls]\ndisabled = true\n`);
    const env: NodeJS.ProcessEnv = { ...process.env, TEMPORAL_CONFIG_FILE: configFile, TEMPORAL_PROFILE: 'team-a', ...extra };
    delete env.TEMPORAL_ADDRESS;
    const out = await execFileP(process.execPath, [join(__dirname, '..', '..', 'cli', 'main.js'), ...args], { env }).catch((err: { stdout: string; stderr: string; code: number }) => err);
    return { stdout: out.stdout, stderr: out.stderr, exit: 'code' in out ? out.code : 0 };
  }

  it('sterna whoami says the namespace and identity a profile gives, and whether the server lets it read there', async () => {
    const whoami = async (extra: NodeJS.ProcessEnv) => {
      const out = await sternaAsAlice(['whoami', '--json'], extra);
      return { ...(JSON.parse(out.stdout) as Whoami), exit: out.exit };
    };
    const own = await whoami({});
    assert.deepEqual(
      { profile: own.profile, namespace: own.namespace, tls: own.tls, kind: own.credentials.kind, subject: own.credentials.kind === 'api-key' ? own.credentials.jwt?.subject : undefined, permissionsHere: own.permissionsHere, server: own.server, exit: own.exit },
      { profile: 'team-a', namespace: TEAM_A, tls: false, kind: 'api-key', subject: 'alice@team-a', permissionsHere: [`${TEAM_A}:write`], server: { namespaceReadable: true }, exit: 0 },
    );
    // Whose token it is, then the process: what Temporal records of every request the CLI makes.
    assert.match(own.identity, /^alice@team-a \(\d+@.+\)$/);
    // The environment overrides the profile, as in every Temporal SDK: A's token, B's namespace.
    const elsewhere = await whoami({ TEMPORAL_NAMESPACE: TEAM_B });
    assert.equal(elsewhere.namespace, TEAM_B);
    assert.deepEqual(elsewhere.permissionsHere, []);
    assert.equal(elsewhere.server?.namespaceReadable, false);
    assert.match(elsewhere.server && !elsewhere.server.namespaceReadable ? elsewhere.server.problem : '', /permission denied/);
    assert.equal(elsewhere.exit, 1);
  });

  it('who did what: the budget, the deadline and the cancellation of A\'s run name the member who asked, in its history and in sterna status', async () => {
    const asA = await clientFor(TEAM_A, tokens.a);
    const run = await asA.workflow.start('trainingRun', { taskQueue, workflowId: `${taskQueue}-a-changed`, args: [longSpec()] });
    const deadline = new Date(Date.now() + 5 * 3600_000).toISOString();
    for (const args of [['budget', run.workflowId, '75'], ['deadline', run.workflowId, deadline]]) {
      const out = await sternaAsAlice(args);
      assert.equal(out.exit, 0, out.stderr);
    }
    const status = async () => {
      const out = await sternaAsAlice(['status', run.workflowId, '--json']);
      assert.equal(out.exit, 0, out.stderr);
      return JSON.parse(out.stdout) as RunStatus & { cancelRequested?: { by: string; at: string } };
    };
    const changed = await status();
    const alice = changed.limitsSetBy?.budget?.by ?? '';
    assert.match(alice, /^alice@team-a \(\d+@.+\)$/);
    assert.equal(changed.budgetUsd, 75);
    assert.equal(changed.deadline, deadline);
    assert.equal(changed.limitsSetBy?.deadline?.by.split(' ')[0], 'alice@team-a');
    assert.deepEqual(changed.timeline.filter((e) => e.kind === 'limit-changed').map((e) => [e.event.replace(/ by .*/, ''), e.by?.split(' ')[0]]), [['budget set to $75.00', 'alice@team-a'], [`deadline set to ${deadline}`, 'alice@team-a']]);
    // What the run says is what the server recorded with each update, in whichever execution of the chain took it.
    const admin = await clientFor(TEAM_A, tokens.admin);
    const accepted: { name?: string | null; identity?: string | null }[] = [];
    for await (const execution of admin.workflow.list({ query: `WorkflowId = '${run.workflowId}'` })) {
      const events = (await admin.workflow.getHandle(run.workflowId, execution.runId).fetchHistory()).events ?? [];
      for (const e of events) {
        const request = e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest;
        if (request) accepted.push({ name: request.input?.name, identity: request.meta?.identity });
      }
    }
    assert.deepEqual(
      accepted.sort((x, y) => String(x.name).localeCompare(String(y.name))),
      [
        { name: 'setBudget', identity: alice },
        { name: 'setDeadline', identity: changed.limitsSetBy?.deadline?.by },
      ],
    );

    const cancelled = await sternaAsAlice(['cancel', run.workflowId]);
    assert.equal(cancelled.exit, 0, cancelled.stderr);
    await run.result().catch(() => undefined);
    const ended = await status();
    assert.equal(ended.phase, 'cancelled');
    assert.match(ended.cancelRequested?.by ?? '', /^alice@team-a \(\d+@.+\)$/);
    const text = await sternaAsAlice(['status', run.workflowId]);
    assert.match(text.stdout, /budget \$75\.00: set by alice@team-a \(/);
    assert.match(text.stdout, /cancellation requested by alice@team-a \(/);
  });

  it('sterna cost reports per namespace across the teams for the admin, each row what that namespace alone reports; A may not read B\'s', async () => {
    type Report = { by: string; groups: { group: string; runs: number; costUsd: number }[]; total: { runs: number; costUsd: number } };
    // Closed runs only: a running run's cost moves between two reads.
    const closed = ['--query', 'ExecutionStatus != "Running"', '--json'];
    const cost = async (bearer: string, args: string[], extra: NodeJS.ProcessEnv = {}) => {
      const out = await sternaAs(bearer, ['cost', ...args, ...closed], extra);
      assert.equal(out.exit, 0, out.stderr);
      return JSON.parse(out.stdout) as Report;
    };
    // Visibility is eventually consistent: a run that just closed may reach one read before the other.
    const { report, alone } = await eventually(async () => {
      const across = await cost(tokens.admin, ['--namespace', `${TEAM_A},${TEAM_B}`, '--by', 'namespace']);
      const each: Record<string, Report['total']> = { [TEAM_A]: (await cost(tokens.admin, [], { TEMPORAL_NAMESPACE: TEAM_A })).total, [TEAM_B]: (await cost(tokens.admin, [], { TEMPORAL_NAMESPACE: TEAM_B })).total };
      const again = await cost(tokens.admin, ['--namespace', `${TEAM_A},${TEAM_B}`, '--by', 'namespace']);
      return JSON.stringify(again) === JSON.stringify(across) && each[TEAM_A].runs > 0 ? { report: across, alone: each } : undefined;
    });
    assert.equal(report.by, 'namespace');
    for (const namespace of [TEAM_A, TEAM_B]) {
      const row = report.groups.find((g) => g.group === namespace) ?? { runs: 0, costUsd: 0 };
      assert.deepEqual([row.runs, row.costUsd], [alone[namespace].runs, alone[namespace].costUsd], namespace);
    }
    assert.equal(report.total.runs, alone[TEAM_A].runs + alone[TEAM_B].runs);
    // Each figure is rounded to the micro-dollar from its own unrounded sum: the total and the sum of the two rows may differ by one rounding each.
    const rowsSum = alone[TEAM_A].costUsd + alone[TEAM_B].costUsd;
    assert.ok(Math.abs(report.total.costUsd - rowsSum) <= 1.5e-6, `total ${report.total.costUsd} against the rows' ${rowsSum}`);
    // A's own credentials: B's namespace is refused by the server, and said so.
    const refused = await sternaAsAlice(['cost', '--namespace', TEAM_B]);
    assert.equal(refused.exit, 2, refused.stdout);
    assert.match(refused.stderr, new RegExp(`the server refused these credentials the cost request in namespace ${TEAM_B}`));
    assert.match(refused.stderr, /sterna whoami/);
  });

  it('an expired token, and a token of another issuer\'s key, are refused with what to do; nothing is started', async () => {
    const expired = token(privateKey, kid, 'alice@team-a', [`${TEAM_A}:write`], -60);
    const stranger = token(generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey, kid, 'alice@team-a', [`${TEAM_A}:write`]);
    const specFile = join(dir, 'refused-spec.json');
    writeFileSync(specFile, JSON.stringify(longSpec()));
    for (const [which, bearer] of [['expired', expired], ['unknown key', stranger]] as const) {
      const id = `${taskQueue}-refused-${which.replace(' ', '-')}`;
      const out = await sternaAs(bearer, ['start', specFile, '--id', id, '--task-queue', taskQueue]);
      assert.equal(out.exit, 2, `${which}: ${out.stdout}${out.stderr}`);
      assert.match(out.stderr, /did not accept these credentials|refused these credentials/, which);
      assert.match(out.stderr, /sterna whoami/, which);
      const admin = await clientFor(TEAM_A, tokens.admin);
      const found = await admin.workflow.getHandle(id).describe().then(
        () => 'started',
        (err: unknown) => (err instanceof WorkflowNotFoundError ? 'not found' : err),
      );
      assert.equal(found, 'not found', `${which}: nothing was started`);
    }
  });

  /** One of the emulator's spot offers for the example's accelerator. */
  async function anOffer(): Promise<Offer> {
    const found = await provider.findCapacity({ accelerators: [{ type: longSpec().resources.accelerators[0].type, count: 1 }], provisioningModels: [ProvisioningModel.Spot] });
    assert.ok(found.offers[0], 'the emulator offers the example\'s accelerator');
    return found.offers[0];
  }

  /** A provision request as a run would make it for `workflowId`, attempt 1, on `offer`. */
  function provisionRequestFor(workflowId: string, offer: Offer): ProvisionRequest {
    const spec = longSpec();
    const execution = executionToken(`${workflowId}-first`);
    const owner = { run: runKey(workflowId), execution, attempt: 1 };
    return {
      name: resourceName(workflowId, execution, 1, 1),
      offer,
      owner,
      labels: ownerLabels(owner),
      agent: { runId: workflowId, attempt: 1, argv: spec.command, env: {}, datasets: [], checkpointUri: 'file:///nowhere', pollSeconds: 5 },
      diskSizeGb: 50,
    };
  }

  it('a team\'s own worker cannot make the platform provision for a run its ledger never admitted, nor past what it admitted', async () => {
    // Alice's worker polls a task queue of her own in A's namespace, under the type trainingRun,
    // and sends provision straight to the platform's task queue (which its worker polls there too).
    const aliceConnection = await NativeConnection.connect({ address: server.address, apiKey: tokens.a, tls: false });
    const rogueQueue = `${taskQueue}-alice-own`;
    const rogue = await Worker.create({ connection: aliceConnection, namespace: TEAM_A, taskQueue: rogueQueue, workflowBundle: await workflowBundle(require.resolve('../helpers/rogue-workflow')), dataConverter: sternaDataConverter() });
    const id = `${taskQueue}-a-unadmitted`;
    try {
      const asA = await clientFor(TEAM_A, tokens.a);
      const run = await asA.workflow.start('trainingRun', { taskQueue: rogueQueue, workflowId: id, args: [taskQueue, provisionRequestFor(id, await anOffer())] });
      const failure = await rogue.runUntil(run.result().then(() => undefined, (err: Error) => err));
      const causes: { message: string; type?: string }[] = [];
      for (let e = failure as (Error & { type?: string }) | undefined; e; e = e.cause as typeof e) causes.push({ message: e.message, type: e.type });
      const refusal = causes.find((c) => c.type === 'NamespaceNotAllowed');
      assert.ok(refusal, JSON.stringify(causes));
      assert.match(refusal.message, new RegExp(`run ${id} in namespace ${TEAM_A} is not admitted by its team's ledger \\(the ledger has never heard of it\\)`));
      assert.deepEqual(await provider.listRunResources(runKey(id)), [], 'nothing was created');
    } finally {
      await aliceConnection.close();
    }

    // The gate itself, on the ledger's real answers: B's run was admitted for one GPU.
    const gate = createAdmissionGate(namespaces);
    const asRun = (namespace: string, workflowId: string) => new MockActivityEnvironment({ namespace, taskQueue, workflowType: 'trainingRun', workflowExecution: { workflowId, runId: 'any' } });
    await eventually(async () => ((await (await clientFor(SYSTEM, tokens.admin)).workflow.getHandle(teamWorkflowId(taskQueue, TEAM_B)).query(admissionOfQuery, bRun.workflowId))?.outcome === 'admitted' ? true : undefined));
    const offer = await anOffer();
    await asRun(TEAM_B, bRun.workflowId).run(() => gate(provisionRequestFor(bRun.workflowId, offer)));
    await assert.rejects(asRun(TEAM_B, bRun.workflowId).run(() => gate(provisionRequestFor(bRun.workflowId, { ...offer, acceleratorCount: 8 }))), /was admitted for 1 GPU\(s\), and .* would hold 8/);
    await assert.rejects(asRun(TEAM_B, bRun.workflowId).run(() => gate({ ...provisionRequestFor(bRun.workflowId, offer), owner: { run: runKey('someone-else'), execution: 'x', attempt: 1 } })), /would be labelled as run/);
    // Nor may another team's run, or a workflow of another type, pass for it.
    await assert.rejects(asRun(TEAM_A, bRun.workflowId).run(() => gate(provisionRequestFor(bRun.workflowId, offer))), /not admitted by its team's ledger/);
  });

  it('a run in A\'s namespace whose spec names team B is refused, and B\'s ledger is never charged', async () => {
    const asA = await clientFor(TEAM_A, tokens.a);
    const run = await asA.workflow.start('trainingRun', { taskQueue, workflowId: `${taskQueue}-a-claims-b`, args: [{ ...exampleSpec(), labels: { team: TEAM_B } }] });
    const failure = await Promise.race([
      run.result().then(
        () => 'completed',
        (err: Error) => err,
      ),
      new Promise<string>((r) => setTimeout(() => r('still running after 90 s'), 90_000)),
    ]);
    assert.ok(failure instanceof Error, `the run failed (it ended: ${String(failure)})`);
    // The run's failure carries the activity's, which says why and what to do.
    const causes: { message: string; type?: string }[] = [];
    for (let e = failure as (Error & { type?: string }) | undefined; e; e = e.cause as typeof e) causes.push({ message: e.message, type: e.type });
    const refusal = causes.find((c) => /names team team-b, but it executes in namespace team-a/.test(c.message));
    assert.ok(refusal, JSON.stringify(causes));
    assert.equal(refusal.type, 'InvalidSpec');
    const admin = await clientFor(SYSTEM, tokens.admin);
    // B's ledger (B's own run started it) never heard of A's run: nothing charged, nothing queued.
    const ledgerB = await admin.workflow.getHandle(teamWorkflowId(taskQueue, TEAM_B)).query(teamQuery);
    assert.ok(!JSON.stringify(ledgerB).includes(run.workflowId), JSON.stringify(ledgerB));
    assert.equal(await outcome(() => admin.workflow.getHandle(teamWorkflowId(taskQueue, TEAM_A)).query(teamQuery).then((a) => assert.ok(!JSON.stringify(a).includes(run.workflowId), JSON.stringify(a)))), 'allowed');
  });

  it('the admin can do all of it to B\'s run', async () => {
    const admin = await clientFor(TEAM_B, tokens.admin);
    const tried = await everything(admin, bRun.workflowId);
    assert.deepEqual(tried, Object.fromEntries(Object.keys(tried).map((k) => [k, 'allowed'])));
  });
});

/** Polls `probe` until it returns something (up to a minute). */
async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`nothing after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
