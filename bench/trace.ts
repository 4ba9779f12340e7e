/**
 * Spot availability traces (format: ../shared/traces/README.md), parsed, narrowed to
 * one group of interchangeable instances, and optionally resampled to a coarser grid.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';

/** The Can't Be Late convention for traces without a recorded spot price. */
export const ON_DEMAND_TO_SPOT_PRICE_RATIO = 3.1446;

const shape = {
  instanceType: z.string().optional(),
  accelerator: z.string().optional(),
  acceleratorCount: z.number().optional(),
  onDemandPrice: z.number().positive().optional(),
};

const traceFileSchema = z.object({
  name: z.string(),
  gapSeconds: z.number().positive(),
  ...shape,
  zones: z
    .array(
      z.object({
        zone: z.string(),
        region: z.string().optional(),
        available: z.string().regex(/^[01]*$/),
        spotPrice: z.union([z.number().positive(), z.array(z.number().positive())]).optional(),
        ...shape,
      }),
    )
    .min(1),
});

/** One zone's spot series on the trace grid. */
export interface ZoneSeries {
  zone: string;
  available: Uint8Array;
  /** USD/hour per tick. */
  spotPrice: Float64Array;
  /** USD/hour. */
  onDemandPrice: number;
}

export interface Trace {
  name: string;
  gapSeconds: number;
  /** The instance group this trace was narrowed to, e.g. `p3.2xlarge (V100 x1)`. */
  group: string;
  /** Every group in the file, in file order. */
  groups: string[];
  zones: ZoneSeries[];
  ticks: number;
}

type TraceFile = z.infer<typeof traceFileSchema>;
type ZoneEntry = TraceFile['zones'][number];

function groupOf(file: TraceFile, entry: ZoneEntry): string {
  const type = entry.instanceType ?? file.instanceType ?? 'instance';
  const acc = entry.accelerator ?? file.accelerator;
  const count = entry.acceleratorCount ?? file.acceleratorCount ?? 1;
  return acc === undefined ? type : `${type} (${acc} x${count})`;
}

function seriesOf(file: TraceFile, entry: ZoneEntry): ZoneSeries {
  const ticks = entry.available.length;
  const onDemandPrice = entry.onDemandPrice ?? file.onDemandPrice;
  if (onDemandPrice === undefined) throw new Error(`${file.name}: ${entry.zone} has no onDemandPrice`);
  const raw = entry.spotPrice ?? onDemandPrice / ON_DEMAND_TO_SPOT_PRICE_RATIO;
  if (Array.isArray(raw) && raw.length !== ticks) throw new Error(`${file.name}: ${entry.zone} spotPrice length ${raw.length} != ${ticks}`);
  const spotPrice = Array.isArray(raw) ? Float64Array.from(raw) : new Float64Array(ticks).fill(raw);
  const available = Uint8Array.from(entry.available, (c) => (c === '1' ? 1 : 0));
  return { zone: entry.zone, available, spotPrice, onDemandPrice };
}

/** Load a trace narrowed to one instance group (default: the file's first). */
export function loadTrace(path: string, group?: string): Trace {
  const file = traceFileSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
  const groups = [...new Set(file.zones.map((e) => groupOf(file, e)))];
  const chosen = group === undefined ? groups[0] : groups.find((g) => g === group || g.startsWith(`${group} `));
  if (chosen === undefined) throw new Error(`${file.name}: no instance group ${group}; groups: ${groups.join(', ')}`);
  const zones = file.zones.filter((e) => groupOf(file, e) === chosen).map((e) => seriesOf(file, e));
  const ticks = Math.min(...zones.map((z) => z.available.length));
  return { name: file.name, gapSeconds: file.gapSeconds, group: chosen, groups, zones, ticks };
}

/**
 * Resample onto a grid `factor` times coarser: a coarse tick is available only if every
 * fine tick in it is, and its spot price is their mean. A trailing partial tick is dropped.
 */
export function resample(trace: Trace, gridSeconds: number): Trace {
  const factor = gridSeconds / trace.gapSeconds;
  if (!Number.isInteger(factor) || factor < 1) throw new Error(`--grid-seconds ${gridSeconds} must be a whole multiple of the trace's ${trace.gapSeconds} s`);
  if (factor === 1) return trace;
  const ticks = Math.floor(trace.ticks / factor);
  const zones = trace.zones.map((z) => {
    const available = new Uint8Array(ticks);
    const spotPrice = new Float64Array(ticks);
    for (let t = 0; t < ticks; t++) {
      let all = 1;
      let sum = 0;
      for (let i = t * factor; i < (t + 1) * factor; i++) {
        all &= z.available[i];
        sum += z.spotPrice[i];
      }
      available[t] = all;
      spotPrice[t] = sum / factor;
    }
    return { ...z, available, spotPrice };
  });
  return { ...trace, gapSeconds: gridSeconds, zones, ticks };
}
