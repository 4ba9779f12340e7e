/**
 * A packed workdir into the run's bucket, content-addressed:
 *
 *   <spec.checkpoint.uri>/workdirs/<sha256>.tar.gz
 *
 * beside the runs' own prefixes (<checkpoint.uri>/<run key>/), so every run started from
 * the same tree with the same checkpoint prefix shares one object, and an unchanged tree is
 * never uploaded again: the object is looked up first. Written where the worker's VMs read
 * it: the emulator's local bucket directory (gs://b/p = <dir>/b/p, written whole, then
 * renamed), or Cloud Storage through the GCS JSON API (objects.get for the look-up, a media
 * upload with ifGenerationMatch=0 so that two starters never replace each other's object),
 * sent through google-auth-library: Application Default Credentials with the read-write
 * storage scope on Google Cloud, none over plain HTTP (the emulator's storage API).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type * as GoogleAuthLibrary from 'google-auth-library';
import type { WorkdirRef } from '../../workflows/types';
import { ClientErrorKind, SternaClientError } from '../errors';
import type { PackedWorkdir } from './pack';

const GCS_ENDPOINT = 'https://storage.googleapis.com';
const STORAGE_WRITE_SCOPE = 'https://www.googleapis.com/auth/devstorage.read_write';
const TIMEOUT_MS = 300_000;

/** What sends a GCS request (google-auth-library's GoogleAuth or PassThroughClient); typed here so the package's declarations need nothing more. */
export interface UploadRequester {
  request<T>(opts: {
    url: string;
    method?: 'GET' | 'POST';
    params?: Record<string, string>;
    headers?: Record<string, string>;
    data?: Buffer;
    responseType?: 'json';
    timeout?: number;
    retry?: boolean;
    retryConfig?: { httpMethodsToRetry?: string[] };
  }): Promise<{ data: T }>;
}

export interface WorkdirStorage {
  /** The emulator's local buckets: gs://b/p is <dir>/b/p, as the worker maps it for its VMs. */
  localBucketsDir?: string;
  /** The GCS JSON API's base URL (Cloud Storage's, or the emulator's http://127.0.0.1:<port>). */
  storageEndpoint?: string;
  /** Who sends the GCS requests (default: ADC for https, no credentials for plain http). */
  requester?: UploadRequester;
}

export interface UploadedWorkdir extends WorkdirRef {
  /** False when the object was there already (the same tree was uploaded before). */
  uploaded: boolean;
}

/** The object a pack goes to, under the spec's checkpoint prefix. */
export function workdirObjectUri(checkpointUri: string, sha256: string): string {
  return `${checkpointUri.replace(/\/+$/, '')}/workdirs/${sha256}.tar.gz`;
}

function uploadFailed(uri: string, why: string, hint: string, cause?: unknown): SternaClientError {
  return new SternaClientError(ClientErrorKind.WorkdirUploadFailed, `cannot upload the workdir to ${uri}: ${why}`, hint, { cause });
}

/** Puts `packed` at its content address under `checkpointUri` unless it is there already. */
export async function uploadWorkdir(packed: PackedWorkdir, checkpointUri: string, storage: WorkdirStorage = {}): Promise<UploadedWorkdir> {
  const uri = workdirObjectUri(checkpointUri, packed.sha256);
  const match = /^gs:\/\/([^/]+)\/(.+)$/s.exec(uri);
  if (!match) throw uploadFailed(uri, 'expected a gs://bucket/path checkpoint URI', 'fix checkpoint.uri in the spec');
  const [, bucket, object] = match;
  const uploaded = storage.localBucketsDir ? await toLocalBucket(join(storage.localBucketsDir, bucket, object), packed.data, uri) : await toGcs(bucket, object, packed.data, uri, storage);
  return { uri, sha256: packed.sha256, uploaded };
}

async function toLocalBucket(file: string, data: Buffer, uri: string): Promise<boolean> {
  const existing = await stat(file).then((s) => s.size, () => undefined);
  if (existing === data.length) return false;
  const part = `${file}.part-${randomBytes(6).toString('hex')}`;
  try {
    await mkdir(dirname(file), { recursive: true });
    await writeFile(part, data);
    await rename(part, file);
    return true;
  } catch (err) {
    await rm(part, { force: true });
    throw uploadFailed(uri, `${(err as Error).message}`, `check that the local bucket directory ${dirname(file)} is writable`, err);
  }
}

async function defaultRequester(endpoint: string): Promise<UploadRequester> {
  let auth: typeof GoogleAuthLibrary;
  try {
    auth = await import('google-auth-library');
  } catch {
    throw uploadFailed(endpoint, 'the google-auth-library package is missing', 'npm install google-auth-library (for Application Default Credentials)');
  }
  return endpoint.startsWith('http://') ? new auth.PassThroughClient() : new auth.GoogleAuth({ scopes: [STORAGE_WRITE_SCOPE] });
}

function statusOf(err: unknown): number | undefined {
  return (err as { response?: { status?: number }; status?: number }).response?.status ?? (err as { status?: number }).status;
}

async function toGcs(bucket: string, object: string, data: Buffer, uri: string, storage: WorkdirStorage): Promise<boolean> {
  const endpoint = (storage.storageEndpoint ?? GCS_ENDPOINT).replace(/\/+$/, '');
  const requester = storage.requester ?? (await defaultRequester(endpoint));
  const permission = `grant your account roles/storage.objectUser on gs://${bucket} (or sign in with \`gcloud auth application-default login\` as one that has it)`;
  const failed = (what: string, err: unknown) => {
    const status = statusOf(err);
    if (status === 401 || status === 403) return uploadFailed(uri, `no permission to ${what} (HTTP ${status})`, permission, err);
    if (status === 404) return uploadFailed(uri, `no bucket gs://${bucket} at ${endpoint}`, 'fix checkpoint.uri in the spec, or create the bucket', err);
    const why = status !== undefined ? `HTTP ${status}` : (err as Error).message;
    return uploadFailed(uri, `the storage API at ${endpoint} did not ${what} (${why.slice(0, 300)})`, 'check the network and retry; STERNA_STORAGE_ENDPOINT names another storage API', err);
  };
  const objectUrl = `${endpoint}/storage/v1/b/${encodeURIComponent(bucket)}/o/${encodeURIComponent(object)}`;
  try {
    const { data: found } = await requester.request<{ size?: string }>({ url: objectUrl, params: { fields: 'name,size' }, responseType: 'json', timeout: TIMEOUT_MS, retry: true });
    if (Number(found?.size) === data.length) return false;
  } catch (err) {
    if (statusOf(err) !== 404) throw failed('look the object up', err);
  }
  try {
    await requester.request({
      url: `${endpoint}/upload/storage/v1/b/${encodeURIComponent(bucket)}/o`,
      method: 'POST',
      // Never replaces an object: one already there holds these very bytes (its name is their sha256).
      params: { uploadType: 'media', name: object, ifGenerationMatch: '0' },
      headers: { 'Content-Type': 'application/gzip' },
      data,
      responseType: 'json',
      timeout: TIMEOUT_MS,
      retry: true,
      retryConfig: { httpMethodsToRetry: ['GET', 'POST'] },
    });
    return true;
  } catch (err) {
    // Another start of the same tree put it there first.
    if (statusOf(err) === 412) return false;
    throw failed('take the upload', err);
  }
}
