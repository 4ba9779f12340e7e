/**
 * The admin API (under /emulator/v1/), kept apart from the GCE paths: what a test or a
 * demo needs to drive the cloud (capacity, quotas, preemptions, faults) and to check it
 * (billing, instance internals). JSON in, JSON out; errors in GCE's error shape.
 * See emulator/README.md for the routes.
 */
import { z } from 'zod';
import { findZone, machineTypeFor, pricePerHour, type Catalog } from '../config/catalog';
import type { ApiUsage } from './api-usage';
import { summarize, type BillingSummary } from './billing';
import type { BillingCatalogService } from './billing-catalog';
import { capacityLimit, capacityUsed, PROJECT_QUOTA_METRICS, projectQuotas, quotaLimit, quotaUsage, type ProjectQuotaDefaults } from './capacity';
import { flexCapacityLimit, flexCapacityUsed, flexSettings } from './flex-model';
import type { Clock } from './clock';
import { GceError, notFound, Reason } from './errors';
import { DEFAULT_GPU_TELEMETRY, GpuTelemetrySchema, type GpuTelemetry } from './gpu-telemetry';
import { FaultSchema, type FaultRule, type Faults } from './faults';
import { NAME_PATTERN, PROJECT_PATTERN } from './ids';
import type { Instances } from './instances';
import type { RateQuotaChange, RateQuotas } from './rate-quotas';
import type { SpotModel } from './spot-model';
import type { SyntheticGuestConfig, SyntheticGuests } from './synthetic-guest';
import type { EmulatorState, InstanceRecord } from './types';
import type { ProvisioningModel } from '../workflows/api';
import { groupAlive } from './vm-process';
import type { SecretStore } from './secret-manager';
import { bucketSettings, BucketSettingsSchema, DEFAULT_BUCKET_LOCATION, validBucketName } from './storage-api';

export const ADMIN_PREFIX = '/emulator/v1';

const CapacityBody = z.strictObject({
  accelerator: z.string().min(1),
  /** GPUs allocatable for spot VMs; null restores the default. */
  spot: z.number().int().min(0).nullable().optional(),
  onDemand: z.number().int().min(0).nullable().optional(),
  /** GPUs in the zone's flex-start (DWS) pool; null restores the default. */
  flexStart: z.number().int().min(0).nullable().optional(),
  /** When spot capacity drops below what is in use, preempt running spot VMs (newest first) until it fits. */
  preemptRunning: z.boolean().optional(),
});

const QuotaBody = z.strictObject({ metric: z.string().regex(/^[A-Z0-9_]{1,100}$/), limit: z.number().min(0).nullable() });
const ProjectQuotaBody = z.strictObject({
  metric: z.enum(PROJECT_QUOTA_METRICS as [string, ...string[]], `a project-wide quota metric: ${PROJECT_QUOTA_METRICS.join(', ')}`),
  /** null restores the emulator's default. */
  limit: z.number().min(0).nullable(),
});

const RateQuotaBody = z.strictObject({
  enabled: z.boolean().optional(),
  windowSeconds: z.number().positive().max(3600).optional(),
  /** Group id (read_requests_per_region) or metric -> requests per window; null restores the default. */
  limits: z.record(z.string(), z.number().int().min(0).nullable()).optional(),
  project: z.string().regex(PROJECT_PATTERN).optional(),
}) satisfies z.ZodType<RateQuotaChange>;

const SyntheticGuestBody = z.strictObject({
  steps: z.number().int().min(1).optional(),
  stepSeconds: z.number().positive().optional(),
  checkpointEvery: z.number().int().min(1).optional(),
  startingSeconds: z.number().min(0).optional(),
  stagingSeconds: z.number().min(0).optional(),
  uploadSeconds: z.number().min(0).optional(),
  datasetBytes: z.number().int().min(0).optional(),
  exitCode: z.number().int().min(0).max(255).optional(),
}) satisfies z.ZodType<Partial<SyntheticGuestConfig>>;

