/**
 * Worker configuration, from the environment, validated once at start-up so a typo
 * fails with a message that names the variable instead of a failed run later.
 *
 * Temporal: the standard TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TLS / API-key variables
 * and profiles (`@temporalio/envconfig`), default the local dev server.
 * GCE: STERNA_GCE_PROJECT with Application Default Credentials for real GCE, or
 * STERNA_GCE_ENDPOINT=http://127.0.0.1:<port> for the local emulator. Training VMs:
 * STERNA_GCE_SERVICE_ACCOUNT, STERNA_GCE_SCOPES, STERNA_GCE_NETWORK, STERNA_GCE_SUBNETWORK,
 * STERNA_GCE_EXTERNAL_IP (false), STERNA_GCE_SHIELDED_VM (true), STERNA_GCE_SECURE_BOOT (false).
 * Prices: STERNA_PRICES (billing | catalog), STERNA_PRICE_REFRESH_HOURS (0 = no scheduled
 * refresh), STERNA_BILLING_API_KEY, STERNA_BILLING_ENDPOINT (default: the emulator's when
 * STERNA_GCE_ENDPOINT is set, cloudbilling.googleapis.com otherwise).
 * GKE: STERNA_GKE_KUBECONFIG, STERNA_GKE_NAMESPACE, and the cluster's GPU pools that the
 * Kubernetes API cannot show while they have no node: STERNA_GKE_NODE_POOLS (JSON, one entry
 * per pool from `gcloud container node-pools list`, scale-from-zero pools included) and
 * STERNA_GKE_AUTOPROVISIONING (JSON: the accelerators node auto-provisioning may create, and
 * where); STERNA_GKE_SERVICE_ACCOUNT (the pods'), STERNA_GKE_IMAGE, STERNA_GKE_PENDING_TIMEOUT_SECONDS
 * (an unschedulable pod is a stockout after this; give scale-from-zero time: default 300),
 * STERNA_GKE_STARTUP_TIMEOUT_SECONDS (900), STERNA_GKE_TERMINATION_GRACE_SECONDS (15).
 * Notifications: STERNA_NOTIFY_TEAMS (JSON: team -> webhooks, as a spec's `notify.webhooks`;
 * plain URLs here may carry secrets, this is not stored in history), STERNA_NOTIFY_UI_URL
 * (the web UI events link to; default http://localhost:8233), and the STERNA_WEBHOOK_*
 * variables that `env://` refs name.
 * Storage: where datasets' buckets live is read through the GCS JSON API at
 * STERNA_STORAGE_ENDPOINT (default: the emulator's when STERNA_GCE_ENDPOINT is set,
 * https://storage.googleapis.com with Application Default Credentials otherwise);
 * STERNA_STORAGE_LOCATIONS=off turns the lookup off (every bucket's location is unknown).
 * Versions (docs/versions.md): the worker is one version of the Worker Deployment
 * STERNA_DEPLOYMENT (default `sterna`), its build id STERNA_BUILD_ID (default: a hash of the
 * workflow bundle, so the same code is the same version); STERNA_PROMOTE=new (default) makes a
 * version that was never current the current one once it polls, `manual` leaves that to
 * `sterna deploy promote`; STERNA_WORKER_VERSIONING=off runs unversioned.
 * Metrics: STERNA_METRICS_PORT serves Prometheus metrics at /metrics (Sterna's and the
 * Temporal SDK's), on STERNA_METRICS_HOST (0.0.0.0); the SDK's exporter listens on
 * 127.0.0.1:STERNA_SDK_METRICS_PORT (default: the metrics port + 1). Unset: no metrics.
 */
import { join } from 'node:path';
import { z } from 'zod';
import { teamWebhooksSchema, type TeamWebhooks } from '../workflows/run/notify-spec';
import { DEFAULT_VM_ACCESS, type VmAccess } from './vm-access';
import { DEFAULT_FLEET_SETTINGS } from '../workflows/fleet/contract';

/** Activity slots of a worker when STERNA_MAX_CONCURRENT_ACTIVITIES is not set. */
export const DEFAULT_MAX_CONCURRENT_ACTIVITIES = 1000;

