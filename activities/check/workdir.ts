/**
 * The check that a run's workdir is where its VMs will fetch it: a spec that names an
 * uploaded workdir ({ uri, sha256 }, as `sterna start --workdir` or the client leaves it,
 * or as written for `temporal workflow start`) whose object is not in the bucket would
 * stop every attempt before its command (agent exit 69, WorkdirUnavailable), after a VM
 * was paid for. One GCS objects.get of the object's metadata
 * (GET <endpoint>/storage/v1/b/<bucket>/o/<object>), which reads nothing of its bytes; the
 * emulator answers it from its local buckets (emulator/storage-objects.ts). The sha256 is
 * the agent's to check: GCS keeps no sha256 of an object.
 */
import type { Finding, WorkdirRef } from '../../workflows/api';
import type { StorageTarget } from './storage';

const DEFAULT_TIMEOUT_MS = 15_000;

/** How a missing workdir is put back: the command that packs and uploads it. */
export const WORKDIR_UPLOAD_FIX = 'upload it with `sterna start <spec> --workdir <dir>` (packs the directory and uploads it to <checkpoint.uri>/workdirs/<sha256>.tar.gz, then starts the run), or start from code with startTrainingRun(client, spec, { workdir: <dir> })';

export async function checkWorkdirObject(target: StorageTarget, workdir: WorkdirRef): Promise<Finding> {
  const check = `workdir:${workdir.uri}`;
  const match = /^gs:\/\/([^/]+)\/(.+)$/s.exec(workdir.uri);
  if (!match) return { check, ok: false, problem: `${workdir.uri} is not a gs://bucket/object URI`, fix: WORKDIR_UPLOAD_FIX };
  const [, bucket, object] = match;
  const url = `${target.endpoint.replace(/\/+$/, '')}/storage/v1/b/${encodeURIComponent(bucket)}/o/${encodeURIComponent(object)}?fields=name,size`;
  try {
    await target.requester.request({ url, method: 'GET', responseType: 'json', timeout: target.timeoutMs ?? DEFAULT_TIMEOUT_MS, retry: true });
    return { check, ok: true };
  } catch (err) {
    const status = (err as { response?: { status?: number }; status?: number })?.response?.status ?? (err as { status?: number })?.status;
    if (status === 404) {
      return { check, ok: false, problem: `the run's workdir ${workdir.uri} is not in the bucket: every attempt would stop before its command (WorkdirUnavailable)`, fix: WORKDIR_UPLOAD_FIX };
    }
    if (status === 401 || status === 403) {
      // The checker's own credentials; the VMs read as their service account.
      return { check, ok: false, checkersOwn: true, problem: `these credentials may not read ${workdir.uri} (HTTP ${status})`, fix: `\`gcloud storage buckets add-iam-policy-binding gs://${bucket} --member=<the training VMs' service account> --role=roles/storage.objectViewer\`` };
    }
    const transient = status === undefined || status >= 500 || status === 429;
    const why = status !== undefined ? `HTTP ${status}` : ((err as Error)?.message ?? String(err)).slice(0, 300);
    return { check, ok: false, problem: `the storage API did not answer for ${workdir.uri} (${why})`, fix: `check the credentials reach ${target.endpoint} (\`gcloud storage ls ${workdir.uri}\` makes a similar call)`, ...(transient ? { transient } : {}) };
  }
}
