/**
 * A run's working directory, from a local path to what the run is started with: listed
 * (walk.ts: ignore files, symlinks, unreadable files), packed (pack.ts: deterministic,
 * capped) and uploaded once per content (upload.ts). The CLI and the client do this before
 * the workflow starts, so the run only ever holds `{ uri, sha256 }`.
 *
 *   const workdir = await prepareWorkdir('./my-project', 'gs://my-bucket/sterna');
 *   // { uri: 'gs://my-bucket/sterna/workdirs/<sha256>.tar.gz', sha256, uploaded, entries, rawBytes, packedBytes }
 */
import { ClientErrorKind, SternaClientError } from '../errors';
import { logStoreSettingsFromEnvironment } from '../logs';
import { sizeText, packWorkdir, WorkdirTooLargeError } from './pack';
import { uploadWorkdir, type UploadedWorkdir, type WorkdirStorage } from './upload';
import { WorkdirProblemError } from './walk';

export { DEFAULT_MAX_WORKDIR_BYTES, packWorkdir, WorkdirTooLargeError, type PackedWorkdir, type PackOptions } from './pack';
export { uploadWorkdir, workdirObjectUri, type UploadedWorkdir, type UploadRequester, type WorkdirStorage } from './upload';
export { listWorkdir, WorkdirProblemError, type WorkdirEntry, type WorkdirListing } from './walk';

export interface WorkdirOptions {
  /** The largest pack accepted, in bytes (default DEFAULT_MAX_WORKDIR_BYTES, 100 MB). */
  maxBytes?: number;
  /** Where the run's bucket is written (default: from the environment, as `runLogs` reads it). */
  storage?: WorkdirStorage;
}

export interface PreparedWorkdir extends UploadedWorkdir {
  /** Files, directories and symlinks packed. */
  entries: number;
  /** The files' bytes before compression. */
  rawBytes: number;
  packedBytes: number;
}

/** A workdir problem as the client's error: what is wrong with which path, and what to do. */
export function workdirRefused(err: WorkdirProblemError | WorkdirTooLargeError): SternaClientError {
  const hint =
    err instanceof WorkdirTooLargeError
      ? `add the largest paths the command does not need to ${err.root}/.sternaignore, stage data with datasets, or raise the cap (sterna start --workdir-max-mb, the client's workdirMaxBytes)`
      : 'fix the paths named above, or add them to .sternaignore (same syntax as .gitignore)';
  return new SternaClientError(ClientErrorKind.WorkdirRefused, err.message, hint, { cause: err });
}

/** Packs `dir` and puts it at its content address under `checkpointUri`; throws SternaClientError (WorkdirRefused, WorkdirUploadFailed). */
export async function prepareWorkdir(dir: string, checkpointUri: string, options: WorkdirOptions = {}): Promise<PreparedWorkdir> {
  const maxBytes = options.maxBytes;
  if (maxBytes !== undefined && !(Number.isSafeInteger(maxBytes) && maxBytes > 0)) {
    throw new SternaClientError(ClientErrorKind.InvalidArgument, `the workdir cap must be a whole number of bytes above 0 (got ${String(maxBytes)})`, `e.g. ${sizeText(100e6)} is 100000000`);
  }
  let packed;
  try {
    packed = await packWorkdir(dir, { maxBytes });
  } catch (err) {
    if (err instanceof WorkdirProblemError || err instanceof WorkdirTooLargeError) throw workdirRefused(err);
    throw err;
  }
  const uploaded = await uploadWorkdir(packed, checkpointUri, options.storage ?? storageFromEnvironment());
  return { ...uploaded, entries: packed.entries, rawBytes: packed.rawBytes, packedBytes: packed.data.length };
}

/** As the log reader finds the buckets (client/logs.ts): STERNA_LOCAL_BUCKETS, else the storage API. */
function storageFromEnvironment(): WorkdirStorage {
  const { localBucketsDir, storageEndpoint } = logStoreSettingsFromEnvironment();
  return { localBucketsDir, storageEndpoint };
}
