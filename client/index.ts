/**
 * The typed client for other services: start a training run, read its status, change
 * its limits, cancel it, list runs. The spec is validated here with the same schema the
 * workflow uses, so a caller learns about a bad field before anything is started; every
 * failure is a SternaClientError whose `kind` says what went wrong, whose message says
 * why (the cause Temporal wraps, e.g. the validator's reason) and whose `hint` says how
 * to fix it.
 *
 *   const client = await connectFromEnvironment();
 *   const run = await startTrainingRun(client, spec, { workflowId: 'team-a-run-42' });
 *   console.log(await getStatus(client, run.workflowId));
 */
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { checkSpec, priorityOf, type RunResult, type RunSpecInput, type RunStatus, setBudgetUpdate, setDeadlineUpdate, statusQuery, SternaTeam, type TrainingRunWorkflow } from '../workflows/api';
import { budgetProblem, deadlineProblem } from './arguments';
import { ClientErrorKind, explain, InvalidSpecError, SternaClientError, type Call } from './errors';
import { requireEncryption } from './encryption';
import { prepareWorkdir, type PreparedWorkdir, type WorkdirStorage } from './workdir';

export const DEFAULT_TASK_QUEUE = 'sterna';

export interface StartOptions {
  workflowId?: string;
  taskQueue?: string;
  /**
   * The local directory the command runs in (instead of the spec's `workdir`): packed,
   * uploaded to the run's bucket unless already there, and unpacked by the agent on every
   * attempt (client/workdir).
   */
  workdir?: string;
  /** A relative `workdir` in the spec is relative to this directory (default: the process's working directory). */
  workdirBase?: string;
  /** The largest packed workdir accepted, in bytes (default 100 MB). */
  workdirMaxBytes?: number;
  /** Where the run's bucket is written (default: as `runLogs` reads it, from the environment). */
  workdirStorage?: WorkdirStorage;
  /** Told what was packed and where it went, before the run starts. */
  onWorkdir?: (workdir: PreparedWorkdir) => void;
}

/** A spec as a user writes it: `workdir` may be a local directory, which the start packs and uploads. */
export type StartSpec = Omit<RunSpecInput, 'workdir'> & { workdir?: string | RunSpecInput['workdir'] };

/** For calls a worker must answer (queries, updates): how long to wait for one. */
export interface CallOptions {
  timeoutMs?: number;
}

async function calling<T>(client: Client, call: Call, fn: () => Promise<T>): Promise<T> {
  requireEncryption(client);
  try {
    return await (call.timeoutMs === undefined ? fn() : client.withDeadline(Date.now() + call.timeoutMs, fn));
  } catch (err) {
    throw await explain(client, err, call);
  }
}

function invalidArgument(problem: string, workflowId: string): SternaClientError {
  return new SternaClientError(ClientErrorKind.InvalidArgument, problem, 'pass a value of that form', { workflowId });
}

/**
 * The spec with its local workdir (the option's, or the spec's path) packed and uploaded:
 * the rest of the spec is checked first, so a bad spec uploads nothing.
 */
async function withUploadedWorkdir(client: Client, spec: StartSpec, options: StartOptions): Promise<RunSpecInput> {
  const local = options.workdir ?? (typeof spec.workdir === 'string' ? resolve(options.workdirBase ?? '.', spec.workdir) : undefined);
  if (local === undefined) return spec as RunSpecInput;
  const rest = checkSpec({ ...spec, workdir: undefined }, { nowMs: Date.now() });
  if (!rest.ok) throw new InvalidSpecError(rest.problems);
  // Nothing is uploaded for a start that would be refused for its payloads.
  requireEncryption(client);
  const prepared = await prepareWorkdir(local, rest.spec.checkpoint.uri, { maxBytes: options.workdirMaxBytes, storage: options.workdirStorage });
  options.onWorkdir?.(prepared);
  return { ...spec, workdir: { uri: prepared.uri, sha256: prepared.sha256 } };
}

