/**
 * How a run reaches the zone memory: its activities and the patch that guards the new
 * commands, so runs recorded before the memory existed replay unchanged. Both calls
 * are courtesies: a run that cannot reach the memory places as it did without one.
 */
import { patched, proxyActivities } from '@temporalio/workflow';
import type { ZoneActivities } from './contract';

export const ZONE_MEMORY_PATCH = 'sterna-zone-memory';

export function zoneMemoryActivities() {
  // A worker built without the zone activities (NotFoundError) answers at once: no memory.
  return proxyActivities<ZoneActivities>({ startToCloseTimeout: '30 seconds', retry: { initialInterval: '1 second', maximumAttempts: 3, nonRetryableErrorTypes: ['NotFoundError'] } });
}

/** Whether this run tells and reads the zone memory (false when replaying a run recorded before it did). */
export function usesZoneMemory(): boolean {
  return patched(ZONE_MEMORY_PATCH);
}
