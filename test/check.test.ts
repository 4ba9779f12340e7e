/**
 * The checks before a run, as a user meets them: `sterna check` run as a process against
 * the real Temporal dev server and the GCE emulator, its `--json` findings read as data.
 * A new project (GPUS_ALL_REGIONS 0) is named with the quota to request and no VM is
 * created; with quota every check passes; a missing bucket, a read-only checkpoint
 * bucket, a namespace without Sterna's search attributes, no codec key, an unreachable
 * Kubernetes API and a malformed image are each named with their fix. The same checks run
 * in-process on a worker's NativeConnection, as the run's first step will.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InstancesClient, ZoneOperationsClient } from '@google-cloud/compute';
import { msToTs } from '@temporalio/common/lib/time';
import { createCheckActivities } from '../activities/check';
import { loadWorkerConfig } from '../config/worker-config';
import { blockingFindings, type Finding } from '../workflows/checks';
import { imageReferenceProblem } from '../workflows/image-reference';
import { sternaSearchAttributes } from '../workflows/search-attributes';
import { parseSpec, type RunSpecInput } from '../workflows/spec';
import { buildCheckTargets } from '../workers/providers';
import { startTestEmulator, type TestEmulator } from './helpers/emulator';
import { eventually } from './helpers/processes';
import { testEnv, testServerAddress } from './helpers/temporal';

const cli = join(__dirname, '..', 'cli', 'main.js');
const PROJECT = 'check-test';

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

const spec = (overrides: Partial<RunSpecInput> = {}): RunSpecInput => ({
  command: ['python', 'train.py'],
  checkpoint: { uri: 'gs://ckpt-bucket/runs' },
  datasets: [{ uri: 'gs://data-bucket/train.csv', path: 'data/train.csv' }],
  resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
  placement: { regions: { allow: ['us-central1', 'europe-west4'] } },
  pricing: { mode: 'spot' },
  ...overrides,
});

function find(findings: Finding[], check: string): Finding {
  const f = findings.find((x) => x.check === check);
  assert.ok(f, `a finding ${check} among ${findings.map((x) => x.check).join(', ')}`);
  return f;
}

describe('sterna check: what a run needs, before paying (dev server, emulator, the CLI as a process)', function () {
  this.timeout(180_000);
  let emu: TestEmulator;
  let dir: string;
  let buckets: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sterna-check-'));
    buckets = join(dir, 'buckets');
    for (const b of ['ckpt-bucket', 'data-bucket']) mkdirSync(join(buckets, b), { recursive: true });
    // A new GCP project: no GPU anywhere until GPUS_ALL_REGIONS is raised.
    emu = await startTestEmulator({ timeFactor: 20, gpusAllRegions: 0, bucketsDir: buckets });
    await testEnv();
  });
  after(async () => {
    await emu?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** `sterna check [spec] --json` as a user runs it; the environment a worker of this stack would have. */
  async function sterna(s: RunSpecInput | undefined, env: NodeJS.ProcessEnv = {}, extraArgs: string[] = ['--json']): Promise<Outcome & { findings: Finding[] }> {
    const { namespace } = await testEnv();
    const args = [cli, 'check'];
    if (s) {
      const path = join(dir, `spec-${Math.random().toString(36).slice(2)}.json`);
      writeFileSync(path, JSON.stringify(s));
      args.push(path);
    }
    const base: NodeJS.ProcessEnv = {
      ...process.env,
      TEMPORAL_ADDRESS: await testServerAddress(),
      TEMPORAL_NAMESPACE: namespace,
      STERNA_GCE_PROJECT: PROJECT,
      STERNA_GCE_ENDPOINT: emu.endpoint,
      STERNA_LOCAL_BUCKETS: buckets,
    };
    const merged = { ...base, ...env };
    for (const [k, v] of Object.entries(merged)) if (v === undefined) delete merged[k];
    const outcome = await new Promise<Outcome>((resolve) =>
      execFile(process.execPath, [...args, ...extraArgs], { env: merged, timeout: 120_000, maxBuffer: 1 << 22 }, (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr }),
      ),
    );
    let findings: Finding[] = [];
    if (extraArgs.includes('--json')) {
      try {
        findings = JSON.parse(outcome.stdout) as Finding[];
      } catch {
        assert.fail(`sterna check --json printed no JSON (exit ${outcome.code}):\n${outcome.stdout}\n${outcome.stderr}`);
      }
    }
    return { ...outcome, findings };
  }

  it('on a new project (GPUS_ALL_REGIONS 0) names the quota to request, fails, and creates no VM', async () => {
    const before = await emu.admin.apiUsage(PROJECT);
    const { code, findings } = await sterna(spec());
    assert.equal(code, 1);
    const quota = find(findings, 'quota:GPUS_ALL_REGIONS');
    assert.equal(quota.ok, false);
    assert.match(quota.problem ?? '', /GPUS_ALL_REGIONS quota is 0: a run needing 1 GPU cannot start in any region/);
    assert.match(quota.fix ?? '', /GPUS_ALL_REGIONS quota of at least 1/);
    assert.match(quota.fix ?? '', /gcloud quotas preferences create --service=compute\.googleapis\.com --project=check-test --quota-id=GPUS-ALL-REGIONS-per-project --preferred-value=1/);
    assert.match(quota.fix ?? '', /"GPUs \(all regions\)"/);
    // Everything else this stack has is in order: the quota is the one thing that fails.
    assert.deepEqual(blockingFindings(findings).map((f) => f.check), ['quota:GPUS_ALL_REGIONS']);
    assert.deepEqual(await emu.instances(), []);
    const methods = (await emu.admin.apiUsage(PROJECT)).projects.find((p) => p.project === PROJECT)?.methods ?? {};
    assert.equal(methods['compute.instances.insert']?.calls ?? 0, 0, 'no insert was tried');
    assert.ok((methods['compute.projects.get']?.calls ?? 0) > (before.projects.find((p) => p.project === PROJECT)?.methods['compute.projects.get']?.calls ?? 0), 'the quota was read with projects.get');
  });

  it('says the same in text, with the fix, and exits 1', async () => {
    const { code, stdout } = await sterna(spec(), {}, []);
    assert.equal(code, 1);
    assert.match(stdout, /^FAIL {2}quota:GPUS_ALL_REGIONS: /m);
    assert.match(stdout, /^ {6}to fix: request a GPUS_ALL_REGIONS quota of at least 1/m);
    assert.match(stdout, /^1 of \d+ checks failed$/m);
  });

  it('passes once the project has GPU quota, checking each allowed region\'s spot quota', async () => {
    await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', 8);
    try {
      const { code, findings, stderr } = await sterna(spec());
      assert.equal(code, 0, stderr);
      assert.deepEqual(blockingFindings(findings), []);
      for (const check of ['codec-key', `temporal:search-attributes:${(await testEnv()).namespace}`, 'gce:project', 'quota:GPUS_ALL_REGIONS', 'quota:us-central1:PREEMPTIBLE_NVIDIA_L4_GPUS', 'quota:europe-west4:PREEMPTIBLE_NVIDIA_L4_GPUS', 'bucket:gs://ckpt-bucket', 'bucket:gs://data-bucket']) {
        assert.deepEqual(find(findings, check), { check, ok: true });
      }
      assert.ok(!findings.some((f) => /us-east1|asia/.test(f.check)), 'regions the spec does not allow are not checked');
    } finally {
      await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', undefined);
    }
  });

  it('warns of a region without spot quota while another has room, and fails when none has', async () => {
    await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', 8);
    const zero = async (region: string, limit: number | undefined) => {
      await emu.setQuota(PROJECT, region, 'PREEMPTIBLE_NVIDIA_L4_GPUS', limit);
      await emu.setQuota(PROJECT, region, 'NVIDIA_L4_GPUS', limit);
    };
    try {
      await zero('europe-west4', 0);
      const partial = await sterna(spec());
      assert.equal(partial.code, 0);
      const eu = find(partial.findings, 'quota:europe-west4:PREEMPTIBLE_NVIDIA_L4_GPUS');
      assert.equal(eu.ok, true);
      assert.match(eu.problem ?? '', /europe-west4 has no PREEMPTIBLE_NVIDIA_L4_GPUS quota \(limit 0\), and NVIDIA_L4_GPUS, which spot VMs use then, has 0 of 0 free.*placement skips it/);

      await zero('us-central1', 0);
      const none = await sterna(spec());
      assert.equal(none.code, 1);
      const us = find(none.findings, 'quota:us-central1:PREEMPTIBLE_NVIDIA_L4_GPUS');
      assert.equal(us.ok, false);
      assert.match(us.fix ?? '', /PREEMPTIBLE_NVIDIA_L4_GPUS quota of at least 1 in region us-central1/);
      assert.match(us.fix ?? '', /--quota-id=PREEMPTIBLE-NVIDIA-L4-GPUS-per-project-region --preferred-value=1 --dimensions=region=us-central1/);
      assert.deepEqual(blockingFindings(none.findings).map((f) => f.check).sort(), ['quota:europe-west4:PREEMPTIBLE_NVIDIA_L4_GPUS', 'quota:us-central1:PREEMPTIBLE_NVIDIA_L4_GPUS']);

      // Where the region has no preemptible quota, spot VMs use the standard quota: room there is room.
      await emu.setQuota(PROJECT, 'us-central1', 'NVIDIA_L4_GPUS', 2);
      const fallback = await sterna(spec());
      assert.equal(fallback.code, 0);
      assert.deepEqual(find(fallback.findings, 'quota:us-central1:PREEMPTIBLE_NVIDIA_L4_GPUS'), { check: 'quota:us-central1:PREEMPTIBLE_NVIDIA_L4_GPUS', ok: true });
    } finally {
      await zero('europe-west4', undefined);
      await zero('us-central1', undefined);
      await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', undefined);
    }
  });

  it('blocks when the only choice with regional room needs more GPUs than GPUS_ALL_REGIONS allows', async () => {
    await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', 4);
    const regions = ['us-central1', 'europe-west4'];
    try {
      for (const region of regions) for (const metric of ['PREEMPTIBLE_NVIDIA_L4_GPUS', 'NVIDIA_L4_GPUS']) await emu.setQuota(PROJECT, region, metric, 0);
      const { code, findings } = await sterna(spec({ resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }, { type: 'nvidia-tesla-a100', count: 8 }] } }));
      assert.equal(code, 1);
      const global = find(findings, 'quota:GPUS_ALL_REGIONS');
      assert.equal(global.ok, true);
      assert.match(global.problem ?? '', /choices needing 8 GPUs can never start/);
      assert.equal(find(findings, 'quota:us-central1:PREEMPTIBLE_NVIDIA_A100_GPUS').ok, true, 'the A100s fit the region');
      assert.deepEqual(blockingFindings(findings).map((f) => f.check).sort(), regions.map((r) => `quota:${r}:PREEMPTIBLE_NVIDIA_L4_GPUS`).sort());
    } finally {
      for (const region of regions) for (const metric of ['PREEMPTIBLE_NVIDIA_L4_GPUS', 'NVIDIA_L4_GPUS']) await emu.setQuota(PROJECT, region, metric, undefined);
      await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', undefined);
    }
  });

  it('without a spec checks the environment: key, Temporal, the project, one GPU of GPUS_ALL_REGIONS', async () => {
    const { code, findings } = await sterna(undefined);
    assert.equal(code, 1);
    assert.deepEqual(
      findings.map((f) => [f.check, f.ok]),
      [
        ['codec-key', true],
        [`temporal:namespace:${(await testEnv()).namespace}`, true],
        [`temporal:search-attributes:${(await testEnv()).namespace}`, true],
        ['gce:project', true],
        ['quota:GPUS_ALL_REGIONS', false],
      ],
    );
  });

  it('only warns when the quota is big enough but in use now: the run waits for it', async () => {
    await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', 1);
    const instances = new InstancesClient(emu.clientOptions);
    const operations = new ZoneOperationsClient(emu.clientOptions);
    const zone = 'us-central1-a';
    try {
      const [lro] = await instances.insert({
        project: PROJECT,
        zone,
        instanceResource: { name: 'holder', machineType: `zones/${zone}/machineTypes/g2-standard-4`, scheduling: { provisioningModel: 'SPOT', onHostMaintenance: 'TERMINATE', automaticRestart: false }, disks: [{ boot: true }] },
      });
      for (;;) {
        const [op] = await operations.wait({ project: PROJECT, zone, operation: lro.latestResponse.name as string });
        if (op.status === 'DONE') {
          assert.equal(op.error ?? undefined, undefined);
          break;
        }
      }
      const { code, findings } = await sterna(spec());
      assert.equal(code, 0);
      const quota = find(findings, 'quota:GPUS_ALL_REGIONS');
      assert.equal(quota.ok, true);
      assert.match(quota.problem ?? '', /1 of the project's 1 GPUS_ALL_REGIONS are in use now: a run needing 1 GPU waits until some are released/);
      assert.match(quota.fix ?? '', /GPUS_ALL_REGIONS quota of at least 2/);
    } finally {
      await instances.delete({ project: PROJECT, zone, instance: 'holder' }).catch(() => undefined);
      await Promise.all([instances.close(), operations.close()]);
      await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', undefined);
    }
  });

  it('names a missing bucket, a checkpoint bucket it cannot write, and an accelerator offered nowhere', async () => {
    await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', 8);
    await emu.admin.setBucket('ro-bucket', { readOnly: true });
    try {
      const missing = await sterna(spec({ datasets: [{ uri: 'gs://no-such-bucket/x.csv', path: 'x.csv' }] }));
      assert.equal(missing.code, 1);
      const bucket = find(missing.findings, 'bucket:gs://no-such-bucket');
      assert.equal(bucket.ok, false);
      assert.match(bucket.problem ?? '', /no bucket gs:\/\/no-such-bucket \(the run's dataset bucket\)/);
      assert.match(bucket.fix ?? '', /gcloud storage buckets create gs:\/\/no-such-bucket/);

      const readOnly = await sterna(spec({ checkpoint: { uri: 'gs://ro-bucket/ckpt' } }));
      const ro = find(readOnly.findings, 'bucket:gs://ro-bucket');
      assert.equal(ro.ok, false);
      assert.match(ro.problem ?? '', /lack storage\.objects\.create on gs:\/\/ro-bucket: the run reads and writes its checkpoint there/);
      assert.match(ro.fix ?? '', /add-iam-policy-binding gs:\/\/ro-bucket .*--role=roles\/storage\.objectUser/);
      // Read-only is enough for a dataset.
      const asData = await sterna(spec({ datasets: [{ uri: 'gs://ro-bucket/x.csv', path: 'x.csv' }] }));
      assert.deepEqual(find(asData.findings, 'bucket:gs://ro-bucket'), { check: 'bucket:gs://ro-bucket', ok: true });

      const typo = await sterna(spec({ resources: { accelerators: [{ type: 'nvidia-l5', count: 1 }] } }));
      assert.equal(typo.code, 1);
      const acc = find(typo.findings, 'gce:accelerator:nvidia-l5');
      assert.equal(acc.ok, false);
      assert.match(acc.problem ?? '', /GCE offers no nvidia-l5 to project check-test/);
      assert.match(acc.fix ?? '', /gcloud compute accelerator-types list/);
      // Beside an accelerator that is offered, it is a warning only.
      const mixed = await sterna(spec({ resources: { accelerators: [{ type: 'nvidia-l5', count: 1 }, { type: 'nvidia-l4', count: 1 }] } }));
      assert.equal(mixed.code, 0);
      assert.equal(find(mixed.findings, 'gce:accelerator:nvidia-l5').ok, true);
    } finally {
      await emu.admin.setBucket('ro-bucket', {}).catch(() => undefined);
      await emu.setProjectQuota(PROJECT, 'GPUS_ALL_REGIONS', undefined);
    }
  });

  it('names a namespace without Sterna\'s search attributes, with the commands that register them', async () => {
    const { client } = await testEnv();
    const fresh = `fresh-${Date.now().toString(36)}`;
    await client.workflowService.registerNamespace({ namespace: fresh, workflowExecutionRetentionPeriod: msToTs('1 day') });
    // A new namespace reaches the server's namespace cache within seconds.
    const { findings } = await eventually('the new namespace to be served', async () => {
      const outcome = await sterna(spec(), { TEMPORAL_NAMESPACE: fresh });
      return find(outcome.findings, `temporal:namespace:${fresh}`).ok ? outcome : undefined;
    }, 60_000, 1000);
    const attrs = find(findings, `temporal:search-attributes:${fresh}`);
    assert.equal(attrs.ok, false);
    for (const key of sternaSearchAttributes) assert.match(attrs.problem ?? '', new RegExp(`\\b${key.name}\\b`));
    assert.match(attrs.fix ?? '', new RegExp(`temporal operator search-attribute create --namespace ${fresh} --name SternaPhase`));

    const unknown = await sterna(spec(), { TEMPORAL_NAMESPACE: 'no-such-namespace' });
    const ns = find(unknown.findings, 'temporal:namespace:no-such-namespace');
    assert.equal(ns.ok, false);
    assert.match(ns.fix ?? '', /temporal operator namespace create --namespace no-such-namespace/);
  });

  it('names a missing codec key with `sterna codec-key new`', async () => {
    const home = join(dir, 'no-keys-home');
    mkdirSync(home, { recursive: true });
    const { code, findings } = await sterna(spec(), { STERNA_CODEC_KEYS: undefined, STERNA_CODEC_KEYS_FILE: undefined, XDG_CONFIG_HOME: home });
    assert.equal(code, 1);
    const key = find(findings, 'codec-key');
    assert.equal(key.ok, false);
    assert.match(key.problem ?? '', /no payload encryption key/);
    assert.match(key.fix ?? '', /`sterna codec-key new`/);
    // The namespace's search attributes are still read: that needs no key.
    assert.equal(find(findings, `temporal:search-attributes:${(await testEnv()).namespace}`).ok, true);
  });

  it('names an unreachable Kubernetes API for a GKE spec, and a malformed image', async () => {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u', namespace: 'ml' } }],
        'current-context': 'x',
      }),
    );
    const { code, findings } = await sterna(spec({ backend: 'gke', image: 'Trainer/Image:1.0' }), { STERNA_GKE_KUBECONFIG: kubeconfig, STERNA_GKE_NAMESPACE: 'ml' });
    assert.equal(code, 1);
    const api = find(findings, 'kubernetes:api');
    assert.equal(api.ok, false);
    assert.match(api.problem ?? '', /the Kubernetes API at https:\/\/127\.0\.0\.1:1 did not answer/);
    assert.ok(!findings.some((f) => f.check.startsWith('quota:')), 'a GKE spec is not checked against GCE quotas');
    const image = find(findings, 'image');
    assert.equal(image.ok, false);
    assert.match(image.problem ?? '', /repository name must be lowercase/);
  });

  it('runs the same checks in-process on a worker\'s NativeConnection, as the run\'s first step will', async () => {
    const env = await testEnv();
    const config = loadWorkerConfig({ STERNA_GCE_PROJECT: PROJECT, STERNA_GCE_ENDPOINT: emu.endpoint, STERNA_LOCAL_BUCKETS: buckets });
    const { targets, close } = await buildCheckTargets(config, { connect: async () => ({ operatorService: env.nativeConnection.operatorService, namespace: env.namespace ?? 'default' }) });
    try {
      const findings = await createCheckActivities(targets).checkBeforeRun({ spec: parseSpec(spec()) }) ?? [];
      assert.deepEqual(blockingFindings(findings).map((f) => f.check), ['quota:GPUS_ALL_REGIONS']);
      assert.equal(find(findings, `temporal:search-attributes:${env.namespace}`).ok, true);
      assert.deepEqual(JSON.parse(JSON.stringify(findings)), findings, 'findings are plain JSON, fit for workflow history');
    } finally {
      await close();
    }
  });
});