/** A new version of a secret in the emulator's Secret Manager; `accessors` are the service accounts allowed to read it. */
const SecretVersionBody = z.strictObject({ value: z.string().max(64 * 1024), accessors: z.array(z.string().min(1)).optional() });

/** The flex-start wait model (flex-model.ts); `draws` restarts the seeded sequence when the seed is given. */
const FlexStartBody = z.strictObject({
  seed: z.number().int().min(0).max(2 ** 31).optional(),
  meanWaitSeconds: z.number().min(0).max(7 * 86400).optional(),
  distribution: z.enum(['fixed', 'exponential']).optional(),
});

const PreemptBody = z.strictObject({ afterSeconds: z.number().min(0).max(10 * 365 * 86400).optional() });

export interface CapacityView {
  zone: string;
  accelerators: { accelerator: string; spot: { limit: number; used: number; available: boolean }; onDemand: { limit: number; used: number }; flexStart: { limit: number; used: number; waiting: number } }[];
}

export interface AdminInstanceView {
  project: string;
  zone: string;
  name: string;
  id: string;
  status: string;
  provisioningModel: ProvisioningModel;
  machineType: string;
  accelerator?: string;
  acceleratorCount: number;
  labels: Record<string, string>;
  preempted: boolean;
  /** `process` (a local process group) or `synthetic` (simulated agent, no process). */
  guest: 'process' | 'synthetic';
  guestAttributes: Record<string, Record<string, string>>;
  dir: string;
  pid?: number;
  pgid?: number;
  processAlive: boolean;
  exitCode?: number;
  killed: boolean;
  metadataPort?: number;
  lastStartTimestamp?: string;
  lastStopTimestamp?: string;
  /** When the VM's time limit ends it, while it is RUNNING with one. */
  terminationTimestamp?: string;
}

export interface SyntheticGuestsView {
  /** What VMs booted from now on run. */
  defaults: SyntheticGuestConfig;
  /** Synthetic guests currently running (not exited). */
  running: number;
}

export interface BillingResponse {
  timeFactor: number;
  records: BillingSummary[];
  totals: { costUsd: number; emulatedCostUsd: number; runningSeconds: number; emulatedRunningSeconds: number };
}

export interface ClockView {
  timeFactor: number;
  now: string;
  epoch: string;
  /** Emulated seconds since the emulator's epoch (its first start on this state dir). */
  emulatedSeconds: number;
}

export interface PriceView {
  zone: string;
  region: string;
  machineType: string;
  accelerator: string;
  acceleratorCount: number;
  onDemandPerHour?: number;
  spotPerHour?: number;
}

export interface AdminContext {
  state: EmulatorState;
  catalog: Catalog;
  clock: Clock;
  instances: Instances;
  faults: Faults;
  spotModel: SpotModel;
  rateQuotas: RateQuotas;
  apiUsage: ApiUsage;
  synthetic: SyntheticGuests;
  billingCatalog: BillingCatalogService;
  persist(): void;
  secrets: SecretStore;
  /** The directory standing in for GCS (its subdirectories are buckets). */
  bucketsDir?: string;
  /** Project-wide quota limits of projects not set here. */
  projectQuotas: ProjectQuotaDefaults;
}

function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(body);
  if (!r.success) throw new GceError(400, Reason.Invalid, r.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; '));
  return r.data;
}

function zoneOf(ctx: AdminContext, zone: string): string {
  if (!NAME_PATTERN.test(zone) || !findZone(zone, ctx.catalog)) throw notFound(`zones/${zone}`);
  return zone;
}

