/** Compute Engine v1 JSON for the emulator's resources (camelCase, GCE's field names and URL forms). */
import { createHash } from 'node:crypto';
import { allZones, findZone, machineTypesInZone, type Catalog, type MachineType } from '../config/catalog';
import { regionQuotas } from './capacity';
import { API_BASE } from './ids';
import type { EmulatorState, InstanceRecord } from './types';

/** Stable ids for catalog resources (GCE ids are uint64 decimal strings). */
function stableId(...parts: string[]): string {
  const n = createHash('sha256').update(parts.join('/')).digest().readBigUInt64BE() % 9_000_000_000_000_000_000n;
  return String(n + 1_000_000_000_000_000_000n);
}

function fingerprint(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('base64').slice(0, 11) + '=';
}

/** When the emulator's catalog resources "were created". */
const CATALOG_CREATED = '2015-01-01T00:00:00.000-08:00';

export function zoneUrl(project: string, zone: string): string {
  return `${API_BASE}projects/${project}/zones/${zone}`;
}

export function regionUrl(project: string, region: string): string {
  return `${API_BASE}projects/${project}/regions/${region}`;
}

export function instanceSelfLink(project: string, zone: string, name: string): string {
  return `${zoneUrl(project, zone)}/instances/${name}`;
}

export function renderZone(project: string, zone: string, catalog: Catalog): Record<string, unknown> {
  const z = findZone(zone, catalog)!;
  return {
    kind: 'compute#zone',
    id: stableId('zone', zone),
    creationTimestamp: CATALOG_CREATED,
    name: zone,
    description: zone,
    status: 'UP',
    region: regionUrl(project, z.region),
    selfLink: zoneUrl(project, zone),
    availableCpuPlatforms: ['Intel Cascade Lake', 'Intel Ice Lake', 'Intel Sapphire Rapids', 'AMD Milan'],
    supportsPzs: false,
  };
}

export function renderRegion(state: EmulatorState, project: string, region: string, catalog: Catalog): Record<string, unknown> {
  const r = catalog.regions[region];
  return {
    kind: 'compute#region',
    id: stableId('region', region),
    creationTimestamp: CATALOG_CREATED,
    name: region,
    description: r.description,
    status: 'UP',
    zones: r.zones.map((z) => zoneUrl(project, z.name)),
    quotas: regionQuotas(state, catalog, project, region),
    selfLink: regionUrl(project, region),
    supportsPzs: false,
  };
}

export function renderMachineType(project: string, zone: string, m: MachineType): Record<string, unknown> {
  return {
    kind: 'compute#machineType',
    id: stableId('machineType', m.name),
    creationTimestamp: CATALOG_CREATED,
    name: m.name,
    description: m.builtIn ? `${m.guestCpus} vCPUs, ${m.memoryMb / 1024} GB RAM, ${m.builtIn.count} ${m.builtIn.type}` : `${m.guestCpus} vCPUs, ${m.memoryMb / 1024} GB RAM`,
    guestCpus: m.guestCpus,
    memoryMb: m.memoryMb,
    imageSpaceGb: 0,
    maximumPersistentDisks: 128,
    maximumPersistentDisksSizeGb: '263168',
    zone,
    selfLink: `${zoneUrl(project, zone)}/machineTypes/${m.name}`,
    isSharedCpu: false,
    ...(m.builtIn ? { accelerators: [{ guestAcceleratorType: m.builtIn.type, guestAcceleratorCount: m.builtIn.count }] } : {}),
  };
}

export function renderMachineTypes(project: string, zone: string, catalog: Catalog): Record<string, unknown>[] {
  return machineTypesInZone(zone, catalog).map((m) => renderMachineType(project, zone, m));
}

export function renderAcceleratorType(project: string, zone: string, name: string, catalog: Catalog): Record<string, unknown> {
  const a = catalog.accelerators[name];
  return {
    kind: 'compute#acceleratorType',
    id: stableId('acceleratorType', name),
    creationTimestamp: CATALOG_CREATED,
    name,
    description: a.description,
    zone: zoneUrl(project, zone),
    selfLink: `${zoneUrl(project, zone)}/acceleratorTypes/${name}`,
    maximumCardsPerInstance: a.maximumCardsPerInstance,
  };
}

export function renderAcceleratorTypes(project: string, zone: string, catalog: Catalog): Record<string, unknown>[] {
  const z = findZone(zone, catalog);
  return (z?.accelerators ?? []).map((a) => renderAcceleratorType(project, zone, a, catalog));
}

