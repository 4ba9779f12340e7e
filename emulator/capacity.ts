/**
 * GPU capacity per zone and GPU quota per project, both enforced on insert.
 *
 * Capacity: each zone has a pool of GPUs per accelerator type and provisioning model
 * (catalog default, or set through the admin API). An instance holds its GPUs from
 * insert until it is TERMINATED or deleted, as on GCE (a stopped VM releases them).
 * Quota, counted over the same instances, at two levels as on GCE:
 * - regional metrics (`regions.get`): NVIDIA_L4_GPUS for standard VMs,
 *   PREEMPTIBLE_NVIDIA_L4_GPUS for spot and flex-start ones; a spot VM in a region whose
 *   preemptible limit is 0 counts against the standard metric instead, as GCE's
 *   "preemptible quota" rule says (no preemptible quota: the standard quota applies);
 * - the project-wide GPUS_ALL_REGIONS (`projects.get`): every GPU of the project, in every
 *   region and provisioning model. A new GCP project has 0, so its first GPU VM fails
 *   until the user requests more; the emulator's default is 0 too unless configured.
 */
import { quotaMetric, type Catalog } from '../config/catalog';
import { InstanceStatus, type EmulatorState, type InstanceRecord } from './types';

export const PREEMPTIBLE_PREFIX = 'PREEMPTIBLE_';
/** GCE's project-wide GPU quota: every GPU of the project at once, whatever its region or model. */
export const GPUS_ALL_REGIONS = 'GPUS_ALL_REGIONS';
/** The project-wide quota metrics the emulator models (and enforces). */
export const PROJECT_QUOTA_METRICS: readonly string[] = [GPUS_ALL_REGIONS];

/** The limits of project-wide quotas for projects the admin API has not set. */
export interface ProjectQuotaDefaults {
  gpusAllRegions: number;
}

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
    .filter((i) => i.project === project && i.region === region && i.gpus && holdsGpus(i) && (i.quotaMetric ?? metricOf(i, catalog)) === metric)
    .reduce((sum, i) => sum + (i.gpus?.count ?? 0), 0);
}

/** The preemptible quota metric an instance's GPUs would count against (before the fallback below). */
export function metricOf(i: Pick<InstanceRecord, 'gpus' | 'provisioningModel'>, catalog: Catalog): string | undefined {
  if (!i.gpus) return undefined;
  const base = quotaMetric(i.gpus.type, catalog);
  if (!base) return undefined;
  // Flex-start VMs consume preemptible quota, as spot VMs do.
  return i.provisioningModel === 'SPOT' || i.provisioningModel === 'FLEX_START' ? `${PREEMPTIBLE_PREFIX}${base}` : base;
}

/**
 * The regional metric a new VM's GPUs are charged to: its preemptible metric if the region
 * has preemptible quota for it, else the standard one (GCE: without preemptible quota,
 * spot VMs consume the regular quota).
 */
export function chargedMetric(state: EmulatorState, catalog: Catalog, project: string, region: string, i: Pick<InstanceRecord, 'gpus' | 'provisioningModel'>): string | undefined {
  const metric = metricOf(i, catalog);
  if (!metric?.startsWith(PREEMPTIBLE_PREFIX)) return metric;
  return quotaLimit(state, catalog, project, region, metric) > 0 ? metric : metric.slice(PREEMPTIBLE_PREFIX.length);
}

export function projectQuotaLimit(state: EmulatorState, defaults: ProjectQuotaDefaults, project: string, metric: string): number {
  const override = state.projectQuotas?.[project]?.[metric];
  if (override !== undefined) return override;
  return metric === GPUS_ALL_REGIONS ? defaults.gpusAllRegions : 0;
}

export function projectQuotaUsage(state: EmulatorState, project: string, metric: string): number {
  if (metric !== GPUS_ALL_REGIONS) return 0;
  return state.instances.filter((i) => i.project === project && i.gpus && holdsGpus(i)).reduce((sum, i) => sum + (i.gpus?.count ?? 0), 0);
}

/** The project-wide quotas, with limit and usage, as GCE lists them in `projects.get`. */
export function projectQuotas(state: EmulatorState, defaults: ProjectQuotaDefaults, project: string): { metric: string; limit: number; usage: number }[] {
  return PROJECT_QUOTA_METRICS.map((metric) => ({ metric, limit: projectQuotaLimit(state, defaults, project, metric), usage: projectQuotaUsage(state, project, metric) }));
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