export async function startTrainingRun(client: Client, startSpec: StartSpec, options: StartOptions = {}): Promise<WorkflowHandle<TrainingRunWorkflow>> {
  const spec = await withUploadedWorkdir(client, startSpec, options);
  // As the run will check it when it starts: a deadline already past is refused here.
  const check = checkSpec(spec, { nowMs: Date.now() });
  if (!check.ok) throw new InvalidSpecError(check.problems);
  const s = check.spec;
  const workflowId = options.workflowId ?? `${s.name ?? 'run'}-${randomBytes(4).toString('hex')}`;
  const accelerators = s.resources.accelerators.map((a) => `${a.type} x${a.count}`).join(' | ');
  const call: Call = { operation: 'start', workflowId, requestBytes: Buffer.byteLength(JSON.stringify(spec)) };
  return calling(client, call, () =>
    client.workflow.start('trainingRun', {
      taskQueue: options.taskQueue ?? DEFAULT_TASK_QUEUE,
      workflowId,
      args: [spec],
      staticSummary: `train ${s.name ?? workflowId} on ${accelerators} (${s.pricing.mode}${s.pricing.budgetUsd ? `, budget $${s.pricing.budgetUsd}` : ''})`,
      // A run's team is the namespace it runs in (docs/tenancy.md), never its spec's label.
      typedSearchAttributes: [{ key: SternaTeam, value: client.options.namespace }],
      // Temporal's task-queue priority orders this run's workflow and activity tasks when the
      // queue is backlogged; the fairness key keeps one team's burst from starving the others.
      priority: { priorityKey: priorityOf(s), fairnessKey: client.options.namespace },
    }),
  );
}

export async function getStatus(client: Client, workflowId: string, options: CallOptions = {}): Promise<RunStatus> {
  return calling(client, { operation: 'status', workflowId, needsWorker: true, ...options }, () => client.workflow.getHandle(workflowId).query(statusQuery));
}

export async function setBudget(client: Client, workflowId: string, budgetUsd: number, options: CallOptions = {}): Promise<RunStatus> {
  const problem = budgetProblem(budgetUsd);
  if (problem) throw invalidArgument(problem, workflowId);
  return calling(client, { operation: 'setBudget', workflowId, needsWorker: true, ...options }, () =>
    client.workflow.getHandle(workflowId).executeUpdate(setBudgetUpdate, { args: [budgetUsd, client.options.identity] }),
  );
}

export async function setDeadline(client: Client, workflowId: string, deadline: string, options: CallOptions = {}): Promise<RunStatus> {
  const problem = deadlineProblem(deadline);
  if (problem) throw invalidArgument(problem, workflowId);
  return calling(client, { operation: 'setDeadline', workflowId, needsWorker: true, ...options }, () =>
    client.workflow.getHandle(workflowId).executeUpdate(setDeadlineUpdate, { args: [deadline, client.options.identity] }),
  );
}

/**
 * Requests cancellation; the run releases its resources before it ends. The server
 * accepts a cancel request for a run that has already ended and does nothing, so that
 * case is reported rather than passed off as a cancellation.
 */
export async function cancel(client: Client, workflowId: string): Promise<void> {
  await calling(client, { operation: 'cancel', workflowId }, async () => {
    const handle = client.workflow.getHandle(workflowId);
    const { status } = await handle.describe();
    if (status.name !== 'RUNNING') {
      throw new SternaClientError(ClientErrorKind.RunFinished, `run ${workflowId} has already ended (${status.name}); there is nothing to cancel`, `\`sterna status ${workflowId}\` shows how it ended`, { workflowId });
    }
    await handle.cancel();
  });
}

/** Who asked for a run's cancellation, and when: the server's record of the request. */
export interface CancelRequest {
  /** The identity the cancelling client gave (credentials.ts callerIdentity: `alice (4121@laptop)`; the web UI's own, from the UI). */
  by: string;
  at: string;
}

/**
 * The cancellation request of a run, as the server recorded it in the history of the
 * execution it reached (the run's last: a cancel goes to the latest execution of the
 * chain); undefined when none was made. Reads that execution's history, page by page,
 * up to the request.
 */