/** A variable holding JSON that `schema` checks; `example` is shown when it is not JSON. */
function jsonOf<T extends z.ZodType>(schema: T, example: string) {
  return z
    .string()
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: `JSON such as ${example}` });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

const gkeName = () => z.string().regex(/^[a-z][-a-z0-9]{0,62}$/, 'a name such as us-central1-a, nvidia-l4 or g2-standard-8');

/** A GPU node pool as `gcloud container node-pools list` describes it. */
function gkePoolsSchema() {
  return z.array(
    z.strictObject({
      name: gkeName(),
      zones: z.array(gkeName()).min(1),
      accelerator: gkeName(),
      gpusPerNode: z.int().min(1).max(16),
      spot: z.boolean(),
      machineType: gkeName().optional(),
    }),
  );
}

/** What node auto-provisioning may create: each accelerator in each zone, spot and/or on-demand. */
function gkeAutoprovisioningSchema() {
  return z.strictObject({
    zones: z.array(gkeName()).min(1),
    accelerators: z.array(z.strictObject({ type: gkeName(), gpusPerNode: z.int().min(1).max(16), machineType: gkeName().optional() })).min(1),
    spot: z.union([z.boolean(), z.literal('both')]).default('both'),
  });
}

export type GkeNodePool = z.output<ReturnType<typeof gkePoolsSchema>>[number];

export interface GkeConfig {
  kubeconfig?: string;
  namespace: string;
  /** Declared pools (and node auto-provisioning's, expanded into pools): offered even at zero nodes. */
  nodePools: GkeNodePool[];
  serviceAccountName?: string;
  image?: string;
  pendingTimeoutSeconds?: number;
  startupTimeoutSeconds?: number;
  terminationGracePeriodSeconds?: number;
}

