/**
 * Names each call to the emulated Compute API the way GCE's quota system and audit logs
 * do (`compute.instances.get`, `compute.zoneOperations.wait`, ...) and says where it
 * counts: per project, and per region for zonal methods, `global` otherwise. Rate
 * quotas (rate-quotas.ts) and request counting (api-usage.ts) both work from this.
 */
import { regionOfZone, type Catalog } from '../config/catalog';

export interface ApiCall {
  /** GCE's method name, e.g. `compute.instances.get`. */
  method: string;
  project: string;
  /** The region of a zonal method's zone; `global` for project-level methods. */
  location: string;
}

/** Requests the emulator cannot name (unknown paths, wrong HTTP methods) are counted under this method. */
export const UNKNOWN_METHOD = 'unknown';

function methodName(httpMethod: string, segments: string[]): { method: string; zone?: string } | undefined {
  const [, , ...rest] = segments;
  const read = httpMethod === 'GET';
  if (rest.length === 0) return read ? { method: 'compute.projects.get' } : undefined;
  if (rest[0] === 'aggregated' && rest.length === 2 && read) {
    if (rest[1] === 'instances') return { method: 'compute.instances.aggregatedList' };
    if (rest[1] === 'acceleratorTypes') return { method: 'compute.acceleratorTypes.aggregatedList' };
    return undefined;
  }
  if ((rest[0] === 'regions' || rest[0] === 'zones') && rest.length <= 2 && read) {
    return { method: `compute.${rest[0]}.${rest.length === 1 ? 'list' : 'get'}` };
  }
  if (rest[0] !== 'zones') return undefined;
  const zone = rest[1];
  const [collection, name, sub] = rest.slice(2);
  if (rest.length > 5) return undefined;
  const zonal = (method: string) => ({ method, zone });
  switch (collection) {
    case 'machineTypes':
    case 'acceleratorTypes':
      if (!read || sub !== undefined) return undefined;
      return zonal(`compute.${collection}.${name === undefined ? 'list' : 'get'}`);
    case 'instances':
      if (name === undefined) return httpMethod === 'POST' ? zonal('compute.instances.insert') : read ? zonal('compute.instances.list') : undefined;
      if (sub === undefined) return read ? zonal('compute.instances.get') : httpMethod === 'DELETE' ? zonal('compute.instances.delete') : undefined;
      if (sub === 'getGuestAttributes' && read) return zonal('compute.instances.getGuestAttributes');
      if (sub === 'setMetadata' && httpMethod === 'POST') return zonal('compute.instances.setMetadata');
      if (sub === 'setLabels' && httpMethod === 'POST') return zonal('compute.instances.setLabels');
      if (sub === 'serialPort' && read) return zonal('compute.instances.getSerialPortOutput');
      return undefined;
    case 'operations':
      if (name === undefined) return read ? zonal('compute.zoneOperations.list') : undefined;
      if (sub === undefined) return read ? zonal('compute.zoneOperations.get') : httpMethod === 'DELETE' ? zonal('compute.zoneOperations.delete') : undefined;
      if (sub === 'wait' && httpMethod === 'POST') return zonal('compute.zoneOperations.wait');
      return undefined;
    default:
      return undefined;
  }
}

/**
 * The call a request path names, from its segments under /compute/v1/ (`projects`,
 * `{project}`, ...); undefined for paths the API does not serve.
 */
export function classifyCall(httpMethod: string, segments: string[], catalog: Catalog): ApiCall | undefined {
  if (segments[0] !== 'projects' || segments.length < 2) return undefined;
  const named = methodName(httpMethod.toUpperCase(), segments);
  if (!named) return undefined;
  return { method: named.method, project: segments[1], location: named.zone ? regionOfZone(named.zone, catalog) : 'global' };
}
