/**
 * A run's log, from another service or the CLI: every line its trainer printed (and its
 * agent's own lines), across attempts, in order, with a marker before each attempt.
 *
 *   for await (const event of runLogs(client, 'my-run', { follow: true, tail: 100 })) {
 *     if (event.kind === 'attempt') console.log(`--- attempt ${event.attempt} ---`);
 *     else console.log(event.text);
 *   }
 *
 * Where the log is comes from the run itself: the spec it started with (the first event
 * of its latest execution, as the run's notifications read it) names its checkpoint
 * prefix, under which the agent ships the log (logs/layout.ts). The storage
 * is read with the reader's own credentials: a local bucket directory when
 * STERNA_LOCAL_BUCKETS is set, else the GCS JSON API (STERNA_STORAGE_ENDPOINT, or the
 * emulator's at STERNA_GCE_ENDPOINT; Cloud Storage with Application Default Credentials).
 */
import type { Client } from '@temporalio/client';
import { logStoreFor, LogStoreError, readRunLog, RunLogReader, runStoragePrefix, type LogEvent, type LogLine, type LogStoreSettings } from '../logs';
import { checkSpec, describeProblems } from '../workflows/api';
import { ClientErrorKind, explain, SternaClientError } from './errors';
import { startedSpecInput } from './run-input';

export type { LogEvent, LogLine, LogStoreSettings };

export interface LogsOptions {
  /** One attempt (1, 2, ...), or every attempt (the default). */
  attempt?: number | 'all';
  /** Only lines printed at or after this time. */
  since?: Date;
  /** Only the last N lines there are (then, with `follow`, every new one). */
  tail?: number;
  /** Keep reading new lines until the run closes. */
  follow?: boolean;
  /** Between looks at the bucket while following (default 1000 ms). */
  pollMs?: number;
  signal?: AbortSignal;
  /** Where the buckets are read (default: from the environment, logStoreSettingsFromEnvironment). */
  storage?: LogStoreSettings;
}

/**
 * The worker's own rules for where gs:// lives (config/worker-config.ts): its local bucket
 * directory (STERNA_LOCAL_BUCKETS), or the storage API at STERNA_STORAGE_ENDPOINT, the
 * emulator's when STERNA_GCE_ENDPOINT is set (it serves its --buckets-dir), Cloud
 * Storage otherwise.
 */
export function logStoreSettingsFromEnvironment(env: NodeJS.ProcessEnv = process.env): LogStoreSettings {
  if (env.STERNA_LOCAL_BUCKETS) return { localBucketsDir: env.STERNA_LOCAL_BUCKETS };
  return { storageEndpoint: env.STERNA_STORAGE_ENDPOINT ?? env.STERNA_GCE_ENDPOINT };
}

/** Why `options` cannot be read, or undefined. */
export function logsOptionsProblem(options: LogsOptions): string | undefined {
  const { attempt, tail, since } = options;
  if (attempt !== undefined && attempt !== 'all' && !(Number.isInteger(attempt) && attempt >= 1)) return `attempt must be a whole number from 1, or "all" (got ${String(attempt)})`;
  if (tail !== undefined && !(Number.isInteger(tail) && tail >= 0)) return `tail must be a whole number of lines, 0 or more (got ${String(tail)})`;
  if (since !== undefined && !(since instanceof Date && Number.isFinite(since.getTime()))) return 'since must be a valid Date';
  return undefined;
}

interface RunWhere {
  /** The run's checkpoint prefix (gs://...). */
  prefix: string;
  status: string;
  phase?: string;
}

/** Where the run keeps its checkpoints (and its log), and whether it is still running. */
async function runWhere(client: Client, workflowId: string): Promise<RunWhere> {
  try {
    const { description, specInput } = await startedSpecInput(client, workflowId);
    const check = checkSpec(specInput);
    const status = description.status.name;
    if (!check.ok) {
      throw new SternaClientError(
        ClientErrorKind.NoLogs,
        `run ${workflowId} never started anything, so it has no log: its spec was refused (${describeProblems(check.problems)})`,
        `\`sterna status ${workflowId}\` shows how it ended; fix the spec and start a new run`,
        { workflowId },
      );
    }
    const phase = (description.searchAttributes as Record<string, unknown[] | undefined>).SternaPhase?.[0];
    return { prefix: runStoragePrefix(check.spec.checkpoint.uri, workflowId), status, phase: typeof phase === 'string' ? phase : undefined };
  } catch (err) {
    if (err instanceof SternaClientError) throw err;
    throw await explain(client, err, { operation: 'logs', workflowId });
  }
}

function noLogs(workflowId: string, where: RunWhere, attempt: LogsOptions['attempt']): SternaClientError {
  const which = attempt === undefined || attempt === 'all' ? '' : ` for attempt ${attempt}`;
  const running = where.status === 'RUNNING';
  const state = running ? `it is running${where.phase ? ` (phase ${where.phase})` : ''} and no VM has shipped a line yet` : `it ended (${where.status}) before any VM ran its command`;
  const hint = running
    ? `add --follow (the client's \`follow: true\`) to wait for its first lines; \`sterna status ${workflowId}\` shows where it is`
    : `\`sterna status ${workflowId}\` shows how it ended`;
  return new SternaClientError(ClientErrorKind.NoLogs, `run ${workflowId} has no log${which} in ${where.prefix}/logs: ${state}`, hint, { workflowId });
}

function unreadable(workflowId: string, err: LogStoreError): SternaClientError {
  return new SternaClientError(
    ClientErrorKind.LogsUnreadable,
    err.message,
    'for the local emulator, set STERNA_LOCAL_BUCKETS to the worker\'s bucket directory; on Google Cloud, sign in with `gcloud auth application-default login` as an account that may read the bucket',
    { workflowId, cause: err },
  );
}

/**
 * The run's log as an async iterator of attempt markers and lines (logs/reader.ts).
 * Throws a SternaClientError: RunNotFound, NoLogs (a run that never started its command,
 * or has not yet, without `follow`), LogsUnreadable, InvalidArgument.
 */
export async function* runLogs(client: Client, workflowId: string, options: LogsOptions = {}): AsyncGenerator<LogEvent> {
  const problem = logsOptionsProblem(options);
  if (problem) throw new SternaClientError(ClientErrorKind.InvalidArgument, problem, 'pass a value of that form', { workflowId });
  const where = await runWhere(client, workflowId);
  const store = logStoreFor(where.prefix, options.storage ?? logStoreSettingsFromEnvironment());
  try {
    if (!options.follow || where.status !== 'RUNNING') {
      const attempts = await new RunLogReader(store).attempts();
      const wanted = options.attempt === undefined || options.attempt === 'all' ? attempts : attempts.filter((a) => a === options.attempt);
      if (wanted.length === 0) throw noLogs(workflowId, where, options.attempt);
    }
    const handle = client.workflow.getHandle(workflowId);
    const closed = async () => (await handle.describe()).status.name !== 'RUNNING';
    yield* readRunLog(store, {
      attempt: options.attempt,
      sinceMs: options.since?.getTime(),
      tail: options.tail,
      follow: options.follow ? { closed, pollMs: options.pollMs, signal: options.signal } : undefined,
    });
  } catch (err) {
    if (err instanceof LogStoreError) throw unreadable(workflowId, err);
    throw err;
  }
}
