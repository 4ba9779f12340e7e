/**
 * Zone memory: what runs of one project have learned about each zone x accelerator x
 * provisioning model — stockouts, preemptions and how long spot VMs ran — decayed with
 * age, so the next run starts from it instead of from nothing. Pure and JSON-plain: the
 * zoneMemory workflow (zone-memory.ts) carries it through continue-as-new, activities
 * hand slices of it to runs, and the CLI reads it; all call these functions.
 *
 *   record(memory, outcome, now) -> memory      one stockout / preemption / release
 *   zonePrior(memory, key, now)  -> ZonePrior   what a reader needs, decayed to `now`
 *
 * A gang's attempt (N nodes, all or nothing) is remembered apart from single VMs', under its
 * node count (`nodes`): a gang stocks out where one VM would not, and one lost node ends it.
 * What each record says of other sizes is for the readers (prior.ts, `readsAbout`).
 *   prune(memory, now)           -> memory      forgets what has decayed away; bounds size
 *
 * Decay: every count and every hour of exposure loses half its weight per half-life
 * (DEFAULT_HALF_LIFE_HOURS), so yesterday's evidence still counts a little and last
 * week's not at all. Counts are kept as of `asOf` and decayed on read (`decayFactor`).
 */

import { ProvisioningModel } from '../types';

/** What a run (or the observer) tells the memory about one attempt. */
export const OutcomeKind = {
  /** The zone had no capacity for the attempt's create. */
  Stockout: 'stockout',
  /** The provider reclaimed the VM; `lifetimeHours` is how long it ran, when known. */
  Preempted: 'preempted',
  /** The VM ran `lifetimeHours` and was released without a preemption (done, stopped, switched). */
  Released: 'released',
} as const;
export type OutcomeKind = (typeof OutcomeKind)[keyof typeof OutcomeKind];

export interface ZoneKey {
  zone: string;
  accelerator: string;
  /** A zone is remembered per provisioning model: FLEX_START (DWS) has its own capacity. */
  model: ProvisioningModel;
  /** A gang of this many nodes (run/gang.ts); absent means one VM. */
  nodes?: number;
}

export interface ZoneOutcome extends ZoneKey {
  kind: OutcomeKind;
  region?: string;
  /** Epoch ms the outcome happened (the teller's workflow time). */
  at: number;
  /** Hours the VM was running before it was preempted or released. */
  lifetimeHours?: number;
  /**
   * The resource (attempt) it happened to. The run and the fleet observer may both tell
   * of one preemption; it counts once.
   */
  resource?: string;
}

export interface ZoneRecord extends ZoneKey {
  region?: string;
  /** Epoch ms the decayed figures below are as of. */
  asOf: number;
  stockouts: number;
  preemptions: number;
  /** Hours of VM running time seen (preempted or released): the preemption rate's denominator. */
  exposureHours: number;
  lastStockoutAt?: number;
  lastPreemptionAt?: number;
  /** Observed lifetimes, oldest first: [hours, epoch ms seen]. */
  lifetimes: [number, number][];
}

export interface ZoneMemory {
  version: 1;
  halfLifeHours: number;
  records: ZoneRecord[];
  /** `<kind letter>:<resource>` of outcomes already counted, oldest first (de-duplication). */
  counted: string[];
}

/** What a reader (placement, the auto policy, `sterna zones`, checkpoint intervals) needs. */
export interface ZonePrior extends ZoneKey {
  region?: string;
  /** Decayed counts and exposure as of the read. */
  stockouts: number;
  preemptions: number;
  exposureHours: number;
  /** Preemptions per hour of running spot time; undefined until some running time was seen. */
  preemptionsPerHour?: number;
  /** The (decay-weighted) median of observed lifetimes, preempted or released; undefined without any. */
  medianSpotLifetimeHours?: number;
  lastStockoutAt?: string;
  lastPreemptionAt?: string;
  /** A stockout less than `cooldownSeconds` ago: placement skips the zone. */
  inCooldown: boolean;
  cooldownUntil?: string;
}

