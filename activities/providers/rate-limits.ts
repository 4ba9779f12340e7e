/**
 * When each project last answered "rate limit exceeded", worker-wide. Every caller in
 * the worker shares a project's per-minute quotas, so the fleet observer, whose guest
 * reads are the only ones that can wait, gives way when any caller is refused
 * (activities/fleet/planner.ts shrinks its read budget).
 */
const lastRefusedAtMs = new Map<string, number>();

export function noteRateLimited(project: string, atMs = Date.now()): void {
  lastRefusedAtMs.set(project, Math.max(atMs, lastRefusedAtMs.get(project) ?? 0));
}

/** True when `project` refused a call for its rate quota at or after `sinceMs`. */
export function rateLimitedSince(project: string, sinceMs: number): boolean {
  return (lastRefusedAtMs.get(project) ?? Number.NEGATIVE_INFINITY) >= sinceMs;
}
