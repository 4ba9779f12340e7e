/**
 * The closed set of ways a client call can fail, each with the reason in its message
 * and how to fix it in `hint`. Temporal's own errors are translated here, once: the
 * caller never has to dig through `cause` to learn that its spec was too large or that
 * the run's validator refused a budget.
 */
import {
  ApplicationFailure,
  NamespaceNotFoundError,
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  type Client,
  type Connection,
} from '@temporalio/client';
import { causeMessages, describeProblems, findCause, isGrpcStatusError } from '../workflows/api';

export const ClientErrorKind = {
  /** The run spec fails validation; nothing was started. */
  InvalidSpec: 'InvalidSpec',
  /** An argument or a request the server refused as malformed (a budget, a visibility query). */
  InvalidArgument: 'InvalidArgument',
  /** The request is larger than the Temporal server accepts (a spec with megabytes in it). */
  RequestTooLarge: 'RequestTooLarge',
  /** No run has this id in this namespace. */
  RunNotFound: 'RunNotFound',
  /** A run with this id exists already. */
  RunAlreadyExists: 'RunAlreadyExists',
  /** The run has ended and takes no more changes. */
  RunFinished: 'RunFinished',
  /** The run's own validator refused the change (e.g. a budget below what it has spent). */
  UpdateRejected: 'UpdateRejected',
  /** The run ended failed, cancelled, terminated or timed out. */
  RunFailed: 'RunFailed',
  /** The run has no log to read: it never started its command, or not yet. */
  NoLogs: 'NoLogs',
  /** The run's log is where the run put it, but cannot be read from here (permission, storage API). */
  LogsUnreadable: 'LogsUnreadable',
  /** The run's working directory cannot be packed: too large, unreadable, or a symlink leaves it. Nothing was started. */
  WorkdirRefused: 'WorkdirRefused',
  /** The packed working directory could not be put in the run's bucket (permission, storage API). Nothing was started. */
  WorkdirUploadFailed: 'WorkdirUploadFailed',
  /** No worker answered a query or update in time: none is polling the run's task queue. */
  NoWorker: 'NoWorker',
  /** The namespace does not exist on the server. */
  NamespaceNotFound: 'NamespaceNotFound',
  /** The server's authorization refused these credentials this request in this namespace (another team's, or read-only). */
  PermissionDenied: 'PermissionDenied',
  /** The server did not accept the credentials at all (an expired or unknown token, no token where one is required). */
  Unauthenticated: 'Unauthenticated',
  /** No Temporal server answers at the address. */
  ServerUnreachable: 'ServerUnreachable',
  /**
   * Payloads would not be encrypted: no codec key is configured (or a key is malformed), or
   * the Client was built without Sterna's data converter. Nothing was sent.
   */
  PayloadEncryption: 'PayloadEncryption',
  /** The server failed the request for another reason; the message carries its words. */
  ServerError: 'ServerError',
} as const;
export type ClientErrorKind = (typeof ClientErrorKind)[keyof typeof ClientErrorKind];

export class SternaClientError extends Error {
  override name = 'SternaClientError';
  constructor(
    readonly kind: ClientErrorKind,
    message: string,
    /** What to do about it, in a sentence. */
    readonly hint: string,
    options: { cause?: unknown; workflowId?: string } = {},
  ) {
    super(message, { cause: options.cause });
    this.workflowId = options.workflowId;
  }
  readonly workflowId?: string;
}

export class InvalidSpecError extends SternaClientError {
  override name = 'InvalidSpecError';
  constructor(readonly problems: { path: string; message: string }[]) {
    super(ClientErrorKind.InvalidSpec, describeProblems(problems), 'fix the fields named above; `sterna validate <spec>` checks a spec without starting anything');
  }
}

export class UpdateRejectedError extends SternaClientError {
  override name = 'UpdateRejectedError';
  constructor(
    workflowId: string,
    readonly update: string,
    /** The validator's own words. */
    readonly reason: string,
    /** The ApplicationFailure type the validator threw, e.g. `InvalidSpec`. */
    readonly failureType: string | undefined,
    cause: unknown,
  ) {
    super(ClientErrorKind.UpdateRejected, `run ${workflowId} refused ${update}: ${reason}`, `change the value and retry; \`sterna status ${workflowId}\` shows the run's spend and deadline`, { cause, workflowId });
  }
}