function capacityView(ctx: AdminContext, zone: string): CapacityView {
  const z = findZone(zone, ctx.catalog)!;
  const accelerators = new Set([...z.accelerators, ...Object.keys(ctx.state.capacity[zone] ?? {})]);
  return {
    zone,
    accelerators: [...accelerators].map((accelerator) => ({
      accelerator,
      spot: {
        limit: capacityLimit(ctx.state, ctx.catalog, zone, accelerator, true),
        used: capacityUsed(ctx.state, zone, accelerator, true),
        available: ctx.spotModel.spotAvailable(zone, { type: accelerator, count: 1 }),
      },
      onDemand: { limit: capacityLimit(ctx.state, ctx.catalog, zone, accelerator, false), used: capacityUsed(ctx.state, zone, accelerator, false) },
      flexStart: {
        limit: flexCapacityLimit(ctx.state, ctx.catalog, zone, accelerator),
        used: flexCapacityUsed(ctx.state, zone, accelerator),
        waiting: ctx.instances.all().filter((i) => i.zone === zone && i.gpus?.type === accelerator && i.status === 'PENDING').length,
      },
    })),
  };
}

export function instanceView(i: InstanceRecord, alive: (i: InstanceRecord) => boolean = () => false): AdminInstanceView {
  const iso = (ms?: number) => (ms === undefined ? undefined : new Date(ms).toISOString());
  return {
    project: i.project,
    zone: i.zone,
    name: i.name,
    id: i.id,
    status: i.status,
    provisioningModel: i.provisioningModel,
    machineType: i.machineType,
    accelerator: i.gpus?.type,
    acceleratorCount: i.gpus?.count ?? 0,
    labels: i.labels,
    preempted: i.preempted,
    guest: i.guest ?? 'process',
    guestAttributes: i.guestAttributes,
    dir: i.vm.dir,
    pid: i.vm.pid,
    pgid: i.vm.pgid,
    processAlive: i.guest === 'synthetic' ? alive(i) : i.vm.exitedAtMs === undefined && groupAlive(i.vm.pgid),
    exitCode: i.vm.exitCode,
    killed: i.vm.killed ?? false,
    metadataPort: i.vm.metadataPort,
    lastStartTimestamp: iso(i.lastStartMs),
    lastStopTimestamp: iso(i.lastStopMs),
    terminationTimestamp: iso(i.terminationAtMs),
  };
}

function billing(ctx: AdminContext, query: URLSearchParams): BillingResponse {
  const now = ctx.clock.now();
  const project = query.get('project');
  const records = ctx.state.billing.filter((b) => !project || b.project === project).map((b) => summarize(b, now));
  const sum = (f: (r: BillingSummary) => number) => records.reduce((s, r) => s + f(r), 0);
  return {
    timeFactor: ctx.clock.timeFactor,
    records,
    totals: { costUsd: sum((r) => r.costUsd), emulatedCostUsd: sum((r) => r.emulatedCostUsd), runningSeconds: sum((r) => r.runningSeconds), emulatedRunningSeconds: sum((r) => r.emulatedRunningSeconds) },
  };
}

function prices(ctx: AdminContext, zoneFilter: string | null): PriceView[] {
  const out: PriceView[] = [];
  for (const r of Object.values(ctx.catalog.regions)) {
    for (const z of r.zones) {
      if (zoneFilter && z.name !== zoneFilter) continue;
      for (const accelerator of z.accelerators) {
        for (const count of [1, 2, 4, 8]) {
          const machineType = machineTypeFor(accelerator, count, ctx.catalog);
          if (!machineType) continue;
          const q = { region: r.name, machineType, accelerator, count };
          const spotPerHour = ctx.spotModel.spotPrice(z.name, { type: accelerator, count }) ?? pricePerHour({ ...q, spot: true }, ctx.catalog);
          out.push({ zone: z.name, region: r.name, machineType, accelerator, acceleratorCount: count, onDemandPerHour: pricePerHour({ ...q, spot: false }, ctx.catalog), spotPerHour });
        }
      }
    }
  }
  return out;
}

