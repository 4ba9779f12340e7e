/**
 * The zone memory as placement's and the auto policy's prior. Pure.
 *
 * - Placement: an offer whose zone x accelerator x model stocked out for another run
 *   within the run's cooldown goes last (`rankWithMemory`): the run tries every other
 *   acceptable offer first, and the zone only if they all fail.
 * - The auto policy: such zones are seen as out of spot capacity (`rememberedEvents`,
 *   as if the run had seen the stockout itself), and its per-zone statistics start from
 *   the memory's spot exposure and preemptions (`memoryStats`, the policy's warm start) instead of nothing.
 *
 * A gang of N nodes reads only what says something of N nodes (`readsAbout`): a stockout of
 * M <= N nodes (no capacity for M, so none for more), and the running time and preemptions
 * of M >= N (capacity for M held, so it held for fewer; one of M nodes lost ends a gang of M
 * at least as often as one of N ends a gang of N, so the rate read is an upper bound). A
 * single VM's run reads no gang's stockouts, and a gang no single VM's exposure.
 */
import { inCooldown, type PlacementPolicy, type ZoneEvent } from '../placement';
import { emptyStats, emptyZoneStats, type StatsTable, type ZoneStats } from '../policy/zone-stats';
import type { Offer } from '../types';
import { decayFactor, nodesOf, type ZoneMemory, type ZoneRecord } from './memory';
import { ProvisioningModel } from '../types';

const HOUR_MS = 3_600_000;

/** Whether `r` says something of a gang of `nodes`: its stockouts if it asked for no more, its capacity if for no fewer. */
export function readsAbout(r: ZoneRecord, nodes: number, what: 'stockouts' | 'capacity'): boolean {
  return what === 'stockouts' ? nodesOf(r) <= nodes : nodesOf(r) >= nodes;
}

/** The memory's last stockouts, as placement events, that say something of a gang of `nodes` (one: a single VM). */
export function rememberedEvents(memory: ZoneMemory | undefined, nodes = 1): ZoneEvent[] {
  if (!memory) return [];
  return memory.records
    .filter((r) => r.lastStockoutAt !== undefined && (r.model === ProvisioningModel.Spot || r.model === ProvisioningModel.OnDemand) && readsAbout(r, nodes, 'stockouts'))
    .map((r) => ({ zone: r.zone, region: r.region ?? '', provisioningModel: r.model as ZoneEvent['provisioningModel'], kind: 'stockout', at: r.lastStockoutAt!, accelerator: r.accelerator }));
}

/** `ranked` with the offers in a remembered cooldown (of a stockout that says something of the offer's node count) moved last, order otherwise kept. */
export function rankWithMemory(ranked: readonly Offer[], memory: ZoneMemory | undefined, policy: PlacementPolicy): Offer[] {
  if (rememberedEvents(memory, Infinity).length === 0) return [...ranked];
  const cooling = (o: Offer) => inCooldown(o, rememberedEvents(memory, o.nodes ?? 1), policy);
  return [...ranked.filter((o) => !cooling(o)), ...ranked.filter(cooling)];
}

/**
 * The auto policy's warm start: zone statistics seeded with the memory's spot exposure
 * (as hours up) and preemptions, decayed to `nowMs`, summed over the run's accelerators
 * and the gang sizes that say something of `nodes` (readsAbout), in the policy's own shape
 * (the benchmark's warm memory is the same). Nothing else is seeded: availability (`last`)
 * is for the run to see.
 */
export function memoryStats(memory: ZoneMemory | undefined, nowMs: number, runStartMs: number, nodes = 1): StatsTable {
  const stats = emptyStats();
  if (!memory) return stats;
  const nowHours = (nowMs - runStartMs) / HOUR_MS;
  const zones: Record<string, ZoneStats> = {};
  for (const r of memory.records) {
    if (r.model !== ProvisioningModel.Spot || !readsAbout(r, nodes, 'capacity')) continue;
    const w = decayFactor(r.asOf, nowMs, memory.halfLifeHours);
    const z = zones[r.zone] ?? emptyZoneStats(nowHours);
    zones[r.zone] = { ...z, upHours: z.upHours + r.exposureHours * w, preemptions: z.preemptions + r.preemptions * w };
  }
  return { ...stats, zones };
}

/** The part of the memory a run keeps: its round's zones only. */
export function memoryFor(memory: ZoneMemory, offers: readonly Offer[]): ZoneMemory {
  const zones = new Set(offers.map((o) => o.zone));
  return { ...memory, records: memory.records.filter((r) => zones.has(r.zone)), counted: [] };
}
