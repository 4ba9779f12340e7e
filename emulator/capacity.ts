/**
 * GPU capacity per zone and GPU quota per project and region, both enforced on insert.
 *
 * Capacity: each zone has a pool of GPUs per accelerator type and provisioning model
 * (catalog default, or set through the admin API). An instance holds its GPUs from
 * insert until it is TERMINATED or deleted, as on GCE (a stopped VM releases them).
 * Quota: GCE's regional metrics (NVIDIA_L4_GPUS; PREEMPTIBLE_NVIDIA_L4_GPUS for spot),
 * counted over the same instances.
 */
import { quotaMetric, type Catalog } from '../config/catalog';
import { InstanceStatus, type EmulatorState, type InstanceRecord } from './types';

export const PREEMPTIBLE_PREFIX = 'PREEMPTIBLE_';

/** A flex-start VM waiting for capacity (PENDING) holds no GPUs yet. */
export function holdsGpus(i: InstanceRecord): boolean {
  return i.status !== InstanceStatus.Terminated && i.status !== InstanceStatus.Pending;
}

export function capacityLimit(state: EmulatorState, catalog: Catalog, zone: string, accelerator: string, spot: boolean): number {
  const override = state.capacity[zone]?.[accelerator];
  const value = spot ? override?.spot : override?.onDemand;
  if (value !== undefined) return value;
  return spot ? catalog.defaultCapacity.spotGpus : catalog.defaultCapacity.onDemandGpus;
}

export function capacityUsed(state: EmulatorState, zone: string, accelerator: string, spot: boolean, except?: InstanceRecord): number {
  return state.instances
    .filter((i) => i !== except && i.zone === zone && i.gpus?.type === accelerator && i.provisioningModel === (spot ? 'SPOT' : 'STANDARD') && holdsGpus(i))
    .reduce((sum, i) => sum + (i.gpus?.count ?? 0), 0);
}

export function quotaLimit(state: EmulatorState, catalog: Catalog, project: string, region: string, metric: string): number {
  const override = state.quotas[project]?.[region]?.[metric];
  if (override !== undefined) return override;
  return metric.startsWith(PREEMPTIBLE_PREFIX) ? catalog.defaultQuota.preemptibleGpus : catalog.defaultQuota.onDemandGpus;
}

export function quotaUsage(state: EmulatorState, catalog: Catalog, project: string, region: string, metric: string): number {
  return state.instances
    .filter((i) => i.project === project && i.region === region && i.gpus && holdsGpus(i) && metricOf(i, catalog) === metric)
    .reduce((sum, i) => sum + (i.gpus?.count ?? 0), 0);
}

/** The quota metric an instance's GPUs count against. */
export function metricOf(i: Pick<InstanceRecord, 'gpus' | 'provisioningModel'>, catalog: Catalog): string | undefined {
  if (!i.gpus) return undefined;
  const base = quotaMetric(i.gpus.type, catalog);
  if (!base) return undefined;
  // Flex-start VMs consume preemptible quota, as spot VMs do.
  return i.provisioningModel === 'SPOT' || i.provisioningModel === 'FLEX_START' ? `${PREEMPTIBLE_PREFIX}${base}` : base;
}

/** Every GPU quota metric of a region, with limit and usage, as GCE lists them in `regions.get`. */
export function regionQuotas(state: EmulatorState, catalog: Catalog, project: string, region: string): { metric: string; limit: number; usage: number }[] {
  const quotas: { metric: string; limit: number; usage: number }[] = [];
  for (const acc of Object.values(catalog.accelerators)) {
    for (const metric of [acc.quotaMetric, `${PREEMPTIBLE_PREFIX}${acc.quotaMetric}`]) {
      quotas.push({ metric, limit: quotaLimit(state, catalog, project, region, metric), usage: quotaUsage(state, catalog, project, region, metric) });
    }
  }
  return quotas;
}