/**
 * Six hours: a zone that stocked out this morning is still suspect this afternoon
 * (weight 1/2), yesterday's evidence weighs 1/16, last week's nothing. Spot capacity
 * and preemption rates move over hours, not minutes or weeks.
 */
export const DEFAULT_HALF_LIFE_HOURS = 6;
/** The run spec's default `recovery.zoneCooldown`, used where no run's own applies (the CLI). */
export const DEFAULT_COOLDOWN_SECONDS = 1800;

/** Size bounds, so the memory stays a small payload however long it lives (not model parameters). */
export const MAX_RECORDS = 500;
export const MAX_LIFETIMES = 16;
export const MAX_COUNTED = 1000;
/** A record whose decayed figures are all below this, and not in any cooldown, is forgotten. */
const NEGLIGIBLE = 0.01;
/** ...as long as its last stockout is older than this (the longest cooldown worth honouring). */
const FORGET_STOCKOUT_AFTER_MS = 24 * 3_600_000;

const HOUR_MS = 3_600_000;

export function emptyMemory(halfLifeHours = DEFAULT_HALF_LIFE_HOURS): ZoneMemory {
  return { version: 1, halfLifeHours, records: [], counted: [] };
}

/** The weight evidence from `fromMs` keeps at `toMs`: 1/2 per half-life; 1 if `toMs` is not later. */
export function decayFactor(fromMs: number, toMs: number, halfLifeHours: number): number {
  const ageHours = Math.max(0, toMs - fromMs) / HOUR_MS;
  return Math.pow(0.5, ageHours / halfLifeHours);
}

/** A key's node count: 1 when absent (every record written before gangs were told apart). */
export function nodesOf(k: ZoneKey): number {
  return k.nodes ?? 1;
}

export function keyOf(k: ZoneKey): string {
  return `${k.zone}/${k.accelerator}/${k.model}${nodesOf(k) > 1 ? `/x${nodesOf(k)}` : ''}`;
}

function sameKey(a: ZoneKey, b: ZoneKey): boolean {
  return a.zone === b.zone && a.accelerator === b.accelerator && a.model === b.model && nodesOf(a) === nodesOf(b);
}

/** The record's figures decayed to `toMs` (never moved backwards). */
function decayedTo(r: ZoneRecord, toMs: number, halfLifeHours: number): ZoneRecord {
  if (toMs <= r.asOf) return r;
  const w = decayFactor(r.asOf, toMs, halfLifeHours);
  return { ...r, asOf: toMs, stockouts: r.stockouts * w, preemptions: r.preemptions * w, exposureHours: r.exposureHours * w };
}

const LETTER: Record<OutcomeKind, string> = { stockout: 's', preempted: 'p', released: 'r' };

function newRecord(o: ZoneOutcome, at: number): ZoneRecord {
  return { zone: o.zone, accelerator: o.accelerator, model: o.model, ...(nodesOf(o) > 1 ? { nodes: nodesOf(o) } : {}), ...(o.region ? { region: o.region } : {}), asOf: at, stockouts: 0, preemptions: 0, exposureHours: 0, lifetimes: [] };
}

/**
 * Folds one outcome into the memory. An outcome told twice (same kind and resource) and
 * a lifetime told twice (same resource) count once; an outcome older than the record
 * counts with the weight its age leaves it.
 */