/** What a client call was doing, so a failure can say so. */
export interface Call {
  /** e.g. "start", "setBudget", "status". */
  operation: string;
  workflowId?: string;
  /** The encoded size of what was sent, when it may be the problem. */
  requestBytes?: number;
  /** Queries and updates are answered by a worker, so a timeout means none is polling. */
  needsWorker?: boolean;
  timeoutMs?: number;
}

const GrpcCode = { Cancelled: 1, InvalidArgument: 3, DeadlineExceeded: 4, NotFound: 5, PermissionDenied: 7, ResourceExhausted: 8, Unavailable: 14, Unauthenticated: 16 } as const;

export function serverAddress(client: Client): string {
  // A Connection knows its address; other ConnectionLike implementations may not.
  return (client.connection as Partial<Connection>).options?.address ?? 'the configured address';
}

export function unreachable(address: string, cause: unknown): SternaClientError {
  // A server that answers and refuses the credentials is reachable: say what it refused.
  const grpc = findCause(cause, isGrpcStatusError);
  if (grpc?.code === GrpcCode.Unauthenticated) return unauthenticated(address, grpc.details, cause);
  if (grpc?.code === GrpcCode.PermissionDenied) {
    return new SternaClientError(ClientErrorKind.PermissionDenied, `the Temporal server at ${address} refused these credentials at connect (${grpc.details})`, CREDENTIALS_FIX, { cause });
  }
  return new SternaClientError(
    ClientErrorKind.ServerUnreachable,
    `cannot reach a Temporal server at ${address}: ${causeMessages(cause).join(': ')}`,
    'start one with `npm run server` (or `temporal server start-dev`), or point TEMPORAL_ADDRESS at yours (plus TEMPORAL_NAMESPACE, and TEMPORAL_API_KEY or TLS settings for Temporal Cloud)',
    { cause },
  );
}

const CREDENTIALS_FIX = 'the token may have expired or come from another issuer: get a fresh one, and check whose it is and what it may do with `sterna whoami`';

function unauthenticated(address: string, details: string, cause: unknown, workflowId?: string): SternaClientError {
  return new SternaClientError(ClientErrorKind.Unauthenticated, `the Temporal server at ${address} did not accept these credentials (${details})`, CREDENTIALS_FIX, { cause, workflowId });
}

