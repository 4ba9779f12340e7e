/**
 * The spot availability trace file format (../shared/traces/*.json, described in that
 * folder's README), parsed once for every consumer: the emulator replays a trace as GCE
 * zones, the policy benchmark narrows it to one instance group. Each consumer maps these
 * entries onto its own model; the file's rules live only here.
 *
 * It lives in config/ because both consumers already depend on config/ (the catalog)
 * and neither may depend on the other: the emulator is infrastructure, bench/ a leaf.
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { z } from 'zod';

/**
 * Spot price = on-demand price / this, for traces that recorded no spot price: the
 * convention of the Can't Be Late simulator, which the traces README adopts.
 */
export const SPOT_PRICE_DIVISOR = 3.1446;

const Price = z.number().positive();

/** Fields the file sets once and any zone entry may override. */
const shape = {
  instanceType: z.string().min(1).optional(),
  accelerator: z.string().min(1).optional(),
  acceleratorCount: z.number().int().positive().optional(),
  onDemandPrice: Price.optional(),
};

const ZoneEntrySchema = z.looseObject({
  zone: z.string().min(1),
  region: z.string().min(1).optional(),
  available: z.string().regex(/^[01]+$/, 'expected a non-empty string of 0s and 1s, one per tick'),
  spotPrice: z.union([Price, z.array(Price).min(1)]).optional(),
  availableNodes: z.array(z.number().int().nonnegative()).min(1).optional(),
  ...shape,
});

const TraceFileSchema = z.looseObject({
  name: z.string().min(1).optional(),
  cloud: z.string().optional(),
  gapSeconds: z.number().positive(),
  startTime: z.string().optional(),
  ...shape,
  zones: z.array(ZoneEntrySchema).min(1),
});

/** One zone entry with the file-level defaults applied and its spot price series resolved. */
export interface TraceZoneEntry {
  /** The zone as the trace names it (e.g. AWS `us-east-1a`). */
  zone: string;
  region?: string;
  /** Absent when neither the entry nor the file names one. */
  instanceType?: string;
  accelerator?: string;
  acceleratorCount: number;
  /** USD/hour for the whole instance. */
  onDemandPrice: number;
  /** One character per tick: `1` = a spot instance could be launched. */
  available: string;
  /** USD/hour for the whole instance: one figure, or one per tick (same length as `available`). */
  spotPrice: number | number[];
  /**
   * Per tick, how many nodes of a pool could run there (traces recorded for gangs: a gang
   * of N fits only where this is >= N); absent when the file did not count nodes.
   */
  availableNodes?: number[];
  /** True when the file recorded no spot price and `spotPrice` is on-demand / SPOT_PRICE_DIVISOR. */
  spotPriceDerived: boolean;
}

export interface TraceFile {
  name: string;
  gapSeconds: number;
  entries: TraceZoneEntry[];
}

function describeIssues(label: string, error: z.ZodError): string {
  return error.issues.map((i) => `${label}: ${i.path.length ? i.path.join('.') : 'file'}: ${i.message}`).join('; ');
}

/** Parses a trace file's JSON; `label` (usually the file name) names the trace when it has no `name` and prefixes errors. */
export function parseTraceFile(json: unknown, label = 'trace'): TraceFile {
  const parsed = TraceFileSchema.safeParse(json);
  if (!parsed.success) throw new Error(describeIssues(label, parsed.error));
  const file = parsed.data;
  const entries = file.zones.map((z, i): TraceZoneEntry => {
    const where = `${label}: zones[${i}] (${z.zone})`;
    const onDemandPrice = z.onDemandPrice ?? file.onDemandPrice;
    if (onDemandPrice === undefined) throw new Error(`${where}: no onDemandPrice (set it on the entry or the file)`);
    const recorded = z.spotPrice;
    if (Array.isArray(recorded) && recorded.length !== z.available.length) {
      throw new Error(`${where}: spotPrice has ${recorded.length} ticks, available has ${z.available.length}`);
    }
    const nodes = z.availableNodes;
    if (nodes !== undefined) {
      if (nodes.length !== z.available.length) throw new Error(`${where}: availableNodes has ${nodes.length} ticks, available has ${z.available.length}`);
      // `available` is "at least one node": a file where the two disagree was converted wrongly.
      const tick = nodes.findIndex((n, t) => (n > 0) !== (z.available[t] === '1'));
      if (tick >= 0) throw new Error(`${where}: tick ${tick}: availableNodes is ${nodes[tick]} but available is ${z.available[tick]} (available must be 1 exactly when availableNodes >= 1)`);
    }
    return {
      zone: z.zone,
      region: z.region,
      instanceType: z.instanceType ?? file.instanceType,
      accelerator: z.accelerator ?? file.accelerator,
      acceleratorCount: z.acceleratorCount ?? file.acceleratorCount ?? 1,
      onDemandPrice,
      available: z.available,
      spotPrice: recorded ?? onDemandPrice / SPOT_PRICE_DIVISOR,
      ...(nodes !== undefined ? { availableNodes: nodes } : {}),
      spotPriceDerived: recorded === undefined,
    };
  });
  return { name: file.name ?? label, gapSeconds: file.gapSeconds, entries };
}

export function readTraceFile(path: string): TraceFile {
  const label = basename(path);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8')) as unknown;
  } catch (err) {
    throw new Error(`${label}: ${(err as Error).message}`);
  }
  return parseTraceFile(json, label);
}