export function record(memory: ZoneMemory, outcome: ZoneOutcome, nowMs: number): ZoneMemory {
  const countKey = outcome.resource ? `${LETTER[outcome.kind]}:${outcome.resource}` : undefined;
  const lifetimeKey = outcome.resource ? `l:${outcome.resource}` : undefined;
  const isCounted = countKey !== undefined && memory.counted.includes(countKey);
  const lifetime = outcome.lifetimeHours !== undefined && Number.isFinite(outcome.lifetimeHours) && outcome.lifetimeHours >= 0 ? outcome.lifetimeHours : undefined;
  const lifetimeCounted = lifetime === undefined || (lifetimeKey !== undefined && memory.counted.includes(lifetimeKey));
  const countsEvent = outcome.kind !== OutcomeKind.Released && !isCounted;
  if (!countsEvent && lifetimeCounted) return memory;

  const at = Math.min(outcome.at, nowMs);
  const index = memory.records.findIndex((r) => sameKey(r, outcome));
  const before = index >= 0 ? memory.records[index] : newRecord(outcome, at);
  const r = decayedTo(before, Math.max(before.asOf, at), memory.halfLifeHours);
  const w = decayFactor(at, r.asOf, memory.halfLifeHours);
  const next: ZoneRecord = { ...r, lifetimes: r.lifetimes, ...(outcome.region && !r.region ? { region: outcome.region } : {}) };
  if (countsEvent && outcome.kind === OutcomeKind.Stockout) {
    next.stockouts += w;
    next.lastStockoutAt = Math.max(next.lastStockoutAt ?? at, at);
  }
  if (countsEvent && outcome.kind === OutcomeKind.Preempted) {
    next.preemptions += w;
    next.lastPreemptionAt = Math.max(next.lastPreemptionAt ?? at, at);
  }
  if (!lifetimeCounted && lifetime !== undefined) {
    next.exposureHours += lifetime * w;
    next.lifetimes = [...r.lifetimes, [lifetime, at] as [number, number]].sort((a, b) => a[1] - b[1]).slice(-MAX_LIFETIMES);
  }
  const records = index >= 0 ? memory.records.map((x, i) => (i === index ? next : x)) : [...memory.records, next];
  const counted = [...memory.counted, ...(countsEvent && countKey ? [countKey] : []), ...(!lifetimeCounted && lifetimeKey ? [lifetimeKey] : [])].slice(-MAX_COUNTED);
  return bound({ ...memory, records, counted });
}

/** Keeps the MAX_RECORDS most recently updated records. */
function bound(memory: ZoneMemory): ZoneMemory {
  if (memory.records.length <= MAX_RECORDS) return memory;
  const records = [...memory.records].sort((a, b) => b.asOf - a.asOf).slice(0, MAX_RECORDS);
  return { ...memory, records };
}

/** Forgets records whose evidence has decayed away and whose last stockout is long past. */
export function prune(memory: ZoneMemory, nowMs: number): ZoneMemory {
  const records = memory.records.filter((r) => {
    const d = decayedTo(r, nowMs, memory.halfLifeHours);
    const faded = d.stockouts < NEGLIGIBLE && d.preemptions < NEGLIGIBLE && d.exposureHours < NEGLIGIBLE;
    const stockoutPast = r.lastStockoutAt === undefined || nowMs - r.lastStockoutAt >= FORGET_STOCKOUT_AFTER_MS;
    return !(faded && stockoutPast);
  });
  return records.length === memory.records.length ? memory : { ...memory, records };
}

/** The median of `values` weighted by `weights` (the lower one at an exact half). */
export function weightedMedian(values: readonly number[], weights: readonly number[]): number | undefined {
  const pairs = values.map((v, i) => [v, weights[i]] as const).filter(([, w]) => w > 0).sort((a, b) => a[0] - b[0]);
  const total = pairs.reduce((s, [, w]) => s + w, 0);
  if (pairs.length === 0 || total <= 0) return undefined;
  let seen = 0;
  for (const [v, w] of pairs) {
    seen += w;
    if (seen >= total / 2 - 1e-12) return v;
  }
  return pairs[pairs.length - 1][0];
}

