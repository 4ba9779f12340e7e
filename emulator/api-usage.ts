/**
 * Counts every call to the emulated Compute API by project and method, answered or
 * refused, since the emulator started or the counters were last reset, so a benchmark
 * can report API calls per run per minute and how many were rate-limited.
 */
import { UNKNOWN_METHOD } from './api-methods';

export interface MethodUsage {
  /** Every call, including those refused. */
  calls: number;
  /** Calls answered 403 rateLimitExceeded. */
  rateLimited: number;
  /** Calls answered with any other error status (4xx, 5xx, injected faults). */
  errors: number;
}

export interface ProjectUsage {
  project: string;
  totals: MethodUsage;
  /** By GCE method name (`compute.instances.get`, ...; `unknown` for paths the API does not serve). */
  methods: Record<string, MethodUsage>;
}

export interface ApiUsageView {
  /** When counting began (emulator start or the last reset), and now (ISO). */
  since: string;
  now: string;
  /** Real seconds between the two: divide by 60 for per-minute rates. */
  elapsedSeconds: number;
  projects: ProjectUsage[];
}

function empty(): MethodUsage {
  return { calls: 0, rateLimited: 0, errors: 0 };
}

function add(into: MethodUsage, from: MethodUsage): void {
  into.calls += from.calls;
  into.rateLimited += from.rateLimited;
  into.errors += from.errors;
}

export class ApiUsage {
  private sinceMs: number;
  /** project -> method -> usage */
  private readonly counts = new Map<string, Map<string, MethodUsage>>();

  constructor(nowMs: number) {
    this.sinceMs = nowMs;
  }

  record(project: string, method: string | undefined, outcome: { status: number; rateLimited: boolean }): void {
    let methods = this.counts.get(project);
    if (!methods) this.counts.set(project, (methods = new Map()));
    const key = method ?? UNKNOWN_METHOD;
    let usage = methods.get(key);
    if (!usage) methods.set(key, (usage = empty()));
    usage.calls++;
    if (outcome.rateLimited) usage.rateLimited++;
    else if (outcome.status >= 400) usage.errors++;
  }

  reset(nowMs: number): void {
    this.counts.clear();
    this.sinceMs = nowMs;
  }

  view(nowMs: number, project?: string): ApiUsageView {
    const projects: ProjectUsage[] = [];
    for (const [name, methods] of [...this.counts].sort(([a], [b]) => a.localeCompare(b))) {
      if (project !== undefined && name !== project) continue;
      const totals = empty();
      const byMethod: Record<string, MethodUsage> = {};
      for (const [method, usage] of [...methods].sort(([a], [b]) => a.localeCompare(b))) {
        byMethod[method] = { ...usage };
        add(totals, usage);
      }
      projects.push({ project: name, totals, methods: byMethod });
    }
    return { since: new Date(this.sinceMs).toISOString(), now: new Date(nowMs).toISOString(), elapsedSeconds: (nowMs - this.sinceMs) / 1000, projects };
  }
}