function setCapacity(ctx: AdminContext, zone: string, body: unknown): CapacityView {
  const b = parse(CapacityBody, body);
  if (!ctx.catalog.accelerators[b.accelerator]) throw new GceError(400, Reason.Invalid, `Unknown accelerator type '${b.accelerator}'`);
  const entry = ((ctx.state.capacity[zone] ??= {})[b.accelerator] ??= {});
  if (b.spot !== undefined) {
    if (b.spot === null) delete entry.spot;
    else entry.spot = b.spot;
  }
  if (b.onDemand !== undefined) {
    if (b.onDemand === null) delete entry.onDemand;
    else entry.onDemand = b.onDemand;
  }
  if (b.flexStart !== undefined) {
    if (b.flexStart === null) delete entry.flexStart;
    else entry.flexStart = b.flexStart;
  }
  if (entry.spot === undefined && entry.onDemand === undefined && entry.flexStart === undefined) delete ctx.state.capacity[zone][b.accelerator];
  ctx.persist();
  if (b.preemptRunning) {
    const limit = capacityLimit(ctx.state, ctx.catalog, zone, b.accelerator, true);
    const running = ctx.instances
      .liveSpot()
      .filter((i) => i.zone === zone && i.gpus?.type === b.accelerator)
      .sort((a, c) => c.creationMs - a.creationMs);
    let used = capacityUsed(ctx.state, zone, b.accelerator, true);
    for (const i of running) {
      if (used <= limit) break;
      ctx.instances.preempt(i, `spot capacity of ${zone} reduced to ${limit} ${b.accelerator}`);
      used -= i.gpus?.count ?? 0;
    }
  }
  return capacityView(ctx, zone);
}

export interface GpuTelemetryView {
  /** What VMs without their own reading report. */
  defaults: GpuTelemetry;
  /** VMs told their own reading: `zone/name` -> reading. */
  instances: Record<string, GpuTelemetry>;
}

function gpuTelemetryView(ctx: AdminContext): GpuTelemetryView {
  const instances: Record<string, GpuTelemetry> = {};
  for (const i of ctx.instances.all()) if (i.gpuTelemetry) instances[`${i.zone}/${i.name}`] = i.gpuTelemetry;
  return { defaults: ctx.state.gpuTelemetry ?? DEFAULT_GPU_TELEMETRY, instances };
}

function findInstance(ctx: AdminContext, project: string | undefined, zone: string, name: string): InstanceRecord {
  const matches = ctx.instances.all().filter((i) => i.zone === zone && i.name === name && (!project || i.project === project));
  if (matches.length === 0) throw notFound(`${project ? `projects/${project}/` : ''}zones/${zone}/instances/${name}`);
  if (matches.length > 1) throw new GceError(409, Reason.Invalid, `Instance ${name} exists in ${zone} of several projects (${matches.map((m) => m.project).join(', ')}); name the project`);
  return matches[0];
}

