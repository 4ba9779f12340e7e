/**
 * Spot availability traces (../shared/traces/*.json, format in that folder's README),
 * mapped onto the emulator's zones.
 *
 * Mapping: with a trace, the trace's accelerator is offered only in the trace's zones
 * (every other accelerator keeps its catalog zones). A trace zone keeps its name in
 * GCE's `<region>-<letter>` shape: AWS `us-east-1a` becomes zone `us-east-1-a` in
 * region `us-east-1`, so code that derives a region from a zone name works unchanged.
 * The trace's accelerator names map to GCE types (V100 -> nvidia-tesla-v100, ...), and
 * the machine type is the catalog's for that accelerator and count (n1 + attached GPUs
 * for V100/K80). The trace's whole-instance prices replace the catalog prices there.
 * The file format itself is parsed by emulator/spot-trace.ts, shared with bench/.
 */
import { defaultCatalog, instanceKey, machineTypeFor, type Catalog, type Region, type Zone } from '../config/catalog';
import { regionOf } from '../workflows/api';
import { parseTraceFile, readTraceFile, type TraceFile } from './spot-trace';

const ACCELERATOR_NAMES: Record<string, string> = {
  V100: 'nvidia-tesla-v100',
  K80: 'nvidia-tesla-k80',
  T4: 'nvidia-tesla-t4',
  P100: 'nvidia-tesla-p100',
  A100: 'nvidia-tesla-a100',
  L4: 'nvidia-l4',
  H100: 'nvidia-h100-80gb',
};

export interface TraceEntry {
  /** Emulator (GCE-shaped) zone name. */
  zone: string;
  region: string;
  /** The zone as the trace names it. */
  sourceZone: string;
  accelerator: string;
  acceleratorCount: number;
  machineType: string;
  onDemandPrice: number;
  available: string;
  spotPrice: number | number[];
}

export interface Trace {
  name: string;
  gapSeconds: number;
  ticks: number;
  entries: TraceEntry[];
}

/** `us-east-1a` -> `us-east-1-a`; a name already shaped like GCE's is kept. */
export function gceZoneName(zone: string): string {
  const aws = /^([a-z]+-[a-z]+-\d+)([a-z])$/.exec(zone);
  return aws ? `${aws[1]}-${aws[2]}` : zone;
}

export function gceAcceleratorName(name: string, catalog: Catalog = defaultCatalog): string {
  if (catalog.accelerators[name]) return name;
  const mapped = ACCELERATOR_NAMES[name.toUpperCase()];
  if (!mapped) throw new Error(`trace accelerator '${name}' has no GCE equivalent (known: ${Object.keys(ACCELERATOR_NAMES).join(', ')})`);
  return mapped;
}

/** The trace as GCE zones: each entry's zone renamed GCE's way, its accelerator mapped to a GCE type and a machine type. */
export function traceFromFile(file: TraceFile, catalog: Catalog = defaultCatalog): Trace {
  const entries = file.entries.map((e, i): TraceEntry => {
    const where = `${file.name}: zones[${i}] (${e.zone})`;
    if (!e.accelerator) throw new Error(`${where}: no accelerator (set it on the entry or the file)`);
    const accelerator = gceAcceleratorName(e.accelerator, catalog);
    const machineType = machineTypeFor(accelerator, e.acceleratorCount, catalog);
    if (!machineType) throw new Error(`${where}: no GCE machine type for ${e.acceleratorCount} x ${accelerator}`);
    const zone = gceZoneName(e.zone);
    return { zone, region: e.region ?? regionOf(zone), sourceZone: e.zone, accelerator, acceleratorCount: e.acceleratorCount, machineType, onDemandPrice: e.onDemandPrice, available: e.available, spotPrice: e.spotPrice };
  });
  return { name: file.name, gapSeconds: file.gapSeconds, ticks: Math.max(...entries.map((e) => e.available.length)), entries };
}

export function parseTrace(json: unknown, label = 'trace', catalog: Catalog = defaultCatalog): Trace {
  return traceFromFile(parseTraceFile(json, label), catalog);
}

export function loadTrace(file: string, catalog: Catalog = defaultCatalog): Trace {
  return traceFromFile(readTraceFile(file), catalog);
}

/** Tick index for an emulated time; a trace that runs out starts again from tick 0. */
export function tickAt(trace: Trace, emulatedSeconds: number): number {
  return Math.floor(Math.max(0, emulatedSeconds) / trace.gapSeconds) % trace.ticks;
}

export function availableAt(entry: TraceEntry, tick: number): boolean {
  return entry.available[tick % entry.available.length] === '1';
}

export function spotPriceAt(entry: TraceEntry, tick: number): number {
  return Array.isArray(entry.spotPrice) ? entry.spotPrice[tick % entry.spotPrice.length] : entry.spotPrice;
}

function meanSpotPrice(entry: TraceEntry): number {
  const prices = Array.isArray(entry.spotPrice) ? entry.spotPrice : [entry.spotPrice];
  return prices.reduce((s, p) => s + p, 0) / prices.length;
}

/**
 * The catalog as seen with a trace: the trace's accelerators only in the trace's
 * zones, at the trace's prices (its mean spot price; the emulator bills the per-tick one).
 */
export function traceCatalog(trace: Trace, base: Catalog = defaultCatalog): Catalog {
  const traced = new Set(trace.entries.map((e) => e.accelerator));
  const regions: Record<string, Region> = {};
  for (const r of Object.values(base.regions)) {
    regions[r.name] = { ...r, zones: r.zones.map((z): Zone => ({ ...z, accelerators: z.accelerators.filter((a) => !traced.has(a)) })) };
  }
  for (const e of trace.entries) {
    const r = (regions[e.region] ??= { name: e.region, description: `${e.region} (trace ${trace.name})`, priceMultiplier: 1, zones: [], instancePrices: {} });
    let zone = r.zones.find((z) => z.name === e.zone);
    if (!zone) {
      zone = { name: e.zone, region: e.region, accelerators: [] };
      r.zones = [...r.zones, zone];
    }
    if (!zone.accelerators.includes(e.accelerator)) {
      const updated: Zone = { ...zone, accelerators: [...zone.accelerators, e.accelerator] };
      r.zones = r.zones.map((z) => (z.name === e.zone ? updated : z));
    }
    r.instancePrices = { ...r.instancePrices, [instanceKey(e.machineType, e.accelerator, e.acceleratorCount)]: { onDemand: e.onDemandPrice, spot: meanSpotPrice(e) } };
  }
  return { ...base, regions };
}
