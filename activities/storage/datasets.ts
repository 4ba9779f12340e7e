/**
 * Whether each dataset a run stages exists, asked before any VM is created: a missing
 * object fails the run at once (workflows/run/datasets.ts) instead of costing a VM per
 * restart. Asked through the path the agent stages from:
 *
 *   gs:// on Google Cloud: the GCS JSON API (objects.get, then objects.list for a prefix,
 *     as `gcloud storage cp --recursive` stages either), with the read-only storage scope;
 *   file:// where the worker maps gs:// for its VMs (the emulator's local buckets): the file
 *     or directory itself.
 *
 * Only a definite "not there" says missing. A problem (no permission, the API not
 * reachable) is unknown: the run goes on and the agent finds out, as before.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { GoogleAuth, PassThroughClient } from 'google-auth-library';
import type { DatasetAnswer } from '../../workflows/api';
import { describeProblem, GCS_ENDPOINT, STORAGE_READ_SCOPE, type AuthorizedRequester } from './buckets';

const DEFAULT_TIMEOUT_MS = 10_000;

export interface DatasetCheckerOptions {
  /** The storage API's base URL (GCS_ENDPOINT on Google Cloud). */
  endpoint: string;
  requester: AuthorizedRequester;
  /** What the VMs stage from, as the provider maps it (the emulator: gs:// -> file://). */
  uriForVm?: (uri: string) => string;
  timeoutMs?: number;
}

export class DatasetChecker {
  constructor(private readonly options: DatasetCheckerOptions) {}

  static forGcs(endpoint = GCS_ENDPOINT): DatasetChecker {
    return new DatasetChecker({ endpoint, requester: new GoogleAuth({ scopes: [STORAGE_READ_SCOPE] }) });
  }

  /** The emulator: its VMs stage gs:// from local files (`uriForVm`); the API needs no credentials. */
  static forEmulator(endpoint: string, uriForVm?: (uri: string) => string): DatasetChecker {
    return new DatasetChecker({ endpoint, requester: new PassThroughClient(), uriForVm });
  }

  async check(uri: string): Promise<DatasetAnswer> {
    const staged = this.options.uriForVm?.(uri) ?? uri;
    if (staged.startsWith('file://')) {
      // The agent copies a file or a whole directory (cp -R): either is there or not.
      return existsSync(fileURLToPath(staged)) ? { uri, exists: true } : { uri, exists: false, problem: `no such object or prefix (the VMs stage it from ${staged})` };
    }
    const match = /^gs:\/\/([^/]+)(?:\/(.*))?$/s.exec(staged);
    if (!match) return { uri, problem: `not a gs:// URI the check can read (${staged.slice(0, 200)})` };
    const [, bucket, object = ''] = match;
    try {
      if (object !== '' && !object.endsWith('/') && (await this.objectExists(bucket, object))) return { uri, exists: true };
      const prefix = object === '' || object.endsWith('/') ? object : `${object}/`;
      const listed = await this.anyUnder(bucket, prefix);
      if (listed === 'no-bucket') return { uri, exists: false, problem: `no bucket gs://${bucket}` };
      return listed ? { uri, exists: true } : { uri, exists: false, problem: object === '' ? `gs://${bucket} holds no objects` : `no object ${uri}, nor any under ${uri.replace(/\/?$/, '/')}` };
    } catch (err) {
      return { uri, problem: describeProblem(bucket, err) };
    }
  }

  /** objects.get: true, or false on 404 (no such object, or no such bucket: the listing tells which). */
  private async objectExists(bucket: string, object: string): Promise<boolean> {
    try {
      await this.get(`/storage/v1/b/${encodeURIComponent(bucket)}/o/${encodeURIComponent(object)}`, { fields: 'name' });
      return true;
    } catch (err) {
      if (statusOf(err) === 404) return false;
      throw err;
    }
  }

  /** objects.list with one result: whether anything is under `prefix`, or the bucket itself is missing. */
  private async anyUnder(bucket: string, prefix: string): Promise<boolean | 'no-bucket'> {
    try {
      const data = await this.get<{ items?: unknown[] }>(`/storage/v1/b/${encodeURIComponent(bucket)}/o`, { prefix, maxResults: 1, fields: 'items(name)' });
      return (data.items?.length ?? 0) > 0;
    } catch (err) {
      if (statusOf(err) === 404) return 'no-bucket';
      throw err;
    }
  }

  private async get<T>(path: string, params: Record<string, string | number>): Promise<T> {
    const response = await this.options.requester.request<T>({
      url: `${this.options.endpoint.replace(/\/+$/, '')}${path}`,
      method: 'GET',
      params,
      responseType: 'json',
      timeout: this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      // 429, 5xx and network errors, a few times with backoff (gaxios's defaults).
      retry: true,
    });
    return response.data;
  }
}

function statusOf(err: unknown): number | undefined {
  const e = err as { status?: number; response?: { status?: number } } | undefined;
  return e?.response?.status ?? e?.status;
}
