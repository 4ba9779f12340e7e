/**
 * The bucket checks before a run: each bucket the spec names exists, and the credentials
 * the check runs with hold what the run needs there — read (storage.objects.get, list) on
 * dataset buckets; read and write (storage.objects.create) on the checkpoint bucket. One
 * call per bucket, GCS's `buckets.testIamPermissions`
 * (GET <endpoint>/storage/v1/b/<bucket>/iam/testPermissions), which writes nothing; the
 * emulator answers it the same way (emulator/storage-api.ts).
 *
 * These are the caller's permissions (the worker's, or `sterna check`'s user's). Training
 * VMs act as their own service account, which needs the same roles: the fix names it when
 * the worker is configured with one.
 */
import type { Finding } from '../../workflows/checks';
import { isBucketName } from '../../workflows/storage-uri';
import type { AuthorizedRequester } from '../storage';

const READ = ['storage.objects.get', 'storage.objects.list'];
const WRITE = ['storage.objects.create'];
const DEFAULT_TIMEOUT_MS = 15_000;

export interface StorageTarget {
  /** The storage API's base URL: https://storage.googleapis.com, or the emulator's. */
  endpoint: string;
  requester: AuthorizedRequester;
  /** The training VMs' service account, for the fix (the VMs read and write as it). */
  vmServiceAccount?: string;
  timeoutMs?: number;
}

/** What the run does with a bucket, e.g. "checkpoint" (read and written) or "dataset" (read). */
export interface BucketUse {
  bucket: string;
  uses: string[];
  write: boolean;
}

/** The buckets of the spec's URIs, each with what the run does there. */
export function bucketUses(checkpointUri: string | undefined, datasetUris: readonly string[]): BucketUse[] {
  const uses = new Map<string, BucketUse>();
  const add = (uri: string, use: string, write: boolean) => {
    const bucket = /^gs:\/\/([^/]+)/.exec(uri)?.[1];
    if (!bucket) return;
    const entry = uses.get(bucket) ?? { bucket, uses: [], write: false };
    if (!entry.uses.includes(use)) entry.uses.push(use);
    entry.write ||= write;
    uses.set(bucket, entry);
  };
  if (checkpointUri) add(checkpointUri, 'checkpoint', true);
  for (const uri of datasetUris) add(uri, 'dataset', false);
  return [...uses.values()];
}

export async function checkBuckets(target: StorageTarget, buckets: readonly BucketUse[]): Promise<Finding[]> {
  return Promise.all(buckets.map((b) => checkBucket(target, b)));
}

async function checkBucket(target: StorageTarget, use: BucketUse): Promise<Finding> {
  const check = `bucket:gs://${use.bucket}`;
  const role = use.uses.join(' and ');
  if (!isBucketName(use.bucket)) return { check, ok: false, problem: `"${use.bucket}" is not a GCS bucket name`, fix: 'correct the gs:// URI in the spec' };
  const wanted = [...READ, ...(use.write ? WRITE : [])];
  const query = wanted.map((p) => `permissions=${encodeURIComponent(p)}`).join('&');
  const url = `${target.endpoint.replace(/\/+$/, '')}/storage/v1/b/${encodeURIComponent(use.bucket)}/iam/testPermissions?${query}`;
  let held: string[];
  try {
    const response = await target.requester.request<{ permissions?: unknown }>({ url, method: 'GET', responseType: 'json', timeout: target.timeoutMs ?? DEFAULT_TIMEOUT_MS, retry: true });
    held = Array.isArray(response.data?.permissions) ? response.data.permissions.filter((p): p is string => typeof p === 'string') : [];
  } catch (err) {
    const status = (err as { response?: { status?: number }; status?: number })?.response?.status ?? (err as { status?: number })?.status;
    if (status === 404) {
      return { check, ok: false, problem: `no bucket gs://${use.bucket} (the run's ${role} bucket)`, fix: `create it in a region near your GPUs: \`gcloud storage buckets create gs://${use.bucket} --location=<region>\`, or correct the spec's URI` };
    }
    // No status (no answer), a 5xx or a rate limit passes; a 401 or 403 is an answer.
    const transient = status === undefined || status >= 500 || status === 429;
    return { check, ok: false, problem: `the storage API did not answer for gs://${use.bucket} (${describe(err)})`, fix: `check the credentials reach ${target.endpoint} (\`gcloud storage ls gs://${use.bucket}\` makes a similar call)`, ...(transient ? { transient } : {}) };
  }
  const missing = wanted.filter((p) => !held.includes(p));
  if (missing.length === 0) return { check, ok: true };
  const member = target.vmServiceAccount ? `serviceAccount:${target.vmServiceAccount}` : "<the worker's and the training VMs' service accounts>";
  const grant = use.write ? 'roles/storage.objectUser' : 'roles/storage.objectViewer';
  return {
    check,
    ok: false,
    checkersOwn: true,
    problem: `these credentials lack ${missing.join(', ')} on gs://${use.bucket}: the run ${use.write ? 'reads and writes' : 'reads'} its ${role} there`,
    fix: `\`gcloud storage buckets add-iam-policy-binding gs://${use.bucket} --member=${member} --role=${grant}\``,
  };
}

function describe(err: unknown): string {
  const e = err as { code?: string | number; message?: string; response?: { status?: number } } | undefined;
  const status = e?.response?.status;
  return `${status !== undefined ? `HTTP ${status}: ` : e?.code !== undefined ? `${e.code}: ` : ''}${(e?.message ?? String(err)).slice(0, 300)}`;
}
