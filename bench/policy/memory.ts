/**
 * Warm memory: the zone statistics a run could start from, built only from trace ticks
 * before the window's start, in the shape the policy keeps (workflows/policy/zone-stats.ts),
 * as if every zone had been watched (by the project's earlier runs and its fleet observer).
 */
import { type StatsTable, emptyStats, observe } from '../../workflows/policy';
import type { Trace } from '../common/trace';

export function zoneMemory(trace: Trace, startTick: number, hours: number): StatsTable {
  const h = trace.gapSeconds / 3600;
  const from = Math.max(0, startTick - Math.floor(hours / h + 1e-9));
  let table = emptyStats();
  for (let t = from; t < startTick; t++) {
    // Times are hours relative to the window's start, so the memory ends just before 0.
    const zones = trace.zones.map((z) => ({ zone: z.zone, spotAvailable: z.available[t] === 1, spotPrice: z.spotPrice[t], onDemandPrice: z.onDemandPrice }));
    table = observe(table, { nowHours: (t - startTick) * h, remainingWorkHours: 0, hoursUntilDeadline: 0, changeoverHours: 0, stepHours: h, current: { kind: 'idle' }, changeoverRemainingHours: 0, zones });
  }
  return table;
}