const EnvSchema = z.object({
  STERNA_TASK_QUEUE: z.string().min(1).default('sterna'),
  STERNA_GCE_PROJECT: z.string().regex(/^[a-z][-a-z0-9]{4,28}[a-z0-9]$/, 'a GCP project id such as my-project-123').optional(),
  STERNA_GCE_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  STERNA_GCE_IMAGE: z.string().optional(),
  STERNA_GCE_SERVICE_ACCOUNT: z.string().optional(),
  STERNA_LOCAL_BUCKETS: z.string().optional(),
  // What training VMs may reach and act as (activities/providers/gce-vm-access.ts).
  STERNA_GCE_SCOPES: z
    .string()
    .transform((list) => list.split(',').map((s) => s.trim()).filter(Boolean))
    .pipe(z.array(z.string().regex(/^https:\/\/www\.googleapis\.com\/auth\/[a-z0-9._-]+$/, 'OAuth scope URLs such as https://www.googleapis.com/auth/devstorage.read_write, comma-separated')).min(1))
    .optional(),
  STERNA_GCE_NETWORK: z.string().regex(/^(?:projects\/[a-z][-a-z0-9]{4,28}[a-z0-9]\/)?global\/networks\/[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$/, 'global/networks/<name> or projects/<host project>/global/networks/<name>').optional(),
  STERNA_GCE_SUBNETWORK: z
    .string()
    .regex(/^(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|(?:projects\/[a-z][-a-z0-9]{4,28}[a-z0-9]\/)?regions\/\{region\}\/subnetworks\/[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)$/, 'a subnetwork name (in each VM\'s region), or projects/<host>/regions/{region}/subnetworks/<name>')
    .optional(),
  STERNA_GCE_EXTERNAL_IP: z.enum(['true', 'false'], 'true or false').default('false'),
  STERNA_GCE_SHIELDED_VM: z.enum(['true', 'false'], 'true or false').default('true'),
  STERNA_GCE_SECURE_BOOT: z.enum(['true', 'false'], 'true or false').default('false'),
  STERNA_GKE_KUBECONFIG: z.string().optional(),
  STERNA_GKE_NAMESPACE: z.string().default('default'),
  STERNA_GKE_NODE_POOLS: jsonOf(gkePoolsSchema(), '[{"name": "spot-l4", "zones": ["us-central1-a"], "accelerator": "nvidia-l4", "gpusPerNode": 1, "spot": true, "machineType": "g2-standard-8"}]').optional(),
  STERNA_GKE_AUTOPROVISIONING: jsonOf(gkeAutoprovisioningSchema(), '{"zones": ["us-central1-a"], "accelerators": [{"type": "nvidia-l4", "gpusPerNode": 1}], "spot": true}').optional(),
  STERNA_GKE_SERVICE_ACCOUNT: z.string().regex(/^[a-z0-9]([-a-z0-9]{0,251}[a-z0-9])?$/, 'a Kubernetes service account name').optional(),
  STERNA_GKE_IMAGE: z.string().min(1).optional(),
  STERNA_GKE_PENDING_TIMEOUT_SECONDS: z.coerce.number().int('whole seconds').min(1).max(86_400).optional(),
  STERNA_GKE_STARTUP_TIMEOUT_SECONDS: z.coerce.number().int('whole seconds').min(1).max(86_400).optional(),
  STERNA_GKE_TERMINATION_GRACE_SECONDS: z.coerce.number().int('whole seconds').min(0).max(3600).optional(),
  // Every long activity is a long poll (GCE's operations.wait, Kubernetes watches): a slot
  // costs a socket and a promise, not a thread. 200 slots ran out at 2,000 runs, each
  // release holding one through a VM's shutdown (bench/README.md, bench:scale row C).
  STERNA_MAX_CONCURRENT_ACTIVITIES: z.coerce.number().int().min(1).default(DEFAULT_MAX_CONCURRENT_ACTIVITIES),
  // Unset: the SDK sizes the cache from the heap. A run evicted from it replays its history
  // (about 150 events) at its next workflow task: CPU for memory.
  STERNA_MAX_CACHED_WORKFLOWS: z.coerce.number().int('a whole number of workflows').min(0).optional(),
  // Unset: the SDK's one workflow thread. Workflow tasks run one at a time on it, so a burst
  // (a wave of preemptions) queues behind itself while other cores idle.
  STERNA_WORKFLOW_THREADS: z.coerce.number().int('a whole number of threads').min(1, 'at least 1 workflow thread').max(16).optional(),
  STERNA_OBSERVER_INTERVAL_SECONDS: z.coerce.number().min(0.1, 'seconds between two looks at the fleet, at least 0.1').max(300).default(5),
  STERNA_OBSERVER_PROGRESS_SECONDS: z.coerce.number().min(1, 'seconds between two reads of a training VM whose status did not change, at least 1').max(3600).default(DEFAULT_FLEET_SETTINGS.progressReadSeconds),
  STERNA_READ_QUOTA_PER_MINUTE: z.coerce.number().int().min(1, "the project's read requests per minute (GCE's default: 1500)").default(1500),
  STERNA_OBSERVER_READ_SHARE: z.coerce.number().gt(0, 'a share of the read quota, above 0 and at most 1 (default 0.5)').max(1).default(0.5),
  STERNA_OBSERVER_ON_START: z.enum(['true', 'false'], 'true or false').default('true'),
  STERNA_OBSERVER: z.enum(['on', 'off'], 'on or off').default('on'),
  STERNA_PRICES: z.enum(['billing', 'catalog'], 'billing (the Cloud Billing Catalog) or catalog (the bundled prices)').default('billing'),
  STERNA_PRICE_REFRESH_HOURS: z.coerce.number().min(0, 'hours between price book refreshes, 0 to turn the scheduled refresh off').max(24 * 365).default(24),
  STERNA_BILLING_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  STERNA_BILLING_API_KEY: z.string().min(1).optional(),
  STERNA_REAPER_INTERVAL_SECONDS: z.coerce.number().int('whole seconds').min(10, 'seconds between reaper passes, at least 10 (default schedule: 300)').optional(),
  STERNA_REAPER_GRACE_SECONDS: z.coerce.number().int('whole seconds').min(0, 'seconds a resource is spared after its creation, at least 0').default(600),
  STERNA_METRICS_PORT: z.coerce.number().int('a TCP port').min(1, 'a TCP port for /metrics, e.g. 9464').max(65535, 'a TCP port for /metrics, e.g. 9464').optional(),
  STERNA_METRICS_HOST: z.string().min(1, 'an address to listen on, e.g. 0.0.0.0 or 127.0.0.1').default('0.0.0.0'),
  STERNA_SDK_METRICS_PORT: z.coerce.number().int('a TCP port').min(1, "a free TCP port for the Temporal SDK's exporter (loopback only)").max(65535, "a free TCP port for the Temporal SDK's exporter (loopback only)").optional(),
  STERNA_NOTIFY_TEAMS: jsonOf(teamWebhooksSchema(), '{"ml": [{"ref": "env://STERNA_WEBHOOK_ML", "format": "slack"}]}').optional(),
  STERNA_NOTIFY_UI_URL: z.url({ protocol: /^https?$/ }).optional(),
  STERNA_STORAGE_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  STERNA_STORAGE_LOCATIONS: z.enum(['on', 'off'], 'on or off').default('on'),
  STERNA_AGENT_POWEROFF_SECONDS: z.coerce.number().int('whole seconds').min(0, 'seconds after the trainer exits before an unreleased VM powers off').default(600),
  STERNA_WORKER_VERSIONING: z.enum(['on', 'off'], 'on or off').default('on'),
  STERNA_DEPLOYMENT: z.string().regex(/^[A-Za-z0-9][-_.A-Za-z0-9]{0,99}$/, 'a deployment name such as sterna or sterna-prod (letters, digits, - _ .)').default('sterna'),
  STERNA_BUILD_ID: z.string().regex(/^[A-Za-z0-9][-_.A-Za-z0-9]{0,99}$/, 'a build id such as 2026-12-07.1 or a git sha (letters, digits, - _ .)').optional(),
  STERNA_PROMOTE: z.enum(['new', 'manual'], 'new (a version never current becomes current once it polls) or manual (sterna deploy promote)').default('new'),
});

export interface GceConfig {
  project: string;
  /** Set for the emulator: plain HTTP on loopback, no credentials. */
  emulatorEndpoint?: Endpoint;
  sourceImage?: string;
  serviceAccountEmail?: string;
  /** The emulator stands in for GCS with a directory: gs://bucket/x -> <dir>/bucket/x. */
  localBucketsDir?: string;
  /** Service account, scopes, network, external IP, Shielded VM of training VMs. */
  vmAccess?: VmAccess;
  /** An unreleased VM powers off this long after its trainer exited (the agent's grace period). */
  powerOffAfterSeconds?: number;
}

export interface Endpoint {
  host: string;
  port: number;
  protocol: 'http' | 'https';
}

export interface StorageConfig {
  /** The storage API's base URL; plain http (the emulator) is sent no credentials. */
  endpoint: string;
}

export interface PricesConfig {
  source: 'billing' | 'catalog';
  /** Seconds between price book refreshes; 0: no scheduled refresh. */
  refreshSeconds: number;
  /** The Billing Catalog to read when not cloudbilling.googleapis.com (the emulator). */
  billingEndpoint?: Endpoint;
  /** An API key for the public catalog (otherwise Application Default Credentials). Never logged. */
  apiKey?: string;
}

export interface MetricsConfig {
  /** Where /metrics is served. */
  host: string;
  port: number;
  /** The Temporal SDK's own Prometheus exporter, on 127.0.0.1 (merged into /metrics). */
  sdkPort: number;
}

export interface WorkerConfig {
  taskQueue: string;
  gce?: GceConfig;
  gke?: GkeConfig;
  maxConcurrentActivities: number;
  /** Workflows the worker keeps in memory between their tasks; undefined: the SDK's choice. */
  maxCachedWorkflows?: number;
  /** Threads running workflow tasks; undefined: the SDK's choice (one). */
  workflowThreads?: number;
  observer: {
    intervalSeconds: number;
    /** How often a training VM's agent is read for its progress while the read budget allows. */
    progressReadSeconds: number;
    /** The observer's guest-read budget: this share of the project's read quota. */
    readsPerMinute: number;
    /** Start the fleet observer of each backend when the worker starts (runs start it anyway). */
    startOnBoot: boolean;
    /** Off: no observer at all; every run looks at its own resource every recovery.pollSeconds. */
    enabled: boolean;
  };
  prices: PricesConfig;
  /** Set: the worker installs (or updates) the reaper's Schedule on start. */
  reaper?: { intervalSeconds: number; graceSeconds: number };
  /** Set: the worker serves Prometheus metrics (workers/metrics.ts). */
  metrics?: MetricsConfig;
  /** Per-team webhooks and the web UI notifications link to. */
  notify: { teams?: TeamWebhooks; uiBaseUrl?: string };
  /** Where bucket locations are read; absent: not read (every dataset's location is then unknown unless its spec states it). */
  storage?: StorageConfig;
  /** The Worker Deployment this worker is a version of (workers/deployment.ts); absent: unversioned. */
  versioning?: VersioningConfig;
}

export interface VersioningConfig {
  deploymentName: string;
  /** Absent: derived from the workflow bundle (the same code, the same version). */
  buildId?: string;
  /** `new`: a version never current becomes current once its worker polls; `manual`: only by `sterna deploy promote`. */
  promote: 'new' | 'manual';
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
  const vmAccess: VmAccess = {
    serviceAccountEmail: e.STERNA_GCE_SERVICE_ACCOUNT,
    scopes: e.STERNA_GCE_SCOPES ?? DEFAULT_VM_ACCESS.scopes,
    network: e.STERNA_GCE_NETWORK,
    subnetwork: e.STERNA_GCE_SUBNETWORK,
    externalIp: e.STERNA_GCE_EXTERNAL_IP === 'true',
    shieldedVm: e.STERNA_GCE_SHIELDED_VM === 'true',
    secureBoot: e.STERNA_GCE_SECURE_BOOT === 'true',
  };
  let gce: GceConfig | undefined;
  if (e.STERNA_GCE_ENDPOINT) {
    gce = {
      project: e.STERNA_GCE_PROJECT ?? 'sterna-local',
      emulatorEndpoint: endpointOf(e.STERNA_GCE_ENDPOINT),
      localBucketsDir: e.STERNA_LOCAL_BUCKETS ?? defaultLocalBucketsDir(repoRoot),
      vmAccess,
      powerOffAfterSeconds: e.STERNA_AGENT_POWEROFF_SECONDS,
    };
  } else if (e.STERNA_GCE_PROJECT) {
    gce = { project: e.STERNA_GCE_PROJECT, sourceImage: e.STERNA_GCE_IMAGE, serviceAccountEmail: e.STERNA_GCE_SERVICE_ACCOUNT, vmAccess, powerOffAfterSeconds: e.STERNA_AGENT_POWEROFF_SECONDS };
  }
  const gke: GkeConfig | undefined = e.STERNA_GKE_KUBECONFIG
    ? {
        kubeconfig: e.STERNA_GKE_KUBECONFIG,
        namespace: e.STERNA_GKE_NAMESPACE,
        nodePools: [...(e.STERNA_GKE_NODE_POOLS ?? []), ...autoprovisionedPools(e.STERNA_GKE_AUTOPROVISIONING)],
        serviceAccountName: e.STERNA_GKE_SERVICE_ACCOUNT,
        image: e.STERNA_GKE_IMAGE,
        pendingTimeoutSeconds: e.STERNA_GKE_PENDING_TIMEOUT_SECONDS,
        startupTimeoutSeconds: e.STERNA_GKE_STARTUP_TIMEOUT_SECONDS,
        terminationGracePeriodSeconds: e.STERNA_GKE_TERMINATION_GRACE_SECONDS,
      }
    : undefined;
  if (!gce && !gke) {
    throw new WorkerConfigError(
      'no compute backend configured: set STERNA_GCE_ENDPOINT=http://127.0.0.1:<port> for the local emulator (npm run emulator), ' +
        'STERNA_GCE_PROJECT=<project> for real GCE (with Application Default Credentials), or STERNA_GKE_KUBECONFIG for GKE',
    );
  }
  const observer = {
    intervalSeconds: e.STERNA_OBSERVER_INTERVAL_SECONDS,
    progressReadSeconds: e.STERNA_OBSERVER_PROGRESS_SECONDS,
    readsPerMinute: Math.max(1, Math.floor(e.STERNA_READ_QUOTA_PER_MINUTE * e.STERNA_OBSERVER_READ_SHARE)),
    startOnBoot: e.STERNA_OBSERVER === 'on' && e.STERNA_OBSERVER_ON_START === 'true',
    enabled: e.STERNA_OBSERVER === 'on',
  };
  const reaper = e.STERNA_REAPER_INTERVAL_SECONDS === undefined ? undefined : { intervalSeconds: e.STERNA_REAPER_INTERVAL_SECONDS, graceSeconds: e.STERNA_REAPER_GRACE_SECONDS };
  const billingUrl = e.STERNA_BILLING_ENDPOINT ?? e.STERNA_GCE_ENDPOINT;
  const prices: PricesConfig = {
    source: e.STERNA_PRICES,
    refreshSeconds: Math.round(e.STERNA_PRICE_REFRESH_HOURS * 3600),
    billingEndpoint: billingUrl ? endpointOf(billingUrl) : undefined,
    apiKey: e.STERNA_BILLING_API_KEY,
  };
  let metrics: MetricsConfig | undefined;
  if (e.STERNA_METRICS_PORT !== undefined) {
    const sdkPort = e.STERNA_SDK_METRICS_PORT ?? e.STERNA_METRICS_PORT + 1;
    if (sdkPort === e.STERNA_METRICS_PORT || sdkPort > 65535) {
      throw new WorkerConfigError(`invalid worker configuration:\n  STERNA_SDK_METRICS_PORT: ${sdkPort} cannot serve the Temporal SDK's exporter next to STERNA_METRICS_PORT ${e.STERNA_METRICS_PORT}; set another free port`);
    }
    metrics = { host: e.STERNA_METRICS_HOST, port: e.STERNA_METRICS_PORT, sdkPort };
  }
  const notify = { teams: e.STERNA_NOTIFY_TEAMS, uiBaseUrl: e.STERNA_NOTIFY_UI_URL };
  const storage = e.STERNA_STORAGE_LOCATIONS === 'off' ? undefined : { endpoint: (e.STERNA_STORAGE_ENDPOINT ?? e.STERNA_GCE_ENDPOINT ?? 'https://storage.googleapis.com').replace(/\/+$/, '') };
  const versioning = e.STERNA_WORKER_VERSIONING === 'off' ? undefined : { deploymentName: e.STERNA_DEPLOYMENT, buildId: e.STERNA_BUILD_ID, promote: e.STERNA_PROMOTE };
  return { taskQueue: e.STERNA_TASK_QUEUE, gce, gke, maxConcurrentActivities: e.STERNA_MAX_CONCURRENT_ACTIVITIES, maxCachedWorkflows: e.STERNA_MAX_CACHED_WORKFLOWS, workflowThreads: e.STERNA_WORKFLOW_THREADS, observer, prices, reaper, metrics, notify, storage, versioning };
}

/** Node auto-provisioning as pools: it creates a node of any listed accelerator in any listed zone. */
function autoprovisionedPools(auto: z.output<ReturnType<typeof gkeAutoprovisioningSchema>> | undefined): GkeNodePool[] {
  if (!auto) return [];
  const models = auto.spot === 'both' ? [true, false] : [auto.spot];
  return auto.accelerators.flatMap((a) => models.map((spot) => ({ name: `auto-${a.type}-${spot ? 'spot' : 'standard'}`, zones: auto.zones, accelerator: a.type, gpusPerNode: a.gpusPerNode, spot, machineType: a.machineType })));
}

function endpointOf(text: string): Endpoint {
  const url = new URL(text);
  return { host: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)), protocol: url.protocol === 'https:' ? 'https' : 'http' };
}