export async function handleAdmin(ctx: AdminContext, method: string, s: string[], query: URLSearchParams, body: unknown): Promise<{ status: number; body: unknown }> {
  const ok = (b: unknown) => ({ status: 200, body: b });
  const route = `${method} ${s.map((x, i) => (i % 2 === 1 && ['projects', 'zones', 'regions', 'instances', 'secrets', 'buckets'].includes(s[i - 1]) ? '*' : x)).join('/')}`;
  switch (route) {
    case 'GET health':
      return ok({ ok: true });
    case 'GET clock': {
      const now = ctx.clock.now();
      const view: ClockView = { timeFactor: ctx.clock.timeFactor, now: new Date(now).toISOString(), epoch: new Date(ctx.state.epochMs).toISOString(), emulatedSeconds: ctx.clock.emulatedSeconds(now - ctx.state.epochMs) };
      return ok(view);
    }
    case 'GET spot-model':
      return ok(ctx.spotModel.describe());
    case 'GET flex-start':
      return ok(flexSettings(ctx.state));
    case 'POST flex-start': {
      const b = parse(FlexStartBody, body);
      const current = flexSettings(ctx.state);
      ctx.state.flexStart = { ...current, ...b, draws: b.seed !== undefined ? 0 : current.draws };
      ctx.persist();
      return ok(ctx.state.flexStart);
    }
    case 'GET instances':
      return ok({ instances: ctx.instances.all().map((i) => instanceView(i, (x) => ctx.synthetic.alive(x))) });
    case 'GET billing':
      return ok(billing(ctx, query));
    case 'GET prices':
      return ok({ prices: prices(ctx, query.get('zone')) });
    case 'GET zones/*/capacity':
      return ok(capacityView(ctx, zoneOf(ctx, s[1])));
    case 'POST zones/*/capacity':
      return ok(setCapacity(ctx, zoneOf(ctx, s[1]), body));
    case 'GET projects/*/regions/*/quotas':
    case 'POST projects/*/regions/*/quotas': {
      const [project, region] = [s[1], s[3]];
      if (!PROJECT_PATTERN.test(project)) throw new GceError(400, Reason.Invalid, `Invalid project '${project}'`);
      if (!ctx.catalog.regions[region]) throw notFound(`regions/${region}`);
      if (method === 'POST') {
        const b = parse(QuotaBody, body);
        const quotas = ((ctx.state.quotas[project] ??= {})[region] ??= {});
        if (b.limit === null) delete quotas[b.metric];
        else quotas[b.metric] = b.limit;
        ctx.persist();
      }
      const metrics = new Set([...Object.values(ctx.catalog.accelerators).flatMap((a) => [a.quotaMetric, `PREEMPTIBLE_${a.quotaMetric}`]), ...Object.keys(ctx.state.quotas[project]?.[region] ?? {})]);
      return ok({ quotas: [...metrics].map((metric) => ({ metric, limit: quotaLimit(ctx.state, ctx.catalog, project, region, metric), usage: quotaUsage(ctx.state, ctx.catalog, project, region, metric) })) });
    }
    case 'GET projects/*/quotas':
    case 'POST projects/*/quotas': {
      const project = s[1];
      if (!PROJECT_PATTERN.test(project)) throw new GceError(400, Reason.Invalid, `Invalid project '${project}'`);
      if (method === 'POST') {
        const b = parse(ProjectQuotaBody, body);
        const quotas = ((ctx.state.projectQuotas ??= {})[project] ??= {});
        if (b.limit === null) delete quotas[b.metric];
        else quotas[b.metric] = b.limit;
        ctx.persist();
      }
      return ok({ quotas: projectQuotas(ctx.state, ctx.projectQuotas, project) });
    }
    case 'POST projects/*/zones/*/instances/*/preempt':
    case 'POST zones/*/instances/*/preempt': {
      const scoped = s[0] === 'projects';
      const [project, zone, name] = scoped ? [s[1], s[3], s[5]] : [undefined, s[1], s[3]];
      const i = findInstance(ctx, project, zoneOf(ctx, zone), name);
      const b = parse(PreemptBody, body);
      const result = ctx.instances.preempt(i, 'admin API', b.afterSeconds);
      return ok({ ...result, instance: instanceView(i, (x) => ctx.synthetic.alive(x)) });
    }
    case 'POST projects/*/secrets/*/versions': {
      const [project, secret] = [s[1], s[3]];
      if (!PROJECT_PATTERN.test(project) || !/^[A-Za-z0-9_-]{1,255}$/.test(secret)) throw new GceError(400, Reason.Invalid, `Invalid secret projects/${project}/secrets/${secret}`);
      const b = parse(SecretVersionBody, body);
      const version = ctx.secrets.addVersion(project, secret, Buffer.from(b.value, 'utf8'), b.accessors);
      // The name only: the value is never echoed.
      return ok({ name: `projects/${project}/secrets/${secret}/versions/${version}`, version });
    }
    case 'GET buckets':
      return ok({ buckets: ctx.state.buckets ?? {} });
    case 'POST buckets/*':
    case 'DELETE buckets/*': {
      const name = s[1];
      if (!validBucketName(name)) throw new GceError(400, Reason.Invalid, `Invalid bucket name: '${name.slice(0, 230)}'`);
      const buckets = (ctx.state.buckets ??= {});
      if (method === 'DELETE') delete buckets[name];
      else buckets[name] = parse(BucketSettingsSchema, body);
      ctx.persist();
      const settings = bucketSettings({ state: ctx.state, bucketsDir: ctx.bucketsDir, endpoint: () => '' }, name);
      return ok({ name, exists: settings !== undefined, location: settings && !settings.forbidden ? (settings.location ?? DEFAULT_BUCKET_LOCATION) : undefined, forbidden: settings?.forbidden ?? false, readOnly: settings?.readOnly ?? false });
    }
    case 'GET api-usage':
      return ok(ctx.apiUsage.view(ctx.clock.now(), query.get('project') ?? undefined));
    case 'DELETE api-usage': {
      const now = ctx.clock.now();
      ctx.apiUsage.reset(now);
      return ok(ctx.apiUsage.view(now));
    }
    case 'GET rate-quotas':
      return ok(ctx.rateQuotas.view(ctx.clock.now(), query.get('project') ?? undefined));
    case 'POST rate-quotas':
      ctx.rateQuotas.configure(parse(RateQuotaBody, body));
      return ok(ctx.rateQuotas.view(ctx.clock.now()));
    case 'GET synthetic-guests':
    case 'POST synthetic-guests': {
      if (method === 'POST') {
        try {
          ctx.synthetic.configure(parse(SyntheticGuestBody, body));
        } catch (err) {
          throw err instanceof GceError ? err : new GceError(400, Reason.Invalid, (err as Error).message);
        }
      }
      const view: SyntheticGuestsView = { defaults: ctx.synthetic.defaults, running: ctx.synthetic.count };
      return ok(view);
    }
    case 'GET gpu-telemetry':
      return ok(gpuTelemetryView(ctx));
    case 'POST gpu-telemetry': {
      // null restores the default every VM reports.
      if (body === null || (typeof body === 'object' && body !== null && (body as { utilisation?: unknown }).utilisation === null)) delete ctx.state.gpuTelemetry;
      else ctx.state.gpuTelemetry = parse(GpuTelemetrySchema, body);
      ctx.persist();
      return ok(gpuTelemetryView(ctx));
    }
    case 'POST projects/*/zones/*/instances/*/gpu-telemetry':
    case 'POST zones/*/instances/*/gpu-telemetry': {
      const scoped = s[0] === 'projects';
      const [project, zone, name] = scoped ? [s[1], s[3], s[5]] : [undefined, s[1], s[3]];
      const i = findInstance(ctx, project, zoneOf(ctx, zone), name);
      if (!i.gpus || i.gpus.count === 0) throw new GceError(400, Reason.Invalid, `Instance ${name} has no GPUs, so no nvidia-smi to report`);
      if ((body as { utilisation?: unknown } | null)?.utilisation === null) delete i.gpuTelemetry;
      else i.gpuTelemetry = parse(GpuTelemetrySchema, body);
      ctx.persist();
      return ok({ instance: `${i.zone}/${i.name}`, gpuTelemetry: i.gpuTelemetry ?? ctx.state.gpuTelemetry ?? DEFAULT_GPU_TELEMETRY });
    }
    case 'GET billing-catalog':
    case 'POST billing-catalog':
      return ok(ctx.billingCatalog.admin(method, body));
    case 'GET faults':
      return ok({ faults: ctx.faults.list() });
    case 'POST faults': {
      const rule: FaultRule = ctx.faults.add(parse(FaultSchema, body));
      return ok(rule);
    }
    case 'DELETE faults':
      ctx.faults.clear();
      return ok({ faults: [] });
    default:
      throw new GceError(404, Reason.NotFound, `No admin route ${method} ${ADMIN_PREFIX}/${s.join('/')}`);
  }
}

