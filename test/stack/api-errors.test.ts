/**
 * How the code added beside the run reads the cloud clients' errors, on the clients'
 * current majors (issue 40): the checks before a run (Compute 7 on google-gax 6, GCS
 * through google-auth-library 11 / gaxios 8, @kubernetes/client-node 2), the workdir
 * upload and the log reader. google-gax 6 moved GCE's HTTP status out of `code` (now
 * its gRPC mapping) into `httpStatusCode` and the error reason out of the message;
 * gaxios 8 sends on Node's own fetch; client-node 2 rewrote its transport. Each
 * answer here is a real one: the GCE emulator's Compute and storage APIs (their own
 * error JSON, fault rules and rate quotas), a closed port, and a real kube-apiserver.
 * Assertions are on the findings and errors as data.
 */
import { strict as assert } from 'node:assert';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { PassThroughClient } from 'google-auth-library';
import { checkGce, type GceTarget } from '../../activities/check/gce';
import { checkKube } from '../../activities/check/kube';
import { checkBuckets } from '../../activities/check/storage';
import { LogStoreError, logStoreFor } from '../../logs/store';
import { computeClients } from '../../activities/providers/gce-clients';
import { ClientErrorKind, SternaClientError } from '../../client/errors';
import { packWorkdir } from '../../client/workdir/pack';
import { uploadWorkdir, workdirObjectUri } from '../../client/workdir/upload';
import { startCluster, type Cluster } from '../../kube/cluster';
import type { Finding } from '../../workflows/checks';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

const PROJECT = 'api-errors';
/** Nothing listens here: a refused connection. */
const CLOSED = 'http://127.0.0.1:9';

