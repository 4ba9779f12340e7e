/**
 * Flex-start (Dynamic Workload Scheduler) capacity, separate from spot: each zone has a
 * flex-start pool of GPUs per accelerator type (catalog default `flexStartGpus`, or set
 * through the admin API), and each request waits a seeded time before the pool can grant
 * it. A request is granted at the first moment after its wait at which the pool has room,
 * and fails when its wait window (`params.requestValidForDuration`) ends first. A granted
 * VM holds its GPUs until it is TERMINATED or deleted, and is never preempted.
 *
 * The wait is `fixed` (every request waits exactly `meanWaitSeconds`, for tests) or
 * `exponential` with that mean, drawn from `seed` and the count of draws so far, so that
 * the sequence is the same run after run and continues across an emulator restart.
 */
import type { Catalog } from '../config/catalog';
import { seededRandom } from '../workflows/api';
import { InstanceStatus, type EmulatorState, type FlexStartSettings, type InstanceRecord } from './types';

export const DEFAULT_FLEX_START: FlexStartSettings = { seed: 1, meanWaitSeconds: 60, distribution: 'fixed', draws: 0 };

export function flexSettings(state: EmulatorState): FlexStartSettings {
  return state.flexStart ?? DEFAULT_FLEX_START;
}

/** Emulated seconds the next request waits before the pool may grant it (one draw). */
export function drawWaitSeconds(state: EmulatorState): number {
  const settings = (state.flexStart ??= { ...DEFAULT_FLEX_START });
  const draw = settings.draws++;
  if (settings.distribution === 'fixed') return settings.meanWaitSeconds;
  const u = seededRandom(settings.seed * 1_000_003 + draw)();
  return -Math.log(1 - u) * settings.meanWaitSeconds;
}

export function flexCapacityLimit(state: EmulatorState, catalog: Catalog, zone: string, accelerator: string): number {
  return state.capacity[zone]?.[accelerator]?.flexStart ?? catalog.defaultCapacity.flexStartGpus ?? 0;
}

/** GPUs of the zone's flex pool held by granted flex-start VMs (a PENDING one holds none). */
export function flexCapacityUsed(state: EmulatorState, zone: string, accelerator: string): number {
  return state.instances
    .filter((i) => i.zone === zone && i.provisioningModel === 'FLEX_START' && i.gpus?.type === accelerator && i.status !== InstanceStatus.Pending && i.status !== InstanceStatus.Terminated)
    .reduce((sum, i) => sum + (i.gpus?.count ?? 0), 0);
}

export function flexHasRoom(state: EmulatorState, catalog: Catalog, i: InstanceRecord): boolean {
  if (!i.gpus) return true;
  return flexCapacityUsed(state, i.zone, i.gpus.type) + i.gpus.count <= flexCapacityLimit(state, catalog, i.zone, i.gpus.type);
}