export function renderAggregatedAcceleratorTypes(project: string, catalog: Catalog): Record<string, unknown> {
  const items: Record<string, unknown> = {};
  for (const z of allZones(catalog)) {
    const list = renderAcceleratorTypes(project, z.name, catalog);
    items[`zones/${z.name}`] = list.length
      ? { acceleratorTypes: list }
      : { warning: { code: 'NO_RESULTS_ON_PAGE', message: 'There are no results for scope \'zones/' + z.name + "' on this page.", data: [{ key: 'scope', value: `zones/${z.name}` }] } };
  }
  return { kind: 'compute#acceleratorTypeAggregatedList', id: `projects/${project}/aggregated/acceleratorTypes`, items, selfLink: `${API_BASE}projects/${project}/aggregated/acceleratorTypes` };
}

/**
 * A VM's internal address (networkInterfaces[0].networkIP). Guests are processes on this
 * machine, so it is a loopback address of its own (Linux routes all of 127.0.0.0/8 to
 * loopback): VMs reach each other at it, as on a VPC, and two VMs can listen on the
 * same port (a gang's rank 0 on STERNA_MASTER_PORT) without meeting.
 */
export function internalAddress(id: string): string {
  const n = Number(BigInt(id) % BigInt(128 * 254 * 254));
  const rest = n % (254 * 254);
  return `127.${64 + Math.floor(n / (254 * 254))}.${1 + Math.floor(rest / 254)}.${1 + (rest % 254)}`;
}

/** The fingerprint renderInstance shows for these labels: a setLabels must quote it. */
export function labelFingerprint(labels: Record<string, string>): string {
  return fingerprint(labels);
}

/** The fingerprint renderInstance shows for this metadata: a setMetadata must quote it. */
export function metadataFingerprint(metadata: Record<string, string>): string {
  return fingerprint(Object.entries(metadata).map(([key, value]) => ({ key, value })));
}

export function renderInstance(i: InstanceRecord): Record<string, unknown> {
  const zUrl = zoneUrl(i.project, i.zone);
  const r = i.resource;
  const iso = (ms?: number) => (ms === undefined ? undefined : new Date(ms).toISOString());
  const items = Object.entries(i.metadata).map(([key, value]) => ({ key, value }));
  const disks = ((r.disks ?? []) as Record<string, unknown>[]).map((d, index) => {
    const { initializeParams, ...rest } = d as { initializeParams?: { diskSizeGb?: string | number; diskName?: string } };
    return {
      kind: 'compute#attachedDisk',
      type: 'PERSISTENT',
      mode: 'READ_WRITE',
      interface: 'SCSI',
      index,
      boot: index === 0,
      autoDelete: true,
      deviceName: initializeParams?.diskName ?? (index === 0 ? i.name : `${i.name}-${index}`),
      source: `${zUrl}/disks/${initializeParams?.diskName ?? (index === 0 ? i.name : `${i.name}-${index}`)}`,
      diskSizeGb: String(initializeParams?.diskSizeGb ?? 10),
      ...rest,
    };
  });
  const nics = ((r.networkInterfaces ?? []) as Record<string, unknown>[]).map((n, index) => ({
    kind: 'compute#networkInterface',
    name: `nic${index}`,
    network: `${API_BASE}projects/${i.project}/global/networks/default`,
    networkIP: internalAddress(i.id),
    fingerprint: fingerprint([i.id, index]),
    ...n,
  }));
  const accelerators = i.gpus ? [{ acceleratorType: `${zUrl}/acceleratorTypes/${i.gpus.type}`, acceleratorCount: i.gpus.count }] : [];
  return {
    ...r,
    kind: 'compute#instance',
    id: i.id,
    creationTimestamp: iso(i.creationMs),
    name: i.name,
    zone: zUrl,
    machineType: `${zUrl}/machineTypes/${i.machineType}`,
    status: i.status,
    ...(i.preempted ? { statusMessage: 'Instance was preempted.' } : {}),
    selfLink: instanceSelfLink(i.project, i.zone, i.name),
    labels: i.labels,
    labelFingerprint: labelFingerprint(i.labels),
    metadata: { kind: 'compute#metadata', fingerprint: metadataFingerprint(i.metadata), items },
    guestAccelerators: accelerators,
    disks,
    networkInterfaces: nics,
    cpuPlatform: 'Intel Cascade Lake',
    startRestricted: false,
    deletionProtection: r.deletionProtection ?? false,
    fingerprint: fingerprint([i.id, i.status]),
    lastStartTimestamp: iso(i.lastStartMs),
    lastStopTimestamp: iso(i.lastStopMs),
    // GCE sets this read-only field while a VM with a time limit runs.
    ...(i.terminationAtMs !== undefined ? { resourceStatus: { ...(r.resourceStatus as object | undefined), scheduling: { terminationTimestamp: iso(i.terminationAtMs) } } } : {}),
  };
}
