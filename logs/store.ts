/**
 * Reading a run's log objects where the agent put them: a local directory (file://, or a
 * gs:// URI mapped onto the emulator's local buckets, as the worker maps it for its VMs)
 * or Cloud Storage through the GCS JSON API (objects.list with a delimiter and a start
 * offset, objects.get with alt=media and a Range), sent through google-auth-library's
 * authorized requests: Application Default Credentials with the read-only storage scope
 * on Google Cloud, none for the emulator's storage API.
 *
 * Paths given to a store are relative to the prefix it was made for ("logs/attempt-000001").
 */
import { open, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type * as GoogleAuthLibrary from 'google-auth-library';

/**
 * What sends a GCS request: google-auth-library's GoogleAuth (ADC) and PassThroughClient
 * (the emulator) both do. Declared here, not taken from google-auth-library's types, so
 * the client package's declarations need no package it does not depend on.
 */
export interface AuthorizedRequester {
  request<T>(opts: { url: string; params?: Record<string, string>; headers?: Record<string, string>; responseType?: 'json' | 'arraybuffer'; timeout?: number; retry?: boolean }): Promise<{ data: T }>;
}

/** As activities/storage's (not imported: the client package carries this module, not the worker's). */
const GCS_ENDPOINT = 'https://storage.googleapis.com';
const STORAGE_READ_SCOPE = 'https://www.googleapis.com/auth/devstorage.read_only';

/**
 * google-auth-library, loaded when a GCS store first sends a request: a reader of local
 * buckets (and the client package, which does not depend on it) never needs it.
 */
async function defaultRequester(endpoint: string): Promise<AuthorizedRequester> {
  let auth: typeof GoogleAuthLibrary;
  try {
    auth = await import('google-auth-library');
  } catch {
    throw new LogStoreError(`reading a log from ${endpoint} needs the google-auth-library package (npm install google-auth-library), for Application Default Credentials`);
  }
  return endpoint.startsWith('http://') ? new auth.PassThroughClient() : new auth.GoogleAuth({ scopes: [STORAGE_READ_SCOPE] });
}

export interface StoredObject {
  /** The name below the listed directory (no slash). */
  name: string;
  size: number;
}

export interface LogStore {
  /** Where it reads, for messages: a URI. */
  readonly location: string;
  /** The sub-directories (prefixes) just below `dir`, by name; none when it does not exist. */
  listDirs(dir: string): Promise<string[]>;
  /** The objects just below `dir`, sorted by name, from `startAt` (inclusive) on. */
  listObjects(dir: string, startAt?: string): Promise<StoredObject[]>;
  /** The object's bytes from byte `from` on (empty when it has no more). */
  read(dir: string, name: string, from: number): Promise<Buffer>;
}

/** A store that could not be read: `message` names it and says how to fix it. */
export class LogStoreError extends Error {
  override name = 'LogStoreError';
}

export class LocalLogStore implements LogStore {
  readonly location: string;

  constructor(private readonly root: string) {
    this.location = `file://${root}`;
  }

  async listDirs(dir: string): Promise<string[]> {
    const entries = await this.entries(dir);
    return entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  }

  async listObjects(dir: string, startAt?: string): Promise<StoredObject[]> {
    const names = (await this.entries(dir)).filter((e) => e.isFile() && (startAt === undefined || e.name >= startAt)).map((e) => e.name).sort();
    const objects: StoredObject[] = [];
    for (const name of names) {
      // A file renamed away between the listing and its stat was replaced: the next look sees it.
      const size = await stat(join(this.root, dir, name)).then((s) => s.size, () => undefined);
      if (size !== undefined) objects.push({ name, size });
    }
    return objects;
  }

  async read(dir: string, name: string, from: number): Promise<Buffer> {
    const file = await open(join(this.root, dir, name), 'r');
    try {
      const { size } = await file.stat();
      if (size <= from) return Buffer.alloc(0);
      const buffer = Buffer.alloc(size - from);
      const { bytesRead } = await file.read(buffer, 0, buffer.length, from);
      return buffer.subarray(0, bytesRead);
    } finally {
      await file.close();
    }
  }

  private async entries(dir: string) {
    try {
      return await readdir(join(this.root, dir), { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return [];
      throw new LogStoreError(`cannot read the log directory ${join(this.root, dir)}: ${(err as Error).message}`);
    }
  }
}

const TIMEOUT_MS = 30_000;

export class GcsLogStore implements LogStore {
  readonly location: string;
  private readonly base: string;

  constructor(
    private readonly bucket: string,
    prefix: string,
    private readonly endpoint: string,
    private requester?: AuthorizedRequester,
  ) {
    this.base = prefix.replace(/^\/+|\/+$/g, '');
    this.location = `gs://${bucket}/${this.base}`;
  }

  async listDirs(dir: string): Promise<string[]> {
    const prefix = this.objectPrefix(dir);
    const dirs: string[] = [];
    await this.list(prefix, undefined, (page) => {
      for (const p of page.prefixes ?? []) dirs.push(p.slice(prefix.length).replace(/\/$/, ''));
    });
    return dirs.sort();
  }

  async listObjects(dir: string, startAt?: string): Promise<StoredObject[]> {
    const prefix = this.objectPrefix(dir);
    const objects: StoredObject[] = [];
    await this.list(prefix, startAt === undefined ? undefined : prefix + startAt, (page) => {
      for (const item of page.items ?? []) objects.push({ name: item.name.slice(prefix.length), size: Number(item.size) });
    });
    return objects.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async read(dir: string, name: string, from: number): Promise<Buffer> {
    const object = this.objectPrefix(dir) + name;
    try {
      const response = await (await this.sender()).request<ArrayBuffer>({
        url: `${this.endpoint}/storage/v1/b/${encodeURIComponent(this.bucket)}/o/${encodeURIComponent(object)}`,
        params: { alt: 'media' },
        headers: from > 0 ? { Range: `bytes=${from}-` } : {},
        responseType: 'arraybuffer',
        timeout: TIMEOUT_MS,
        retry: true,
      });
      return Buffer.from(response.data);
    } catch (err) {
      // Nothing past the end: GCS answers 416 for a range that starts at the object's size.
      if ((err as { response?: { status?: number } }).response?.status === 416) return Buffer.alloc(0);
      throw this.problem(err);
    }
  }

  private async sender(): Promise<AuthorizedRequester> {
    this.requester ??= await defaultRequester(this.endpoint);
    return this.requester;
  }

  private objectPrefix(dir: string): string {
    const path = [this.base, dir.replace(/^\/+|\/+$/g, '')].filter((p) => p !== '').join('/');
    return path === '' ? '' : `${path}/`;
  }

  private async list(prefix: string, startOffset: string | undefined, onPage: (page: { prefixes?: string[]; items?: { name: string; size: string }[] }) => void): Promise<void> {
    let pageToken: string | undefined;
    do {
      try {
        const response = await (await this.sender()).request<{ prefixes?: string[]; items?: { name: string; size: string }[]; nextPageToken?: string }>({
          url: `${this.endpoint}/storage/v1/b/${encodeURIComponent(this.bucket)}/o`,
          params: { prefix, delimiter: '/', fields: 'prefixes,items(name,size),nextPageToken', ...(startOffset ? { startOffset } : {}), ...(pageToken ? { pageToken } : {}) },
          responseType: 'json',
          timeout: TIMEOUT_MS,
          retry: true,
        });
        onPage(response.data ?? {});
        pageToken = response.data?.nextPageToken;
      } catch (err) {
        throw this.problem(err);
      }
    } while (pageToken);
  }

  private problem(err: unknown): LogStoreError {
    const status = (err as { response?: { status?: number } }).response?.status;
    if (status === 401 || status === 403) {
      return new LogStoreError(`no permission to read the run's log in ${this.location} (storage.objects.list / storage.objects.get); grant your account roles/storage.objectViewer on gs://${this.bucket}`);
    }
    if (err instanceof LogStoreError) return err;
    if (status === 404) return new LogStoreError(`no bucket gs://${this.bucket} at ${this.endpoint} (the run's log is in ${this.location})`);
    const e = err as { code?: string | number; message?: string };
    const why = status !== undefined ? `HTTP ${status}` : `${e.code !== undefined ? `${e.code}: ` : ''}${e.message ?? String(err)}`;
    return new LogStoreError(`cannot read the run's log in ${this.location} from ${this.endpoint}: ${why.slice(0, 300)}`);
  }
}

export interface LogStoreSettings {
  /** The emulator's local buckets: gs://b/p is <dir>/b/p, as the worker maps it for its VMs. */
  localBucketsDir?: string;
  /** The GCS JSON API's base URL (GCS_ENDPOINT, or the emulator's http://127.0.0.1:<port>). */
  storageEndpoint?: string;
  /** Who sends the GCS requests (default: ADC for https, no credentials for plain http). */
  requester?: AuthorizedRequester;
}

/** The store holding `uri` (a run's checkpoint prefix: gs://bucket/path, or file:///dir). */
export function logStoreFor(uri: string, settings: LogStoreSettings = {}): LogStore {
  if (uri.startsWith('file://')) return new LocalLogStore(uri.slice('file://'.length));
  const match = /^gs:\/\/([^/]+)\/?(.*)$/s.exec(uri);
  if (!match) throw new LogStoreError(`cannot read a log at ${uri}: expected gs://bucket/path or file:///dir`);
  const [, bucket, path] = match;
  if (settings.localBucketsDir) return new LocalLogStore(join(settings.localBucketsDir, bucket, path));
  const endpoint = (settings.storageEndpoint ?? GCS_ENDPOINT).replace(/\/+$/, '');
  return new GcsLogStore(bucket, path, endpoint, settings.requester);
}
