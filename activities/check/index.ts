/**
 * The checks before a run, in one call: everything a run of `spec` needs that can be
 * known before any VM exists, each answered with a finding (workflows/checks.ts) that
 * names the problem and the fix a user would run.
 *
 *   codec-key                          a payload encryption key is configured (config/codec-keys.ts)
 *   temporal:server / :namespace / :search-attributes
 *                                      the server answers, the namespace exists, Sterna's
 *                                      search attributes are registered with their types
 *   backend:<gce|gke>                  the spec's backend is configured here
 *   gce:project                        the credentials reach the project's Compute API
 *   quota:GPUS_ALL_REGIONS             the project-wide GPU quota has room
 *   gce:accelerator:<type>             the accelerator is offered where the spec allows
 *   quota:<region>:<METRIC>            regional GPU quota, per region x metric the spec allows
 *   kubernetes:api / :namespace:<ns>   (GKE) the API answers, the namespace exists
 *   bucket:gs://<b>                    the checkpoint and dataset buckets exist and can be
 *                                      read (and, for checkpoints, written)
 *   image                              the image reference is well formed
 *
 * Without a spec: the environment's checks only (keys, Temporal, every configured backend,
 * one GPU of GPUS_ALL_REGIONS). Each group has a deadline; nothing is created or written.
 *
 *   const findings = await runChecks(spec, targets);   // targets: workers/providers.ts buildCheckTargets
 *   activities: { ...createCheckActivities(targets) }  // checkBeforeRun({ spec }) -> Finding[]
 */
import { CodecKeyError, loadCodecKeys } from '../../config/codec-keys';
import { LRUCache } from 'lru-cache';
import type { CheckActivities } from '../../workflows/activity-contract';
import type { Finding } from '../../workflows/checks';
import { imageReferenceProblem } from '../../workflows/image-reference';
import { modelsOf } from '../../workflows/pricing';
import type { RunSpec } from '../../workflows/spec';
import { withDeadline } from '../providers/transient';
import { checkGce, type GceTarget, type GpuNeed } from './gce';
import { checkKube, type KubeTarget } from './kube';
import { bucketUses, checkBuckets, type StorageTarget } from './storage';
import { checkTemporal, type TemporalTarget } from './temporal';

export type { GceTarget, KubeTarget, StorageTarget, TemporalTarget };

