/**
 * Spot availability traces (format: ../shared/traces/README.md, parsed by
 * config/spot-trace.ts), narrowed to one group of interchangeable instances, and
 * optionally resampled to a coarser grid.
 */
import { readTraceFile, type TraceFile, type TraceZoneEntry } from '../config/spot-trace';

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
  /**
   * The gang size the trace was narrowed for: a zone has capacity at a tick only when
   * `availableNodes >= nodes` there, and every price is `nodes` times the node's (1: a single node).
   */
  nodes: number;
}

function groupOf(entry: TraceZoneEntry): string {
  const type = entry.instanceType ?? 'instance';
  return entry.accelerator === undefined ? type : `${type} (${entry.accelerator} x${entry.acceleratorCount})`;
}

/**
 * One zone's series for a gang of `nodes`: capacity where at least that many nodes could
 * run (a single node: `available`), at `nodes` times the node's prices. A gang that runs
 * loses capacity as soon as fewer than `nodes` could: one node lost ends its attempt, as
 * the workflow's gang recovery does (workflows/run/gang.ts).
 */
function seriesOf(entry: TraceZoneEntry, nodes: number, file: string): ZoneSeries {
  const ticks = entry.available.length;
  const raw = entry.spotPrice;
  const spotPrice = Array.isArray(raw) ? Float64Array.from(raw, (p) => p * nodes) : new Float64Array(ticks).fill(raw * nodes);
  let available: Uint8Array;
  if (nodes === 1) available = Uint8Array.from(entry.available, (c) => (c === '1' ? 1 : 0));
  else if (entry.availableNodes === undefined) {
    throw new Error(`${file}: zone ${entry.zone} has no availableNodes, so a gang of ${nodes} cannot be placed on it (its available says only whether one node could run); use --nodes 1 or a trace that counts nodes (e.g. aws-v100-3zone-16node-2023-08.json)`);
  } else available = Uint8Array.from(entry.availableNodes, (n) => (n >= nodes ? 1 : 0));
  return { zone: entry.zone, available, spotPrice, onDemandPrice: entry.onDemandPrice * nodes };
}

/** Whether every entry of the file counts nodes (availableNodes), so gangs of more than one can be placed on it. */
export function countsNodes(file: TraceFile): boolean {
  return file.entries.every((e) => e.availableNodes !== undefined);
}

/** Narrows a parsed trace to one instance group (default: the file's first), for a gang of `nodes` (default 1). */
export function narrowTrace(file: TraceFile, group?: string, nodes = 1): Trace {
  if (!Number.isInteger(nodes) || nodes < 1) throw new Error(`${file.name}: a gang is a whole number of nodes >= 1, not ${nodes}`);
  const groups = [...new Set(file.entries.map(groupOf))];
  const chosen = group === undefined ? groups[0] : groups.find((g) => g === group || g.startsWith(`${group} `));
  if (chosen === undefined) throw new Error(`${file.name}: no instance group ${group}; groups: ${groups.join(', ')}`);
  const zones = file.entries.filter((e) => groupOf(e) === chosen).map((e) => seriesOf(e, nodes, file.name));
  const ticks = Math.min(...zones.map((z) => z.available.length));
  return { name: file.name, gapSeconds: file.gapSeconds, group: chosen, groups, zones, ticks, nodes };
}

/** Load a trace narrowed to one instance group (default: the file's first), for a gang of `nodes` (default 1). */
export function loadTrace(path: string, group?: string, nodes = 1): Trace {
  return narrowTrace(readTraceFile(path), group, nodes);
}

/** The trace's instance group as tables name it: a gang says its size. */
export function groupLabel(trace: Trace): string {
  return trace.nodes > 1 ? `${trace.group}, gang of ${trace.nodes}` : trace.group;
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

/** Every on-demand price times `factor`: the same capacity at another spot/on-demand price ratio. */
export function scaleOnDemand(trace: Trace, factor: number): Trace {
  if (factor === 1) return trace;
  return { ...trace, zones: trace.zones.map((z) => ({ ...z, onDemandPrice: z.onDemandPrice * factor })) };
}

/** A stretch of ticks in which no zone of the trace had spot capacity. */
export interface DrySpell {
  startTick: number;
  ticks: number;
}

/** Every dry spell of the trace, in order: the market-wide outages a run cannot sit out by moving. */
export function drySpells(trace: Trace): DrySpell[] {
  const spells: DrySpell[] = [];
  for (let t = 0; t < trace.ticks; t++) {
    if (trace.zones.some((z) => z.available[t] === 1)) continue;
    const last = spells[spells.length - 1];
    if (last !== undefined && last.startTick + last.ticks === t) last.ticks += 1;
    else spells.push({ startTick: t, ticks: 1 });
  }
  return spells;
}
