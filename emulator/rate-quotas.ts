/**
 * Compute Engine's API rate quotas, as GCE enforces them: each method belongs to one
 * quota group; each group has a per-minute limit per project, and per region for zonal
 * methods; the count refills at the start of the next synchronized interval (a minute
 * aligned on the clock, not a sliding window). A call past the limit is answered
 * 403 `rateLimitExceeded` in GCE's JSON, with the google.rpc.ErrorInfo Google adds to
 * quota errors, and is not served. Rejected calls do not use quota.
 *
 * Groups and method membership: cloud.google.com/compute/docs/api-rate-limits (the
 * legacy per-group metrics, which GCE still enforces; e.g. getGuestAttributes counts
 * as a Query, zoneOperations.wait as a heavy-weight read). Default limits: that page
 * published 1,500 requests per minute per project for its groups (it now shows limits
 * only in the console); the emulator applies 1,500 to every group. See the README.
 */
import { GceError, Reason } from './errors';
import type { ApiCall } from './api-methods';
import { PROJECT_NUMBER } from './ids';

export interface RateQuotaGroup {
  /** Short name, used in options, the CLI and the admin API: `read_requests_per_region`. */
  id: string;
  /** GCE's quota metric: `compute.googleapis.com/<id>`. */
  metric: string;
  /** GCE's limit name, e.g. `ReadRequestsPerMinutePerRegion`. */
  limitName: string;
  /** As GCE's error message names the metric and the limit. */
  displayName: string;
  limitDisplayName: string;
  /** Counted per project and region (zonal methods) or per project (global methods). */
  scope: 'region' | 'global';
  methods: readonly string[];
}

/** Requests per window per project (and region) when nothing else is configured. */
export const DEFAULT_RATE_LIMIT = 1500;
export const DEFAULT_WINDOW_SECONDS = 60;

const GROUPS: Omit<RateQuotaGroup, 'metric'>[] = [
  {
    id: 'read_requests_per_region',
    limitName: 'ReadRequestsPerMinutePerRegion',
    displayName: 'Read requests',
    limitDisplayName: 'Read requests per minute per region',
    scope: 'region',
    methods: ['compute.instances.get', 'compute.machineTypes.get', 'compute.acceleratorTypes.get'],
  },
  {
    id: 'list_requests_per_region',
    limitName: 'ListRequestsPerMinutePerRegion',
    displayName: 'List requests',
    limitDisplayName: 'List requests per minute per region',
    scope: 'region',
    methods: ['compute.instances.list', 'compute.machineTypes.list', 'compute.acceleratorTypes.list', 'compute.zoneOperations.list'],
  },
  {
    id: 'operation_read_requests_per_region',
    limitName: 'OperationReadRequestsPerMinutePerRegion',
    displayName: 'Operation read requests',
    limitDisplayName: 'Operation read requests per minute per region',
    scope: 'region',
    methods: ['compute.zoneOperations.get'],
  },
  {
    id: 'heavy_weight_read_requests_per_region',
    limitName: 'HeavyWeightReadRequestsPerMinutePerRegion',
    displayName: 'Heavy-weight read requests',
    limitDisplayName: 'Heavy-weight read requests per minute per region',
    scope: 'region',
    methods: ['compute.zoneOperations.wait'],
  },
  {
    id: 'default_per_region',
    limitName: 'QueriesPerMinutePerRegion',
    displayName: 'Queries',
    limitDisplayName: 'Queries per minute per region',
    scope: 'region',
    methods: ['compute.instances.insert', 'compute.instances.delete', 'compute.zoneOperations.delete', 'compute.instances.getGuestAttributes', 'compute.instances.setMetadata', 'compute.instances.setLabels'],
  },
  {
    id: 'get_serial_port_output_requests_per_region',
    limitName: 'GetSerialPortOutputRequestsPerMinutePerProjectPerRegion',
    displayName: 'Get serial port output requests',
    limitDisplayName: 'Get serial port output requests per minute per region',
    scope: 'region',
    methods: ['compute.instances.getSerialPortOutput'],
  },
  {
    id: 'read_requests',
    limitName: 'ReadRequestsPerMinutePerProject',
    displayName: 'Read requests',
    limitDisplayName: 'Read requests per minute',
    scope: 'global',
    methods: ['compute.projects.get', 'compute.zones.get', 'compute.regions.get'],
  },
  {
    id: 'list_requests',
    limitName: 'ListRequestsPerMinutePerProject',
    displayName: 'List requests',
    limitDisplayName: 'List requests per minute',
    scope: 'global',
    methods: ['compute.zones.list', 'compute.regions.list'],
  },
  {
    id: 'heavy_weight_read_requests',
    limitName: 'HeavyWeightReadRequestsPerMinutePerProject',
    displayName: 'Heavy-weight read requests',
    limitDisplayName: 'Heavy-weight read requests per minute',
    scope: 'global',
    methods: ['compute.instances.aggregatedList', 'compute.acceleratorTypes.aggregatedList'],
  },
];

