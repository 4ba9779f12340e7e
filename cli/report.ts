/**
 * How the CLI reports a failure: what went wrong with its cause, how to fix it, and an
 * exit code — 2 when the input was wrong (the user can fix the command), 1 otherwise.
 */
import { causeMessages } from '../workflows/api';
import { ClientErrorKind, SternaClientError } from '../client/errors';

export const ExitCode = { BadInput: 2, Failed: 1 } as const;

const exitCodes: Record<ClientErrorKind, number> = {
  [ClientErrorKind.InvalidSpec]: ExitCode.BadInput,
  [ClientErrorKind.InvalidArgument]: ExitCode.BadInput,
  [ClientErrorKind.RequestTooLarge]: ExitCode.BadInput,
  [ClientErrorKind.RunNotFound]: ExitCode.BadInput,
  [ClientErrorKind.RunAlreadyExists]: ExitCode.BadInput,
  [ClientErrorKind.UpdateRejected]: ExitCode.BadInput,
  [ClientErrorKind.NamespaceNotFound]: ExitCode.BadInput,
  [ClientErrorKind.PermissionDenied]: ExitCode.BadInput,
  [ClientErrorKind.Unauthenticated]: ExitCode.BadInput,
  [ClientErrorKind.PayloadEncryption]: ExitCode.BadInput,
  [ClientErrorKind.WorkdirRefused]: ExitCode.BadInput,
  [ClientErrorKind.WorkdirUploadFailed]: ExitCode.Failed,
  [ClientErrorKind.RunFinished]: ExitCode.Failed,
  [ClientErrorKind.RunFailed]: ExitCode.Failed,
  [ClientErrorKind.NoLogs]: ExitCode.Failed,
  [ClientErrorKind.LogsUnreadable]: ExitCode.Failed,
  [ClientErrorKind.NoWorker]: ExitCode.Failed,
  [ClientErrorKind.ServerUnreachable]: ExitCode.Failed,
  [ClientErrorKind.ServerError]: ExitCode.Failed,
};

export interface Report {
  lines: string[];
  exitCode: number;
}

/**
 *   sterna budget: run r-1 refused setBudget: budget $0.01 is below the $0.0412 already spent
 *     to fix: change the value and retry; `sterna status r-1` shows the run's spend and deadline
 */
export function reportFailure(command: string, err: unknown): Report {
  const prefix = command ? `sterna ${command}:` : 'sterna:';
  if (err instanceof SternaClientError) {
    return { lines: [`${prefix} ${err.message}`, `  to fix: ${err.hint}`], exitCode: exitCodes[err.kind] };
  }
  return { lines: [`${prefix} ${causeMessages(err).join(': ')}`], exitCode: ExitCode.Failed };
}