export interface CheckTargets {
  gce?: GceTarget;
  gke?: KubeTarget;
  /** Absent: no storage API configured (STERNA_STORAGE_LOCATIONS=off): buckets are not checked. */
  storage?: StorageTarget;
  /** Opens the Temporal connection to check (its failure is a finding); absent: not checked. */
  temporal?: { connect: () => Promise<TemporalTarget>; address?: string };
  /** Where the codec keys are read from (config/codec-keys.ts). */
  env: NodeJS.ProcessEnv;
  /** The longest one group of checks may take (default 30 s). */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;

export async function runChecks(spec: RunSpec | undefined, targets: CheckTargets): Promise<Finding[]> {
  const timeoutMs = targets.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const bounded = (check: string, run: () => Promise<Finding[]>): Promise<Finding[]> =>
    withDeadline(run(), timeoutMs, check).catch((err: unknown) => [{ check, ok: false, transient: true, problem: `the check did not finish (${(err as Error)?.message ?? String(err)})`, fix: 'retry; if it persists, the service behind it is slow or unreachable from here' }]);
  const backends = spec ? [spec.backend] : (['gce', 'gke'] as const).filter((b) => targets[b]);
  const groups: Promise<Finding[]>[] = [Promise.resolve([checkCodecKey(targets.env)])];
  if (targets.temporal) {
    const { connect, address } = targets.temporal;
    groups.push(bounded('temporal:server', () => checkTemporal(connect, address)));
  }
  if (backends.length === 0) groups.push(Promise.resolve([noBackend(undefined)]));
  for (const backend of backends) {
    if (backend === 'gce') groups.push(targets.gce ? bounded('gce:project', () => checkGce(targets.gce!, spec && gpuNeed(spec))) : Promise.resolve([noBackend('gce')]));
    else groups.push(targets.gke ? bounded('kubernetes:api', () => checkKube(targets.gke!)) : Promise.resolve([noBackend('gke')]));
  }
  if (spec) {
    const buckets = bucketUses(spec.checkpoint.uri, spec.datasets.map((d) => d.uri));
    const storage = targets.storage;
    groups.push(
      storage
        ? bounded('bucket', () => checkBuckets(storage, buckets))
        : Promise.resolve(buckets.map((b) => ({ check: `bucket:gs://${b.bucket}`, ok: true, problem: 'not checked: no storage API is configured here (STERNA_STORAGE_LOCATIONS=off)' }))),
    );
    if (spec.image !== undefined) {
      const problem = imageReferenceProblem(spec.image);
      groups.push(Promise.resolve([problem ? { check: 'image', ok: false, problem, fix: 'correct the spec\'s image' } : { check: 'image', ok: true }]));
    }
  }
  return (await Promise.all(groups)).flat();
}

/** How long a run's checks stand for other runs that need the same: a burst of starts checks once. */
export const CHECK_CACHE_MS = 60_000;

/**
 * The activity a run's first step calls (see the module comment). Runs that need the same
 * (backend, GPUs, regions, buckets, image) within CHECK_CACHE_MS share one answer, so a
 * thousand runs started together cost the project's read quota a handful of reads.
 */
export function createCheckActivities(targets: CheckTargets | undefined): CheckActivities {
  if (!targets) return { checkBeforeRun: async () => undefined };
  const answers = new LRUCache<string, Promise<Finding[]>>({ max: 256, ttl: CHECK_CACHE_MS });
  return {
    checkBeforeRun({ spec }) {
      const key = JSON.stringify([spec.backend, gpuNeed(spec), bucketUses(spec.checkpoint.uri, spec.datasets.map((d) => d.uri)), spec.image ?? null]);
      let answer = answers.get(key);
      if (!answer) {
        answer = runChecks(spec, targets);
        answers.set(key, answer);
        // A failed check is not kept: the next run asks again.
        answer.catch(() => answers.delete(key));
      }
      return answer;
    },
  };
}

/** What GCE must have room for: each accelerator's GPUs for one placement (all nodes of a gang), under the models the spec allows. */
export function gpuNeed(spec: RunSpec): GpuNeed {
  return {
    accelerators: spec.resources.accelerators.map((a) => ({ type: a.type, gpus: a.count * spec.resources.nodes })),
    models: modelsOf(spec),
    regions: spec.placement.regions,
    zones: spec.placement.zones,
  };
}

function checkCodecKey(env: NodeJS.ProcessEnv): Finding {
  try {
    if (loadCodecKeys(env)) return { check: 'codec-key', ok: true };
    return {
      check: 'codec-key',
      ok: false,
      problem: "no payload encryption key is configured: Sterna's clients and workers refuse to start without one, since specs and statuses would reach Temporal unencrypted",
      fix: '`sterna codec-key new` (writes ~/.config/sterna/codec-keys), or set STERNA_CODEC_KEYS_FILE or STERNA_CODEC_KEYS; give the workers, the codec server and clients the same keys',
    };
  } catch (err) {
    // A malformed key, or a key file that cannot be read (its mode, its permissions).
    const problem = err instanceof CodecKeyError ? err.message : `the codec keys cannot be read: ${(err as Error)?.message ?? String(err)}`;
    return { check: 'codec-key', ok: false, problem, fix: 'correct the key file or variable named, or create a key with `sterna codec-key new`' };
  }
}

function noBackend(backend: 'gce' | 'gke' | undefined): Finding {
  const gce = 'STERNA_GCE_PROJECT=<project> (with Application Default Credentials) for GCE, or STERNA_GCE_ENDPOINT=http://127.0.0.1:<port> for the local emulator';
  const gke = 'STERNA_GKE_KUBECONFIG=<kubeconfig> (and STERNA_GKE_NAMESPACE) for GKE';
  if (backend === undefined) return { check: 'backend', ok: false, problem: 'no compute backend is configured here', fix: `set ${gce}; or ${gke}` };
  return { check: `backend:${backend}`, ok: false, problem: `the spec's backend is ${backend}, and no ${backend.toUpperCase()} backend is configured here`, fix: `set ${backend === 'gce' ? gce : gke}` };
}