describe('image references (the registry grammar)', () => {
  it('accepts what registries accept', () => {
    for (const ref of ['python', 'python:3.12-slim', 'library/python:3', 'us-docker.pkg.dev/my-project/train/trainer:1.2', 'localhost:5000/x', 'ghcr.io/a/b-c__d.e', `ghcr.io/a/b@sha256:${'a'.repeat(64)}`, `x:1@sha256:${'0'.repeat(64)}`, '[::1]:5000/x:y', 'My.Registry.example/x']) {
      assert.equal(imageReferenceProblem(ref), undefined, ref);
    }
  });
  it('names what is wrong with a malformed one', () => {
    assert.match(imageReferenceProblem('Trainer') ?? '', /lowercase/);
    assert.match(imageReferenceProblem('ghcr.io/Org/x') ?? '', /lowercase/);
    assert.match(imageReferenceProblem('') ?? '', /cannot be empty/);
    for (const ref of ['a:b:c', 'x/', '-x', 'x:-tag', 'x@sha256:abc', 'x y']) assert.match(imageReferenceProblem(ref) ?? '', /is not an image reference/, ref);
    assert.match(imageReferenceProblem(`x@sha256:${'a'.repeat(63)}`) ?? '', /64 hex digits/);
    assert.match(imageReferenceProblem(`${'a'.repeat(256)}`) ?? '', /more than the 255 allowed/);
  });
});