function megabytes(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/**
 * The Sterna error for a failed Temporal call. Anything not recognised as Temporal's is
 * returned unchanged: a programming error should surface as itself.
 */
export async function explain(client: Client, err: unknown, call: Call): Promise<unknown> {
  if (err instanceof SternaClientError) return err;
  const id = call.workflowId ?? '';
  const where = `namespace ${client.options.namespace} at ${serverAddress(client)}`;
  const grpc = findCause(err, isGrpcStatusError);
  const words = causeMessages(err).join(': ');

  // A validator or handler that refuses throws ApplicationFailure; anything else (the run
  // ending mid-update) falls through to the generic report, its cause included.
  const rejection = err instanceof WorkflowUpdateFailedError ? findCause(err, (c): c is ApplicationFailure => c instanceof ApplicationFailure) : undefined;
  if (rejection) return new UpdateRejectedError(id, call.operation, rejection.message, rejection.type ?? undefined, err);
  if (err instanceof WorkflowExecutionAlreadyStartedError) {
    return new SternaClientError(ClientErrorKind.RunAlreadyExists, `a run named ${id} already exists in ${where}`, 'choose another --id, or leave it out to have one generated', { cause: err, workflowId: id });
  }
  if (err instanceof WorkflowNotFoundError) {
    if (/already completed/i.test(err.message)) {
      return new SternaClientError(ClientErrorKind.RunFinished, `run ${id} has already ended; it takes no ${call.operation}`, `\`sterna status ${id}\` shows how it ended; start a new run to go on`, { cause: err, workflowId: id });
    }
    return new SternaClientError(ClientErrorKind.RunNotFound, `no run named ${id} in ${where} (${err.message})`, '`sterna list` shows the runs there; set TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE if the run is elsewhere', { cause: err, workflowId: id });
  }
  if (err instanceof NamespaceNotFoundError) {
    return new SternaClientError(ClientErrorKind.NamespaceNotFound, `namespace ${err.namespace} does not exist at ${serverAddress(client)}`, 'set TEMPORAL_NAMESPACE to an existing namespace, or create it with `temporal operator namespace create`', { cause: err });
  }
  if (err instanceof WorkflowFailedError) {
    return new SternaClientError(ClientErrorKind.RunFailed, `run ${id} did not complete: ${words}`, `\`sterna status ${id}\` shows its timeline`, { cause: err, workflowId: id });
  }
  // A deadline can also surface as CANCELLED when it passes between the SDK's retries.
  const timedOut = grpc?.code === GrpcCode.DeadlineExceeded || (grpc?.code === GrpcCode.Cancelled && call.timeoutMs !== undefined);
  if (call.needsWorker && (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError || timedOut)) {
    // grpc-js appends its timings after a comma: "Deadline exceeded after 1.984s,LB pick: ..."
    return noWorker(client, err, call, (grpc?.details ?? words).split(',')[0]);
  }
  if (err instanceof WorkflowUpdateFailedError) {
    return new SternaClientError(ClientErrorKind.ServerError, `${call.operation} failed for run ${id}: ${words}`, `\`sterna status ${id}\` shows the run's state`, { cause: err, workflowId: id });
  }
  if (!grpc) return err;
  const tooLarge = grpc.code === GrpcCode.ResourceExhausted && /larger than max/i.test(grpc.details);
  if (tooLarge || (grpc.code === GrpcCode.InvalidArgument && /size exceeds limit/i.test(grpc.details))) {
    const size = call.requestBytes === undefined ? 'the request' : `the request (${megabytes(call.requestBytes)} of JSON)`;
    return new SternaClientError(
      ClientErrorKind.RequestTooLarge,
      `the Temporal server refused ${size} as too large: ${grpc.details}`,
      'keep bulk out of the run spec (Temporal accepts 2 MB per payload and 4 MB per request by default): put large values in a file in the dataset or the trainer image and pass its path',
      { cause: err, workflowId: call.workflowId },
    );
  }
  if (grpc.code === GrpcCode.InvalidArgument) {
    return new SternaClientError(ClientErrorKind.InvalidArgument, `the Temporal server refused the ${call.operation} request: ${grpc.details}`, 'fix the value it names and retry', { cause: err, workflowId: call.workflowId });
  }
  if (grpc.code === GrpcCode.Unavailable) return unreachable(serverAddress(client), err);
  if (grpc.code === GrpcCode.PermissionDenied) {
    const what = call.workflowId ? ` for run ${id}` : '';
    return new SternaClientError(ClientErrorKind.PermissionDenied, `the server refused these credentials the ${call.operation} request${what} in ${where} (${grpc.details})`, `use a profile whose credentials may act in namespace ${client.options.namespace} (\`sterna whoami\` shows whose these are and what they may do; a team's runs live in its own namespace, see docs/tenancy.md)`, { cause: err, workflowId: call.workflowId });
  }
  if (grpc.code === GrpcCode.Unauthenticated) return unauthenticated(serverAddress(client), grpc.details, err, call.workflowId);
  return new SternaClientError(ClientErrorKind.ServerError, `the Temporal server failed the ${call.operation} request: ${words}`, 'retry; if it persists, the Temporal server log says more', { cause: err, workflowId: call.workflowId });
}

/** A query or update nobody answered: say which task queue needs a worker. */
async function noWorker(client: Client, err: unknown, call: Call, words: string): Promise<SternaClientError> {
  const id = call.workflowId ?? '';
  const taskQueue = await client.workflow
    .getHandle(id)
    .describe()
    .then((d) => d.taskQueue)
    .catch(() => undefined);
  const queue = taskQueue ? ` on task queue ${taskQueue}` : '';
  return new SternaClientError(
    ClientErrorKind.NoWorker,
    `no worker answered ${call.operation} for run ${id} in time (${words})`,
    `start a Sterna worker${queue} (\`npm run worker\`${taskQueue ? `, STERNA_TASK_QUEUE=${taskQueue}` : ''}) against this server, or allow more time`,
    { cause: err, workflowId: id },
  );
}