/** A record as a reader sees it at `nowMs`. */
export function priorOf(r: ZoneRecord, nowMs: number, halfLifeHours: number, cooldownSeconds = DEFAULT_COOLDOWN_SECONDS): ZonePrior {
  const d = decayedTo(r, nowMs, halfLifeHours);
  const cooldownUntilMs = r.lastStockoutAt === undefined ? undefined : r.lastStockoutAt + cooldownSeconds * 1000;
  const inCooldown = cooldownUntilMs !== undefined && nowMs < cooldownUntilMs;
  const median = weightedMedian(
    r.lifetimes.map(([h]) => h),
    r.lifetimes.map(([, at]) => decayFactor(at, nowMs, halfLifeHours)),
  );
  return {
    zone: r.zone,
    accelerator: r.accelerator,
    model: r.model,
    ...(nodesOf(r) > 1 ? { nodes: nodesOf(r) } : {}),
    ...(r.region ? { region: r.region } : {}),
    stockouts: d.stockouts,
    preemptions: d.preemptions,
    exposureHours: d.exposureHours,
    ...(d.exposureHours > 0 ? { preemptionsPerHour: d.preemptions / d.exposureHours } : {}),
    ...(median !== undefined ? { medianSpotLifetimeHours: median } : {}),
    ...(r.lastStockoutAt !== undefined ? { lastStockoutAt: new Date(r.lastStockoutAt).toISOString() } : {}),
    ...(r.lastPreemptionAt !== undefined ? { lastPreemptionAt: new Date(r.lastPreemptionAt).toISOString() } : {}),
    inCooldown,
    ...(inCooldown ? { cooldownUntil: new Date(cooldownUntilMs!).toISOString() } : {}),
  };
}

/**
 * What the memory says about one zone x accelerator x model (x gang size, `nodes`; absent:
 * one VM) at `nowMs`: zero counts and no cooldown when it knows nothing of it. The read API
 * for every other module.
 */
export function zonePrior(memory: ZoneMemory, key: ZoneKey, nowMs: number, cooldownSeconds = DEFAULT_COOLDOWN_SECONDS): ZonePrior {
  const r = memory.records.find((x) => sameKey(x, key));
  return r ? priorOf(r, nowMs, memory.halfLifeHours, cooldownSeconds) : { ...key, stockouts: 0, preemptions: 0, exposureHours: 0, inCooldown: false };
}

/** Every remembered zone x accelerator x model at `nowMs`, sorted by zone, accelerator and model. */
export function zonePriors(memory: ZoneMemory, nowMs: number, cooldownSeconds = DEFAULT_COOLDOWN_SECONDS): ZonePrior[] {
  return [...memory.records]
    .sort((a, b) => keyOf(a).localeCompare(keyOf(b)))
    .map((r) => priorOf(r, nowMs, memory.halfLifeHours, cooldownSeconds));
}

/** The slice of the memory one run needs: its accelerators only (what an activity hands a run). */
export function sliceFor(memory: ZoneMemory, accelerators: readonly string[]): ZoneMemory {
  return { ...memory, records: memory.records.filter((r) => accelerators.includes(r.accelerator)), counted: [] };
}

/** True when `value` has the memory's shape (a continued input, a query answer read back). */
export function isZoneMemory(value: unknown): value is ZoneMemory {
  const m = value as ZoneMemory | undefined;
  return typeof m === 'object' && m !== null && m.version === 1 && typeof m.halfLifeHours === 'number' && Array.isArray(m.records) && Array.isArray(m.counted);
}

/** True when `value` is an outcome the memory can fold in (signals come from outside the workflow). */
export function isZoneOutcome(value: unknown): value is ZoneOutcome {
  const o = value as ZoneOutcome | undefined;
  if (typeof o !== 'object' || o === null) return false;
  const text = (v: unknown) => typeof v === 'string' && v.length > 0;
  return (
    text(o.zone) &&
    text(o.accelerator) &&
    Object.values(ProvisioningModel).includes(o.model) &&
    Object.values(OutcomeKind).includes(o.kind) &&
    Number.isFinite(o.at) &&
    (o.lifetimeHours === undefined || (Number.isFinite(o.lifetimeHours) && o.lifetimeHours >= 0)) &&
    (o.nodes === undefined || (Number.isInteger(o.nodes) && o.nodes >= 1))
  );
}