describe('cloud client errors, read right on Compute 7 / google-gax 6 and gaxios 8 (GCE emulator)', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  let dir: string;
  let buckets: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sterna-api-errors-'));
    buckets = join(dir, 'buckets');
    for (const b of ['team-bucket', 'locked-bucket', 'read-only-bucket']) mkdirSync(join(buckets, b), { recursive: true });
    emu = await startTestEmulator({ bucketsDir: buckets, buckets: { 'locked-bucket': { forbidden: true }, 'read-only-bucket': { readOnly: true } } });
  });
  afterEach(async () => {
    await emu.admin.clearFaults();
    await emu.admin.setRateQuotas({ project: PROJECT, limits: { read_requests: null } });
  });
  after(async () => {
    await emu?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const gce = (port = emu.port): GceTarget => ({ project: PROJECT, clients: computeClients({ ...emu.clientOptions, port }), emulatorEndpoint: emu.endpoint });
  const projectFinding = async (target: GceTarget): Promise<Finding> => {
    const [first] = await checkGce(target, undefined);
    assert.equal(first.check, 'gce:project');
    return first;
  };

  it('sterna check: a 503 or 500 passes (transient), a 429 and a rate-quota 403 are the rate quota, not a missing permission', async () => {
    assert.deepEqual(await projectFinding(gce()), { check: 'gce:project', ok: true });

    for (const status of [503, 500] as const) {
      await emu.admin.injectFault({ fraction: 1, status, count: 1 });
      const f = await projectFinding(gce());
      assert.equal(f.ok, false);
      assert.equal(f.transient, true, `${status}: an outage delays a run, never fails it`);
      assert.match(f.problem ?? '', new RegExp(`the Compute API failed for project ${PROJECT} \\(.*emulated-${status}`));
    }

    await emu.admin.injectFault({ fraction: 1, status: 429, count: 1 });
    const tooMany = await projectFinding(gce());
    assert.equal(tooMany.transient, true);
    assert.match(tooMany.problem ?? '', /refused the call for the project's rate quota/);

    // GCE's own answer to a rate quota: 403 rateLimitExceeded. gax 6 reports it as
    // PERMISSION_DENIED (code 7) with httpStatusCode 403; only the reason tells it apart.
    await emu.admin.setRateQuotas({ project: PROJECT, limits: { read_requests: 0 } });
    const limited = await projectFinding(gce());
    assert.equal(limited.transient, true);
    assert.match(limited.problem ?? '', /refused the call for the project's rate quota \(Quota exceeded/);
    assert.doesNotMatch(limited.fix ?? '', /add-iam-policy-binding/, 'no role to grant for a rate quota');
  });

  it('sterna check: a Compute API that refuses the connection did not answer (transient), with how to start the emulator', async () => {
    const f = await projectFinding(gce(9));
    assert.equal(f.ok, false);
    assert.equal(f.transient, true);
    assert.match(f.problem ?? '', /the Compute API at http:\/\/127\.0\.0\.1:\d+ did not answer \(.*ECONNREFUSED/);
    assert.match(f.fix ?? '', /npm run emulator -- --port \d+/);
  });

  it('bucket checks: a missing bucket, one the credentials may not write, and a storage API that does not answer', async () => {
    const target = { endpoint: emu.endpoint, requester: new PassThroughClient() };
    const findings = await checkBuckets(target, [
      { bucket: 'team-bucket', uses: ['checkpoint'], write: true },
      { bucket: 'read-only-bucket', uses: ['checkpoint'], write: true },
      { bucket: 'no-such-bucket', uses: ['dataset'], write: false },
    ]);
    assert.deepEqual(findings[0], { check: 'bucket:gs://team-bucket', ok: true });
    assert.equal(findings[1].ok, false);
    assert.equal(findings[1].checkersOwn, true);
    assert.match(findings[1].problem ?? '', /lack storage\.objects\.create on gs:\/\/read-only-bucket/);
    assert.equal(findings[2].ok, false);
    assert.equal(findings[2].transient, undefined, 'a 404 is an answer');
    assert.match(findings[2].problem ?? '', /^no bucket gs:\/\/no-such-bucket/);

    const [unanswered] = await checkBuckets({ endpoint: CLOSED, requester: new PassThroughClient(), timeoutMs: 5_000 }, [{ bucket: 'team-bucket', uses: ['dataset'], write: false }]);
    assert.equal(unanswered.ok, false);
    assert.equal(unanswered.transient, true);
    assert.match(unanswered.problem ?? '', /the storage API did not answer for gs:\/\/team-bucket \(.*ECONNREFUSED/);
  });

  it('workdir upload: a concurrent start\'s object (412 on ifGenerationMatch=0) is no error and is left as it is; a refused connection is WorkdirUploadFailed', async () => {
    const tree = join(dir, 'tree');
    mkdirSync(tree, { recursive: true });
    writeFileSync(join(tree, 'train.py'), 'print("train")\n');
    const packed = await packWorkdir(tree);
    const uri = workdirObjectUri('gs://team-bucket/race', packed.sha256);
    // Another start's upload in flight: the object exists, not yet at its full size, so
    // the look-up does not match and the conditional upload meets it (412).
    const file = join(buckets, 'team-bucket', 'race', 'workdirs', `${packed.sha256}.tar.gz`);
    mkdirSync(join(file, '..'), { recursive: true });
    writeFileSync(file, 'partial');
    const raced = await uploadWorkdir(packed, 'gs://team-bucket/race', { storageEndpoint: emu.endpoint });
    assert.deepEqual(raced, { uri, sha256: packed.sha256, uploaded: false });
    assert.equal(readFileSync(file, 'utf8'), 'partial', 'never replaces an object');

    await assert.rejects(uploadWorkdir(packed, 'gs://team-bucket/refused', { storageEndpoint: CLOSED }), (err: unknown) => {
      assert.ok(err instanceof SternaClientError);
      assert.equal(err.kind, ClientErrorKind.WorkdirUploadFailed);
      assert.match(err.message, /the storage API at http:\/\/127\.0\.0\.1:9 did not look the object up \(.*ECONNREFUSED/);
      return true;
    });
  });

  it('log reader: a range at the end is no more lines (416), a 403 names the role, a 404 the bucket, a refused connection the endpoint', async () => {
    const attempt = join(buckets, 'team-bucket', 'runs', 'logs', 'a1');
    mkdirSync(attempt, { recursive: true });
    writeFileSync(join(attempt, '000001.log'), 'hello\n');
    const store = logStoreFor('gs://team-bucket/runs/logs', { storageEndpoint: emu.endpoint });
    assert.deepEqual(await store.listObjects('a1'), [{ name: '000001.log', size: 6 }]);
    assert.equal((await store.read('a1', '000001.log', 2)).toString(), 'llo\n');
    assert.equal((await store.read('a1', '000001.log', 6)).length, 0);

    const failure = async (uri: string, endpoint: string): Promise<string> => {
      const err = await logStoreFor(uri, { storageEndpoint: endpoint }).listObjects('a1').then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof LogStoreError, `a LogStoreError, not ${String(err)}`);
      return err.message;
    };
    assert.match(await failure('gs://locked-bucket/logs', emu.endpoint), /^no permission to read the run's log in gs:\/\/locked-bucket\/logs .*roles\/storage\.objectViewer/);
    assert.match(await failure('gs://no-such-bucket/logs', emu.endpoint), /^no bucket gs:\/\/no-such-bucket at /);
    assert.match(await failure('gs://team-bucket/logs', CLOSED), /^cannot read the run's log in gs:\/\/team-bucket\/logs from http:\/\/127\.0\.0\.1:9: .*ECONNREFUSED/);
  });
});

describe('the Kubernetes check on @kubernetes/client-node 2 (a real kube-apiserver)', function () {
  this.timeout(300_000);
  let dir: string;
  let cluster: Cluster;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sterna-api-errors-kube-'));
    cluster = await startCluster(join(dir, 'cluster'));
  });
  after(async () => {
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The cluster's kubeconfig with another bearer token. */
  function withToken(token: string): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: cluster.server, skipTLSVerify: true }],
      users: [{ name: 'u', token }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return kc;
  }

  it('passes, names a missing namespace (404), warns on a 403, fails a refused token (401)', async () => {
    assert.deepEqual(await checkKube({ kubeConfig: () => cluster.kubeConfig(), namespace: 'default' }), [
      { check: 'kubernetes:api', ok: true },
      { check: 'kubernetes:namespace:default', ok: true },
    ]);

    const missing = await checkKube({ kubeConfig: () => cluster.kubeConfig(), namespace: 'no-such-ns' });
    assert.deepEqual(missing[0], { check: 'kubernetes:api', ok: true });
    assert.equal(missing[1].ok, false);
    assert.match(missing[1].problem ?? '', /has no namespace no-such-ns/);

    // A service account with no role: authenticated, but may not get namespaces.
    const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedServiceAccount({ namespace: 'default', body: { metadata: { name: 'no-roles' } } });
    const { status } = await core.createNamespacedServiceAccountToken({ namespace: 'default', name: 'no-roles', body: { spec: { audiences: [], expirationSeconds: 600 } } });
    const forbidden = await checkKube({ kubeConfig: () => withToken(status!.token!), namespace: 'default' });
    assert.deepEqual(forbidden[0], { check: 'kubernetes:api', ok: true });
    assert.equal(forbidden[1].ok, true, 'a warning, not a failure: a worker\'s role is often namespaced');
    assert.match(forbidden[1].problem ?? '', /may not get namespaces \(403\)/);

    const refused = await checkKube({ kubeConfig: () => withToken('not-a-token'), namespace: 'default' });
    assert.equal(refused.length, 1);
    assert.equal(refused[0].ok, false);
    assert.equal(refused[0].transient, undefined, 'a 401 is an answer');
    assert.match(refused[0].problem ?? '', /refused the kubeconfig's credentials \(401\)/);
  });
});
