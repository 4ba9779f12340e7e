/**
 * Transient cloud API errors, and the retry that rides them out inside one activity.
 *
 * A run must never fail because an API answered 503 for a while, rate-limited us or a
 * connection dropped. Each provider call is retried here with jittered exponential
 * backoff for a bounded time; past that the error reaches the activity, whose own retry
 * policy (no attempt limit) takes over. Only errors a provider translated into a named
 * failure (workflows/failures.ts) end a step.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** HTTP statuses (REST transport) and gRPC codes that say "try again later". */
const TRANSIENT_HTTP = new Set([408, 429, 500, 502, 503, 504]);
const TRANSIENT_GRPC = new Set([4 /* DEADLINE_EXCEEDED */, 8 /* RESOURCE_EXHAUSTED */, 14 /* UNAVAILABLE */]);
const TRANSIENT_NETWORK = new Set(['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN', 'ECONNABORTED', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT']);
/** GCE answers its per-minute rate quotas with 403 and one of these reasons. */
const RATE_LIMIT_REASONS = /rateLimitExceeded|userRateLimitExceeded|RATE_LIMIT_EXCEEDED/;

/** Our own client-side deadline passed (see `withDeadline`). */
export class CallDeadlineExceeded extends Error {
  constructor(what: string, ms: number) {
    super(`${what} got no answer within ${ms} ms`);
    this.name = 'CallDeadlineExceeded';
  }
}

type ApiError = { code?: unknown; status?: unknown; httpStatusCode?: unknown; message?: unknown; reason?: unknown; cause?: unknown; name?: unknown };

/** Where google-gax 6 keeps the whole body of an error answer (its own Symbol.for key). */
const RAW_PAYLOAD = Symbol.for('google-gax.rawHttpResponsePayload');

/**
 * What an error says: its message, and for google-gax 6, the ErrorInfo reason it promotes
 * and the body it received. gax 5 put GCE's whole JSON body (errors[].reason
 * `rateLimitExceeded`) in the message; gax 6 puts only its readable `message` there.
 */
function textOf(e: ApiError): string {
  const raw = (e as Record<symbol, unknown>)[RAW_PAYLOAD];
  return [e.message, e.reason, typeof raw === 'string' ? raw : undefined].filter((part) => part !== undefined).map(String).join('\n');
}

/**
 * The HTTP status of a REST answer, else the error's numeric code (a gRPC code when < 100).
 * google-gax 6 sets `code` to the gRPC code it maps the status to (403 and 401 both become
 * PERMISSION_DENIED / UNAUTHENTICATED, 500 INTERNAL) and keeps what was received as
 * `httpStatusCode`; gaxios and @kubernetes/client-node give the status as `status` / `code`.
 */
function statusOf(e: ApiError): number | undefined {
  if (typeof e.httpStatusCode === 'number') return e.httpStatusCode;
  if (typeof e.status === 'number') return e.status;
  return typeof e.code === 'number' ? e.code : undefined;
}

/** The API refused for its per-minute rate quota (GCE: 403 rateLimitExceeded; 429 elsewhere), anywhere in the cause chain. */
export function isRateLimited(err: unknown): boolean {
  const e = err as ApiError | undefined;
  if (!e || typeof e !== 'object') return false;
  const status = statusOf(e);
  if (status === 429 || (status === 403 && RATE_LIMIT_REASONS.test(textOf(e)))) return true;
  return e.cause !== undefined && e.cause !== err && isRateLimited(e.cause);
}

export function isTransient(err: unknown): boolean {
  if (err instanceof CallDeadlineExceeded) return true;
  const e = err as ApiError | undefined;
  if (!e || typeof e !== 'object') return false;
  const status = statusOf(e);
  if (status !== undefined && (TRANSIENT_HTTP.has(status) || (status < 100 && TRANSIENT_GRPC.has(status)))) return true;
  if (status === 403 && RATE_LIMIT_REASONS.test(textOf(e))) return true;
  if (typeof e.code === 'string' && TRANSIENT_NETWORK.has(e.code)) return true;
  if (/socket hang up|network timeout|fetch failed/i.test(String(e.message ?? ''))) return true;
  return e.cause !== undefined && e.cause !== err && isTransient(e.cause);
}

/** Stops waiting for `promise` after `ms` (the request itself may still complete). */
export async function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CallDeadlineExceeded(what, ms)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

export interface RetryOptions {
  /** Give up (rethrow) once this much time has passed; the activity retry goes on from there. */
  maxElapsedMs?: number;
  initialDelayMs?: number;
  maxDelayMs?: number;
  signal?: AbortSignal;
  onRetry?: (err: unknown, delayMs: number) => void;
}

/** Runs `call`, retrying transient errors with full-jitter exponential backoff. */
export async function retryTransient<T>(call: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const { maxElapsedMs = 60_000, initialDelayMs = 500, maxDelayMs = 10_000, signal } = options;
  const started = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (!isTransient(err) || signal?.aborted) throw err;
      const delay = Math.random() * Math.min(maxDelayMs, initialDelayMs * 2 ** attempt);
      if (Date.now() + delay - started > maxElapsedMs) throw err;
      options.onRetry?.(err, delay);
      await sleep(delay, undefined, signal ? { signal } : undefined).catch(() => undefined);
      if (signal?.aborted) throw err;
    }
  }
}