export async function cancelRequestOf(client: Client, workflowId: string): Promise<CancelRequest | undefined> {
  return calling(client, { operation: 'history', workflowId }, async () => {
    let nextPageToken: Uint8Array | undefined;
    do {
      const page = await client.workflowService.getWorkflowExecutionHistory({ namespace: client.options.namespace, execution: { workflowId }, nextPageToken });
      for (const event of page.history?.events ?? []) {
        const request = event.workflowExecutionCancelRequestedEventAttributes;
        if (request) return { by: request.identity || 'unknown', at: timestampIso(event.eventTime) };
      }
      nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
    } while (nextPageToken);
    return undefined;
  });
}

/** A protobuf Timestamp (seconds a Long or a number) as ISO 8601. */
function timestampIso(ts: { seconds?: { toNumber(): number } | number | null; nanos?: number | null } | null | undefined): string {
  const seconds = typeof ts?.seconds === 'number' ? ts.seconds : (ts?.seconds?.toNumber() ?? 0);
  return new Date(seconds * 1000 + Math.floor((ts?.nanos ?? 0) / 1e6)).toISOString();
}

export async function result(client: Client, workflowId: string): Promise<RunResult> {
  return calling(client, { operation: 'result', workflowId }, () => client.workflow.getHandle<TrainingRunWorkflow>(workflowId).result());
}

export interface RunSummary {
  workflowId: string;
  status: string;
  startTime: Date;
  phase?: string;
  zone?: string;
  costUsd?: number;
}

/** Runs, newest first; `query` is a Temporal visibility query, e.g. `SternaTeam = "ml"`. */
export async function listRuns(client: Client, query?: string, limit = 100): Promise<RunSummary[]> {
  const q = query ? `WorkflowType = "trainingRun" AND (${query})` : 'WorkflowType = "trainingRun"';
  return calling(client, { operation: 'list' }, async () => {
    const runs: RunSummary[] = [];
    for await (const execution of client.workflow.list({ query: q })) {
      const attrs = execution.searchAttributes as Record<string, unknown[] | undefined>;
      runs.push({
        workflowId: execution.workflowId,
        status: execution.status.name,
        startTime: execution.startTime,
        phase: attrs.SternaPhase?.[0] as string | undefined,
        zone: attrs.SternaZone?.[0] as string | undefined,
        costUsd: attrs.SternaCostUsd?.[0] as number | undefined,
      });
      if (runs.length >= limit) break;
    }
    return runs;
  });
}

export { budgetProblem, deadlineProblem } from './arguments';
export { getTeam, setTeamLimits, type LimitsChange, type TeamView } from './teams';
/** Valid-but-suspicious spec fields (a secret-looking env name): the CLI prints them, runs record them in their timeline. */
export { specWarnings } from '../workflows/api';
export { causeChain, causeMessages, findCause } from '../workflows/api';
export { connectFromEnvironment, sizeAwareRetry, type ConnectOptions } from './connect';
/** For a Client built by hand (`new Client({ connection, dataConverter: sternaDataConverter() })`): Sterna's payload encryption. */
export { sternaDataConverter } from '../codec/data-converter';
/** The spec a run is started with, what `getStatus` and `result` answer, and the run as a typed Temporal workflow. */
export { checkSpec, type RunSpec, type RunSpecInput } from '../workflows/api';
/** A run's working directory, packed and uploaded by startTrainingRun (or by hand, before it). */
export { DEFAULT_MAX_WORKDIR_BYTES, prepareWorkdir, type PreparedWorkdir, type WorkdirOptions, type WorkdirStorage } from './workdir';
/** A run's log: what its command printed, every attempt, in order (client/logs.ts). */
export { runLogs, logStoreSettingsFromEnvironment, logsOptionsProblem, type LogEvent, type LogLine, type LogsOptions } from './logs';
export type { RunResult, RunStatus } from '../workflows/api';
export type { TrainingRunWorkflow } from '../workflows/api';
export { ClientErrorKind, InvalidSpecError, SternaClientError, UpdateRejectedError } from './errors';
