/**
 * Worker configuration, from the environment, validated once at start-up so a typo
 * fails with a message that names the variable instead of a failed run later.
 *
 * Temporal: the standard TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TLS / API-key variables
 * and profiles (`@temporalio/envconfig`), default the local dev server.
 * GCE: STERNA_GCE_PROJECT with Application Default Credentials for real GCE, or
 * STERNA_GCE_ENDPOINT=http://127.0.0.1:<port> for the local emulator.
 */
import { join } from 'node:path';
import { z } from 'zod';

const EnvSchema = z.object({
  STERNA_TASK_QUEUE: z.string().min(1).default('sterna'),
  STERNA_GCE_PROJECT: z.string().regex(/^[a-z][-a-z0-9]{4,28}[a-z0-9]$/, 'a GCP project id such as my-project-123').optional(),
  STERNA_GCE_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  STERNA_GCE_IMAGE: z.string().optional(),
  STERNA_GCE_SERVICE_ACCOUNT: z.string().optional(),
  STERNA_LOCAL_BUCKETS: z.string().optional(),
  STERNA_GKE_KUBECONFIG: z.string().optional(),
  STERNA_GKE_NAMESPACE: z.string().default('default'),
  STERNA_MAX_CONCURRENT_ACTIVITIES: z.coerce.number().int().min(1).default(200),
  STERNA_OBSERVER_INTERVAL_SECONDS: z.coerce.number().min(0.1, 'seconds between two looks at the fleet, at least 0.1').max(300).default(5),
  STERNA_READ_QUOTA_PER_MINUTE: z.coerce.number().int().min(1, "the project's read requests per minute (GCE's default: 1500)").default(1500),
  STERNA_OBSERVER_READ_SHARE: z.coerce.number().gt(0, 'a share of the read quota, above 0 and at most 1 (default 0.5)').max(1).default(0.5),
  STERNA_OBSERVER_ON_START: z.enum(['true', 'false'], 'true or false').default('true'),
  STERNA_REAPER_INTERVAL_SECONDS: z.coerce.number().int('whole seconds').min(10, 'seconds between reaper passes, at least 10 (default schedule: 300)').optional(),
  STERNA_REAPER_GRACE_SECONDS: z.coerce.number().int('whole seconds').min(0, 'seconds a resource is spared after its creation, at least 0').default(600),
  STERNA_AGENT_POWEROFF_SECONDS: z.coerce.number().int('whole seconds').min(0, 'seconds after the trainer exits before an unreleased VM powers off').default(600),
});

export interface GceConfig {
  project: string;
  /** Set for the emulator: plain HTTP on loopback, no credentials. */
  emulatorEndpoint?: { host: string; port: number; protocol: 'http' | 'https' };
  sourceImage?: string;
  serviceAccountEmail?: string;
  /** The emulator stands in for GCS with a directory: gs://bucket/x -> <dir>/bucket/x. */
  localBucketsDir?: string;
  /** An unreleased VM powers off this long after its trainer exited (the agent's grace period). */
  powerOffAfterSeconds?: number;
}

export interface WorkerConfig {
  taskQueue: string;
  gce?: GceConfig;
  gke?: { kubeconfig?: string; namespace: string };
  maxConcurrentActivities: number;
  observer: {
    intervalSeconds: number;
    /** The observer's guest-read budget: this share of the project's read quota. */
    readsPerMinute: number;
    /** Start the fleet observer of each backend when the worker starts (runs start it anyway). */
    startOnBoot: boolean;
  };
  /** Set: the worker installs (or updates) the reaper's Schedule on start. */
  reaper?: { intervalSeconds: number; graceSeconds: number };
}

export class WorkerConfigError extends Error {
  override name = 'WorkerConfigError';
}

export function defaultLocalBucketsDir(repoRoot: string): string {
  return join(repoRoot, '.state', 'buckets');
}

export function loadWorkerConfig(env: NodeJS.ProcessEnv = process.env, repoRoot = join(__dirname, '..', '..')): WorkerConfig {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('\n  ');
    throw new WorkerConfigError(`invalid worker configuration:\n  ${problems}`);
  }
  const e = parsed.data;
  let gce: GceConfig | undefined;
  if (e.STERNA_GCE_ENDPOINT) {
    const url = new URL(e.STERNA_GCE_ENDPOINT);
    gce = {
      project: e.STERNA_GCE_PROJECT ?? 'sterna-local',
      emulatorEndpoint: { host: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)), protocol: url.protocol === 'https:' ? 'https' : 'http' },
      localBucketsDir: e.STERNA_LOCAL_BUCKETS ?? defaultLocalBucketsDir(repoRoot),
      powerOffAfterSeconds: e.STERNA_AGENT_POWEROFF_SECONDS,
    };
  } else if (e.STERNA_GCE_PROJECT) {
    gce = { project: e.STERNA_GCE_PROJECT, sourceImage: e.STERNA_GCE_IMAGE, serviceAccountEmail: e.STERNA_GCE_SERVICE_ACCOUNT, powerOffAfterSeconds: e.STERNA_AGENT_POWEROFF_SECONDS };
  }
  const gke = e.STERNA_GKE_KUBECONFIG ? { kubeconfig: e.STERNA_GKE_KUBECONFIG, namespace: e.STERNA_GKE_NAMESPACE } : undefined;
  if (!gce && !gke) {
    throw new WorkerConfigError(
      'no compute backend configured: set STERNA_GCE_ENDPOINT=http://127.0.0.1:<port> for the local emulator (npm run emulator), ' +
        'STERNA_GCE_PROJECT=<project> for real GCE (with Application Default Credentials), or STERNA_GKE_KUBECONFIG for GKE',
    );
  }
  const observer = {
    intervalSeconds: e.STERNA_OBSERVER_INTERVAL_SECONDS,
    readsPerMinute: Math.max(1, Math.floor(e.STERNA_READ_QUOTA_PER_MINUTE * e.STERNA_OBSERVER_READ_SHARE)),
    startOnBoot: e.STERNA_OBSERVER_ON_START === 'true',
  };
  const reaper = e.STERNA_REAPER_INTERVAL_SECONDS === undefined ? undefined : { intervalSeconds: e.STERNA_REAPER_INTERVAL_SECONDS, graceSeconds: e.STERNA_REAPER_GRACE_SECONDS };
  return { taskQueue: e.STERNA_TASK_QUEUE, gce, gke, maxConcurrentActivities: e.STERNA_MAX_CONCURRENT_ACTIVITIES, observer, reaper };
}
