/**
 * Secret references in the spec, what the VM and the pod are given for them, the VMs'
 * least-privilege configuration, and the names Sterna derives: all without a server.
 */
import { strict as assert } from 'node:assert';
import { KubeConfig } from '@kubernetes/client-node';
import { agentAttributes } from '../../activities/agent/script';
import { vmAccessFields } from '../../activities/providers/gce-vm-access';
import { GkeProvider } from '../../activities/providers/gke';
import { catalogPriceBook } from '../../config/price-book';
import { DEFAULT_VM_ACCESS, Scope } from '../../config/vm-access';
import { loadWorkerConfig } from '../../config/worker-config';
import type { AgentInputs } from '../../workflows/activity-contract';
import { GCE_MAX_LABELS, isLabelKey, isLabelValue, labelProblems, MAX_USER_LABELS } from '../../workflows/labels';
import { executionToken, ownerLabels, resourceLabels, resourceName, runKey } from '../../workflows/naming';
import { seededRandom } from '../../workflows/random';
import { checkSpec, specWarnings, type RunSpecInput } from '../../workflows/spec';

const GSM = 'gcp-secret-manager://projects/my-project/secrets/hf-token/versions/latest';
const base: RunSpecInput = {
  command: ['python', 'train.py'],
  checkpoint: { uri: 'gs://my-bucket/ckpt' },
  resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] },
};
const problems = (spec: RunSpecInput) => {
  const check = checkSpec(spec);
  return check.ok ? [] : check.problems.map((p) => `${p.path}: ${p.message}`);
};
const agent = (secrets: Record<string, string> = {}): AgentInputs => ({ runId: 'r', attempt: 1, argv: ['x'], env: {}, secrets, datasets: [], checkpointUri: 'gs://b/c', pollSeconds: 1 });

