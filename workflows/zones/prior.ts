/**
 * The zone memory as placement's and the auto policy's prior. Pure.
 *
 * - Placement: an offer whose zone x accelerator x model stocked out for another run
 *   within the run's cooldown goes last (`rankWithMemory`): the run tries every other
 *   acceptable offer first, and the zone only if they all fail.
 * - The auto policy: such zones are seen as out of spot capacity (`rememberedEvents`,
 *   as if the run had seen the stockout itself), and its per-zone statistics start from
 *   the memory's spot exposure and preemptions (`memoryStats`, the policy's warm start) instead of nothing.
 */
import { inCooldown, type PlacementPolicy, type ZoneEvent } from '../placement';
import { emptyStats, emptyZoneStats, type StatsTable, type ZoneStats } from '../policy/zone-stats';
import type { Offer } from '../types';
import { decayFactor, type ZoneMemory } from './memory';
import { ProvisioningModel } from '../types';

const HOUR_MS = 3_600_000;

/** The memory's last stockouts as placement events, one per zone x accelerator x model (SPOT and STANDARD). */
export function rememberedEvents(memory: ZoneMemory | undefined): ZoneEvent[] {
  if (!memory) return [];
  return memory.records
    .filter((r) => r.lastStockoutAt !== undefined && (r.model === ProvisioningModel.Spot || r.model === ProvisioningModel.OnDemand))
    .map((r) => ({ zone: r.zone, region: r.region ?? '', provisioningModel: r.model as ZoneEvent['provisioningModel'], kind: 'stockout', at: r.lastStockoutAt!, accelerator: r.accelerator }));
}

/** `ranked` with the offers in a remembered cooldown moved last, order otherwise kept. */
export function rankWithMemory(ranked: readonly Offer[], memory: ZoneMemory | undefined, policy: PlacementPolicy): Offer[] {
  const remembered = rememberedEvents(memory);
  if (remembered.length === 0) return [...ranked];
  const cooling = (o: Offer) => inCooldown(o, remembered, policy);
  return [...ranked.filter((o) => !cooling(o)), ...ranked.filter(cooling)];
}

/**
 * The auto policy's warm start: zone statistics seeded with the memory's spot exposure
 * (as hours up) and preemptions, decayed to `nowMs`, summed over the run's accelerators,
 * in the policy's own shape (the benchmark's warm memory is the same). Nothing else is
 * seeded: availability (`last`) is for the run to see.
 */
export function memoryStats(memory: ZoneMemory | undefined, nowMs: number, runStartMs: number): StatsTable {
  const stats = emptyStats();
  if (!memory) return stats;
  const nowHours = (nowMs - runStartMs) / HOUR_MS;
  const zones: Record<string, ZoneStats> = {};
  for (const r of memory.records) {
    if (r.model !== ProvisioningModel.Spot) continue;
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
