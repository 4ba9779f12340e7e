/**
 * Where a dataset's bucket lives, from the storage API: the GCS JSON API's `buckets.get`
 * (GET <endpoint>/storage/v1/b/<bucket>?fields=name,location,locationType), sent through
 * google-auth-library's authorized request: Application Default Credentials with the
 * read-only storage scope on Google Cloud, no credentials for the local emulator.
 *
 * A bucket's location never changes, so each answer is kept for the worker's lifetime
 * (a bounded LRU, per bucket); a problem (no such bucket, no permission, the API not
 * reachable) is kept for PROBLEM_TTL_MS only, so a permission granted later is seen. A
 * problem becomes one clear sentence for the run's timeline, never an exception: the run
 * then places without weighing that bucket's data (workflows/run/data-placement.ts).
 *
 *   activities: { ...createStorageActivities(new BucketLocator({ endpoint, requester })) }   (index.ts)
 */
import { GoogleAuth, PassThroughClient, type gaxios } from 'google-auth-library';
import { LRUCache } from 'lru-cache';
import { type BucketAnswer, isBucketName } from '../../workflows/api';

export const GCS_ENDPOINT = 'https://storage.googleapis.com';
export const STORAGE_READ_SCOPE = 'https://www.googleapis.com/auth/devstorage.read_only';

/** How long a problem is believed before the API is asked again. */
export const PROBLEM_TTL_MS = 5 * 60_000;
const DEFAULT_TIMEOUT_MS = 10_000;

/** What sends the request: GoogleAuth (ADC) and PassThroughClient (the emulator) both do. */
export interface AuthorizedRequester {
  request<T>(opts: gaxios.GaxiosOptions): Promise<gaxios.GaxiosResponse<T>>;
}

export interface BucketLocatorOptions {
  /** The storage API's base URL: GCS_ENDPOINT, or the emulator's http://127.0.0.1:<port>. */
  endpoint: string;
  requester: AuthorizedRequester;
  timeoutMs?: number;
  /** Buckets remembered at most (least recently used go first). */
  maxBuckets?: number;
}

export class BucketLocator {
  private readonly cache: LRUCache<string, BucketAnswer>;

  constructor(private readonly options: BucketLocatorOptions) {
    this.cache = new LRUCache({ max: options.maxBuckets ?? 10_000 });
  }

  /** Application Default Credentials against Google Cloud Storage. */
  static forGcs(endpoint = GCS_ENDPOINT): BucketLocator {
    return new BucketLocator({ endpoint, requester: new GoogleAuth({ scopes: [STORAGE_READ_SCOPE] }) });
  }

  /** No credentials: the local emulator (emulator/storage-api.ts). */
  static forEmulator(endpoint: string): BucketLocator {
    return new BucketLocator({ endpoint, requester: new PassThroughClient() });
  }

  async locate(bucket: string): Promise<BucketAnswer> {
    const known = this.cache.get(bucket);
    if (known) return known;
    const answer = await this.ask(bucket);
    this.cache.set(bucket, answer, answer.location ? {} : { ttl: PROBLEM_TTL_MS });
    return answer;
  }

  private async ask(bucket: string): Promise<BucketAnswer> {
    if (!isBucketName(bucket)) return { bucket, problem: `"${bucket.slice(0, 100)}" is not a GCS bucket name` };
    const url = `${this.options.endpoint.replace(/\/+$/, '')}/storage/v1/b/${encodeURIComponent(bucket)}`;
    try {
      const response = await this.options.requester.request<{ location?: unknown }>({
        url,
        method: 'GET',
        params: { fields: 'name,location,locationType' },
        responseType: 'json',
        timeout: this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        // 429, 5xx and network errors, a few times with backoff (gaxios's defaults).
        retry: true,
      });
      const location = response.data?.location;
      if (typeof location !== 'string' || !/^[A-Za-z0-9-]{2,64}$/.test(location)) return { bucket, problem: `the storage API gave no location for gs://${bucket}` };
      return { bucket, location: location.toUpperCase() };
    } catch (err) {
      return { bucket, problem: describeProblem(bucket, err) };
    }
  }
}

/** The API's own message from an error body (`{"error": {"message": ...}}`), if any. */
function apiMessage(data: unknown): string | undefined {
  let body = data;
  if (typeof data === 'string') {
    try {
      body = JSON.parse(data) as unknown;
    } catch {
      return data.slice(0, 300) || undefined;
    }
  }
  const message = (body as { error?: { message?: unknown } } | undefined)?.error?.message;
  return typeof message === 'string' ? message.slice(0, 300) : undefined;
}

/** One sentence naming the bucket, what went wrong and, where it helps, how to fix it. */
export function describeProblem(bucket: string, err: unknown): string {
  const e = err as { status?: number; code?: string | number; message?: string; response?: { status?: number; data?: unknown } } | undefined;
  const status = e?.response?.status ?? e?.status;
  const said = apiMessage(e?.response?.data);
  if (status === 404) return `no bucket gs://${bucket}${said ? ` (the storage API: ${said})` : ''}`;
  if (status === 401 || status === 403) {
    return `no permission to read the metadata of gs://${bucket} (storage.buckets.get${said ? `; the storage API: ${said}` : ''}); grant the worker's service account roles/storage.legacyBucketReader on it`;
  }
  const why = status !== undefined ? `HTTP ${status}${said ? `: ${said}` : ''}` : `${e?.code !== undefined ? `${e.code}: ` : ''}${e?.message ?? String(err)}`;
  return `the storage API did not answer for gs://${bucket} (${why.slice(0, 400)})`;
}
