/**
 * Injected faults for the GCE API (never the admin API or the metadata servers): a
 * fraction of matching calls answers 429 or 503 (or 500) with GCE's error JSON, or
 * hangs for a while first, so retry policies can be tested against real transport
 * failures. Faults are not persisted: a restarted emulator is healthy.
 */
import { z } from 'zod';
import { GceError, Reason } from './errors';
import { seededRandom } from '../workflows/api';

export const FaultSchema = z.strictObject({
  /** Share of matching calls affected, 0..1. */
  fraction: z.number().min(0).max(1),
  /** HTTP status to answer with; omitted with hangMs = hang, then answer normally. */
  status: z.union([z.literal(429), z.literal(500), z.literal(503)]).optional(),
  /** Real milliseconds to hold the call before answering. */
  hangMs: z.number().int().min(0).max(600_000).optional(),
  /** Regular expression the request path must match (default: every GCE path). */
  path: z.string().max(500).optional(),
  /** HTTP method to match (default: any). */
  method: z.string().max(10).optional(),
  /** Affect at most this many calls, then the rule retires. */
  count: z.number().int().positive().optional(),
});
export type FaultSpec = z.infer<typeof FaultSchema>;

export interface FaultRule extends FaultSpec {
  id: number;
  hits: number;
}

export class Faults {
  private rules: FaultRule[] = [];
  private nextId = 1;
  private readonly random: () => number;

  constructor(seed: number) {
    this.random = seededRandom(seed ^ 0x5eed);
  }

  add(spec: FaultSpec): FaultRule {
    if (spec.path !== undefined) {
      try {
        new RegExp(spec.path);
      } catch {
        throw new GceError(400, Reason.Invalid, `Invalid fault path pattern '${spec.path}'`);
      }
    }
    const rule: FaultRule = { ...spec, id: this.nextId++, hits: 0 };
    this.rules.push(rule);
    return rule;
  }

  clear(): void {
    this.rules = [];
  }

  list(): FaultRule[] {
    return this.rules;
  }

  /** The rule that hits this call, if any (counted as a hit). */
  pick(method: string, path: string): FaultRule | undefined {
    for (const rule of this.rules) {
      if (rule.method && rule.method.toUpperCase() !== method.toUpperCase()) continue;
      if (rule.path && !new RegExp(rule.path).test(path)) continue;
      if (this.random() >= rule.fraction) continue;
      rule.hits++;
      if (rule.count !== undefined && rule.hits >= rule.count) this.rules = this.rules.filter((r) => r !== rule);
      return rule;
    }
    return undefined;
  }
}

export function faultError(status: number): GceError {
  if (status === 429) return new GceError(429, Reason.RateLimitExceeded, 'Rate Limit Exceeded', 'usageLimits');
  if (status === 503) return new GceError(503, Reason.BackendError, 'Internal error. Please try again or contact Google Support. (Code: \'emulated-503\')');
  return new GceError(500, Reason.BackendError, 'Internal error. Please try again or contact Google Support. (Code: \'emulated-500\')');
}

/**
 * The `X-Server-Timeout` system parameter of a request (whole seconds), in ms: a Google API
 * fails a request it has not processed by then rather than process it later. Undefined
 * when absent or not a positive number.
 */
export function serverTimeoutMs(header: string | string[] | undefined): number | undefined {
  const seconds = Number(Array.isArray(header) ? header[0] : header);
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : undefined;
}

export function deadlineExceeded(): GceError {
  return new GceError(504, Reason.DeadlineExceeded, 'The request was not processed within its deadline (X-Server-Timeout); it was not carried out.');
}