export const RATE_QUOTA_GROUPS: readonly RateQuotaGroup[] = GROUPS.map((g) => ({ ...g, metric: `compute.googleapis.com/${g.id}` }));

const GROUP_OF_METHOD = new Map(RATE_QUOTA_GROUPS.flatMap((g) => g.methods.map((m) => [m, g] as const)));

export function rateQuotaGroup(idOrMetric: string): RateQuotaGroup | undefined {
  const id = idOrMetric.replace(/^compute\.googleapis\.com\//, '');
  return RATE_QUOTA_GROUPS.find((g) => g.id === id);
}

export interface RateQuotaOptions {
  /** Enforce the limits (default true). Calls are counted either way. */
  enabled?: boolean;
  /** Length of the refill interval in real seconds (GCE: 60). Shorten it in tests. */
  windowSeconds?: number;
  /** Limit per window by group id (`read_requests_per_region`) or metric (`compute.googleapis.com/...`). */
  limits?: Record<string, number>;
}

export interface RateQuotaChange {
  enabled?: boolean;
  windowSeconds?: number;
  /** Group id or metric -> limit; null restores the default (or the emulator-wide limit, for a project). */
  limits?: Record<string, number | null>;
  /** Change the limits of this project only (GCE quotas are per project). */
  project?: string;
}

export interface RateQuotaUsage {
  project: string;
  /** The region, or `global`. */
  location: string;
  group: string;
  used: number;
  limit: number;
  /** When the current interval began and when it refills (ISO). */
  windowStart: string;
  refillAt: string;
}

export interface RateQuotaView {
  enabled: boolean;
  windowSeconds: number;
  groups: (Omit<RateQuotaGroup, 'methods'> & { methods: string[]; limit: number; projectLimits: Record<string, number> })[];
  usage: RateQuotaUsage[];
}

interface Counter {
  windowStart: number;
  used: number;
}

function checkedGroup(idOrMetric: string): RateQuotaGroup {
  const group = rateQuotaGroup(idOrMetric);
  if (!group) throw new GceError(400, Reason.Invalid, `Unknown rate quota group '${idOrMetric}'; known: ${RATE_QUOTA_GROUPS.map((g) => g.id).join(', ')}`);
  return group;
}

function checkedLimit(group: string, limit: number): number {
  if (!Number.isInteger(limit) || limit < 0) throw new GceError(400, Reason.Invalid, `Rate quota limit for ${group} must be a whole number >= 0, got ${limit}`);
  return limit;
}

export class RateQuotas {
  private enabled: boolean;
  private windowMs: number;
  /** group id -> limit, for every project. */
  private readonly limits = new Map<string, number>();
  /** project -> group id -> limit. */
  private readonly projectLimits = new Map<string, Map<string, number>>();
  /** `project|location|group` -> the current interval's count. */
  private readonly counters = new Map<string, Counter>();

  constructor(options: RateQuotaOptions = {}) {
    this.enabled = options.enabled ?? true;
    this.windowMs = this.checkedWindow(options.windowSeconds ?? DEFAULT_WINDOW_SECONDS);
    for (const [key, limit] of Object.entries(options.limits ?? {})) {
      const group = checkedGroup(key);
      this.limits.set(group.id, checkedLimit(group.id, limit));
    }
  }

  private checkedWindow(seconds: number): number {
    if (!(seconds > 0) || !Number.isFinite(seconds) || seconds > 3600) throw new GceError(400, Reason.Invalid, `Rate quota windowSeconds must be > 0 and <= 3600, got ${seconds}`);
    return seconds * 1000;
  }

  limitOf(project: string, group: RateQuotaGroup): number {
    return this.projectLimits.get(project)?.get(group.id) ?? this.limits.get(group.id) ?? DEFAULT_RATE_LIMIT;
  }

  /**
   * Counts the call against its group; returns the 403 to answer when the group's
   * interval is used up (the call is then not counted).
   */
  admit(call: ApiCall, nowMs: number): GceError | undefined {
    const group = GROUP_OF_METHOD.get(call.method);
    if (!group) return undefined;
    const location = group.scope === 'region' ? call.location : 'global';
    const key = `${call.project}|${location}|${group.id}`;
    const windowStart = Math.floor(nowMs / this.windowMs) * this.windowMs;
    let counter = this.counters.get(key);
    if (!counter || counter.windowStart !== windowStart) {
      counter = { windowStart, used: 0 };
      this.counters.set(key, counter);
    }
    const limit = this.limitOf(call.project, group);
    if (this.enabled && counter.used >= limit) return rateLimitError(group, location, limit);
    counter.used++;
    return undefined;
  }

  configure(change: RateQuotaChange): void {
    if (change.enabled !== undefined) this.enabled = change.enabled;
    if (change.windowSeconds !== undefined) {
      this.windowMs = this.checkedWindow(change.windowSeconds);
      this.counters.clear();
    }
    const target = change.project === undefined ? this.limits : (this.projectLimits.get(change.project) ?? new Map<string, number>());
    for (const [key, limit] of Object.entries(change.limits ?? {})) {
      const group = checkedGroup(key);
      if (limit === null) target.delete(group.id);
      else target.set(group.id, checkedLimit(group.id, limit));
    }
    if (change.project !== undefined) {
      if (target.size > 0) this.projectLimits.set(change.project, target);
      else this.projectLimits.delete(change.project);
    }
  }

  view(nowMs: number, project?: string): RateQuotaView {
    const usage: RateQuotaUsage[] = [];
    for (const [key, counter] of this.counters) {
      const [p, location, groupId] = key.split('|');
      if (project !== undefined && p !== project) continue;
      if (counter.windowStart + this.windowMs <= nowMs) continue;
      const group = rateQuotaGroup(groupId)!;
      usage.push({ project: p, location, group: groupId, used: counter.used, limit: this.limitOf(p, group), windowStart: new Date(counter.windowStart).toISOString(), refillAt: new Date(counter.windowStart + this.windowMs).toISOString() });
    }
    return {
      enabled: this.enabled,
      windowSeconds: this.windowMs / 1000,
      groups: RATE_QUOTA_GROUPS.map((g) => ({
        ...g,
        methods: [...g.methods],
        limit: this.limits.get(g.id) ?? DEFAULT_RATE_LIMIT,
        projectLimits: Object.fromEntries([...this.projectLimits].flatMap(([p, limits]) => (limits.has(g.id) && (project === undefined || p === project) ? [[p, limits.get(g.id)!]] : []))),
      })),
      usage,
    };
  }
}

/** GCE's answer to a call past a rate quota (403, reason rateLimitExceeded, with the ErrorInfo Google attaches). */
export function rateLimitError(group: RateQuotaGroup, location: string, limit: number): GceError {
  const message = `Quota exceeded for quota metric '${group.displayName}' and limit '${group.limitDisplayName}' of service 'compute.googleapis.com' for consumer 'project_number:${PROJECT_NUMBER}'.`;
  return new GceError(403, Reason.RateLimitExceeded, message, 'usageLimits', [
    {
      '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
      reason: 'RATE_LIMIT_EXCEEDED',
      domain: 'googleapis.com',
      metadata: {
        consumer: `projects/${PROJECT_NUMBER}`,
        quota_limit: group.limitName,
        quota_limit_value: String(limit),
        quota_location: location,
        quota_metric: group.metric,
        service: 'compute.googleapis.com',
      },
    },
    { '@type': 'type.googleapis.com/google.rpc.Help', links: [{ description: 'Request a higher quota limit.', url: 'https://cloud.google.com/docs/quotas/help/request_increase' }] },
  ]);
}