describe('secret references in the spec', () => {
  it('accepts references of both kinds on their own backend', () => {
    assert.deepEqual(problems({ ...base, secrets: { HF_TOKEN: GSM, DB: 'gcp-secret-manager://projects/123456789012/secrets/db_pass-2/versions/7' } }), []);
    assert.deepEqual(problems({ ...base, backend: 'gke', secrets: { HF_TOKEN: 'k8s://hf-token/token', W: 'k8s://team.secrets/api_key.v2' } }), []);
  });

  it('refuses a value that is not a reference, a reference for the other backend, and a name also in env, naming each', () => {
    const cases: [RunSpecInput, RegExp][] = [
      [{ ...base, secrets: { HF_TOKEN: 'hf_abc123' } }, /^secrets\.HF_TOKEN: a reference such as "gcp-secret-manager:\/\//],
      [{ ...base, secrets: { X: 'gcp-secret-manager://projects/p/secrets/s/versions/latest' } }, /^secrets\.X: a reference/],
      [{ ...base, secrets: { X: 'gcp-secret-manager://projects/my-project/secrets/s/versions/0' } }, /^secrets\.X: a reference/],
      [{ ...base, secrets: { X: 'k8s://Upper/key' } }, /^secrets\.X: a reference/],
      [{ ...base, secrets: { X: 'k8s://name/../etc' } }, /^secrets\.X: a reference/],
      [{ ...base, secrets: { X: 'k8s://name/key' } }, /^secrets\.X: a k8s:\/\/ reference resolves on backend gke, and this run's backend is gce/],
      [{ ...base, backend: 'gke', secrets: { X: GSM } }, /^secrets\.X: a gcp-secret-manager:\/\/ reference resolves on backend gce/],
      [{ ...base, env: { HF_TOKEN: 'x' }, secrets: { HF_TOKEN: GSM } }, /^secrets\.HF_TOKEN: HF_TOKEN is also in env/],
      [{ ...base, secrets: { STERNA_X: GSM } }, /^secrets\.STERNA_X: names starting with STERNA_/],
      [{ ...base, secrets: { 'A-B': GSM } }, /^secrets\.A-B: environment names/],
    ];
    for (const [spec, expected] of cases) {
      const found = problems(spec);
      assert.equal(found.length, 1, `${JSON.stringify(spec.secrets)}: ${found.join('; ')}`);
      assert.match(found[0], expected);
    }
  });

  it('warns, naming the key, when an env name looks like a secret; plain settings pass quietly', () => {
    const check = checkSpec({ ...base, env: { HF_TOKEN: 'x', WANDB_API_KEY: 'x', DB_PASSWORD: 'x', AWS_SECRET_ACCESS_KEY: 'x', BATCH_SIZE: '8', KEYBOARD: 'us', TOKENIZERS_PARALLELISM: 'false' } });
    assert.ok(check.ok);
    const warned = specWarnings(check.spec);
    assert.deepEqual(warned.map((w) => w.path).sort(), ['env.AWS_SECRET_ACCESS_KEY', 'env.DB_PASSWORD', 'env.HF_TOKEN', 'env.WANDB_API_KEY']);
    assert.match(warned[0].message, /stored in workflow history and in the VM's metadata; pass it as secrets: \{ "[A-Z_]+": "gcp-secret-manager:\/\//);
  });
});

describe('what the VM and the pod are given for a secret', () => {
  it('GCE: the metadata names where the secret lives, never a value', () => {
    const attributes = agentAttributes(agent({ HF_TOKEN: GSM }));
    const list = attributes['sterna-secrets'].split('\n').slice(1, -1).map((line) => Buffer.from(line, 'base64').toString());
    assert.deepEqual(list, ['HF_TOKEN', 'projects/my-project/secrets/hf-token/versions/latest']);
    assert.equal(agentAttributes(agent())['sterna-secrets'], undefined);
  });

  it('GKE: a secretKeyRef under STERNA_SECRET_<NAME>, and no secret list for the agent to fetch', () => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({ clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }], users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
    const provider = new GkeProvider({ kubeConfig, namespace: 'default', prices: catalogPriceBook() });
    const offer = { backend: 'gke', zone: 'us-central1-a', region: 'us-central1', accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-8', provisioningModel: 'SPOT', pricePerHour: 1, onDemandPricePerHour: 2, quotaAvailable: true } as const;
    const job = provider.jobManifest({ name: 'st-x-a1', offer, owner: { run: 'x', execution: 'e', attempt: 1 }, labels: {}, diskSizeGb: 100, agent: agent({ HF_TOKEN: 'k8s://hf/token' }) });
    const env = job.spec!.template.spec!.containers[0].env!;
    assert.deepEqual(env.find((e) => e.name === 'STERNA_SECRET_HF_TOKEN'), { name: 'STERNA_SECRET_HF_TOKEN', valueFrom: { secretKeyRef: { name: 'hf', key: 'token' } } });
    assert.equal(env.find((e) => e.name === 'STERNA_ATTR_sterna_secrets'), undefined);
    provider.close();
  });
});

describe('least-privilege VMs', () => {
  it('by default: no external IP, storage and logging scopes only, Shielded VM without Secure Boot', () => {
    const fields = vmAccessFields(DEFAULT_VM_ACCESS, 'us-central1', agent());
    assert.deepEqual(fields.networkInterfaces, [{ network: 'global/networks/default' }]);
    assert.deepEqual(fields.serviceAccounts, [{ email: 'default', scopes: [Scope.StorageReadWrite, Scope.LoggingWrite] }]);
    assert.deepEqual(fields.shieldedInstanceConfig, { enableSecureBoot: false, enableVtpm: true, enableIntegrityMonitoring: true });
  });

  it('adds cloud-platform only for a run with Secret Manager references (the one scope it accepts)', () => {
    assert.ok(vmAccessFields(DEFAULT_VM_ACCESS, 'us-central1', agent({ HF_TOKEN: GSM })).serviceAccounts![0].scopes!.includes(Scope.CloudPlatform));
  });

  it('takes the service account, scopes, network, subnetwork per region, external IP and Secure Boot from the worker environment', () => {
    const config = loadWorkerConfig({
      STERNA_GCE_PROJECT: 'my-project',
      STERNA_GCE_SERVICE_ACCOUNT: 'sterna-vm@my-project.iam.gserviceaccount.com',
      STERNA_GCE_SCOPES: Scope.StorageReadWrite,
      STERNA_GCE_NETWORK: 'projects/host-project/global/networks/shared',
      STERNA_GCE_SUBNETWORK: 'projects/host-project/regions/{region}/subnetworks/training',
      STERNA_GCE_EXTERNAL_IP: 'true',
      STERNA_GCE_SECURE_BOOT: 'true',
    });
    const fields = vmAccessFields(config.gce!.vmAccess!, 'europe-west4', agent());
    assert.deepEqual(fields.networkInterfaces, [
      { network: 'projects/host-project/global/networks/shared', subnetwork: 'projects/host-project/regions/europe-west4/subnetworks/training', accessConfigs: [{ name: 'External NAT', type: 'ONE_TO_ONE_NAT' }] },
    ]);
    assert.deepEqual(fields.serviceAccounts, [{ email: 'sterna-vm@my-project.iam.gserviceaccount.com', scopes: [Scope.StorageReadWrite] }]);
    assert.equal(fields.shieldedInstanceConfig?.enableSecureBoot, true);
    assert.deepEqual(vmAccessFields({ ...DEFAULT_VM_ACCESS, subnetwork: 'training' }, 'us-east1', agent()).networkInterfaces![0].subnetwork, 'regions/us-east1/subnetworks/training');
    assert.throws(() => loadWorkerConfig({ STERNA_GCE_PROJECT: 'my-project', STERNA_GCE_SCOPES: 'cloud-platform' }), /STERNA_GCE_SCOPES\.0: OAuth scope URLs/);
  });
});

describe('every name Sterna derives is valid on GCE and Kubernetes alike', () => {
  const GCE_NAME = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
  const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

  it('from any workflow id and run id (fuzzed, seeded), with the most user labels a spec may add', () => {
    const random = seededRandom(16);
    const alphabet = [...'abcXYZ019-_. /:#é中😀\u0000'];
    const text = (max: number) => Array.from({ length: Math.floor(random() * max) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
    const userLabels = Object.fromEntries(Array.from({ length: MAX_USER_LABELS }, (_, i) => [`k${i}`, 'v']));
    for (let n = 0; n < 3000; n++) {
      const workflowId = text(n % 10 === 0 ? 1000 : 80) || '-';
      const execution = executionToken(text(60));
      const attempt = 1 + Math.floor(random() * 10_000);
      const name = resourceName(workflowId, execution, attempt);
      const where = `${JSON.stringify(workflowId)} attempt ${attempt}`;
      assert.match(name, GCE_NAME, where);
      assert.match(name, DNS_1123_LABEL, `${where}: a Job name that is also a valid label value`);
      const owner = { run: runKey(workflowId), execution, attempt };
      for (const [key, value] of Object.entries(ownerLabels(owner))) assert.ok(isLabelKey(key) && isLabelValue(value), `${where}: ${key}=${value}`);
      // GKE adds sterna-managed: still within GCE's 64.
      const all = { ...resourceLabels(owner, userLabels), 'sterna-managed': 'true' };
      assert.deepEqual(labelProblems(all, { userLabels: false }), [], where);
      assert.ok(Object.keys(all).length <= GCE_MAX_LABELS);
    }
  });
});
