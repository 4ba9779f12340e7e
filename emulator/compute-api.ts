/**
 * The Compute Engine v1 REST surface the emulator implements (under /compute/v1/):
 *
 *   GET  projects/{p}                                 (projects.get: project-wide quotas, GPUS_ALL_REGIONS)
 *   GET  projects/{p}/zones[/{z}]                     GET projects/{p}/regions[/{r}]
 *   GET  projects/{p}/aggregated/acceleratorTypes      GET projects/{p}/aggregated/instances
 *   GET  projects/{p}/zones/{z}/acceleratorTypes[/{a}] GET projects/{p}/zones/{z}/machineTypes[/{m}]
 *   GET|POST projects/{p}/zones/{z}/instances          GET|DELETE .../instances/{name}
 *   GET  .../instances/{name}/getGuestAttributes        GET .../instances/{name}/serialPort
 *   POST .../instances/{name}/setMetadata               (with the current metadata fingerprint)
 *   POST .../instances/{name}/setLabels                 (with the current label fingerprint)
 *   GET  projects/{p}/zones/{z}/operations[/{op}]       POST .../operations/{op}/wait
 *
 * Any project id works. List methods take `filter`, `maxResults`, `pageToken`;
 * insert/delete take `requestId` (a retried request gets the same operation).
 */
import { allZones, findZone, machineTypesInZone, type Catalog } from '../config/catalog';
import { projectQuotas, type ProjectQuotaDefaults } from './capacity';
import { GceError, invalidField, notFound, Reason } from './errors';
import { compileFilter } from './filter';
import { NAME_PATTERN, PROJECT_NUMBER, PROJECT_PATTERN, API_BASE } from './ids';
import type { Instances } from './instances';
import { renderOperation, type Operations } from './operations';
import {
  renderAcceleratorType,
  renderAcceleratorTypes,
  renderAggregatedAcceleratorTypes,
  renderInstance,
  renderMachineType,
  renderMachineTypes,
  renderRegion,
  renderZone,
} from './render';
import type { EmulatorState, OperationRecord } from './types';

export interface ComputeContext {
  state: EmulatorState;
  catalog: Catalog;
  instances: Instances;
  operations: Operations;
  /** Longest real time an operations.wait call holds before answering with a not-yet-DONE operation. */
  operationWaitMs: number;
  /** Project-wide quota limits of projects the admin API has not set. */
  projectQuotas: ProjectQuotaDefaults;
  persist(): void;
}

export interface ComputeRequest {
  method: string;
  segments: string[];
  query: URLSearchParams;
  body: unknown;
}

const MAX_RESULTS = 500;
const ID_PATTERN = /^[1-9][0-9]{0,19}$/;

function checkName(kind: string, value: string, pattern = NAME_PATTERN): string {
  if (!pattern.test(value)) {
    throw new GceError(400, Reason.Invalid, `Invalid value for ${kind} '${value}'. Values must match the following regular expression: '${pattern.source.replace(/^\^|\$$/g, '')}'`);
  }
  return value;
}

function checkZone(ctx: ComputeContext, project: string, zone: string): string {
  checkName('zone', zone);
  if (!findZone(zone, ctx.catalog)) throw notFound(`projects/${project}/zones/${zone}`);
  return zone;
}

/** `maxResults` (GCE: 500 at most, and by default) and where `pageToken` says the page starts. */
function pageParams(query: URLSearchParams): { size: number; offset: number } {
  const maxRaw = query.get('maxResults');
  const max = maxRaw === null || maxRaw === '' ? MAX_RESULTS : Number(maxRaw);
  if (!Number.isInteger(max) || max < 0 || max > MAX_RESULTS) throw invalidField('maxResults', maxRaw, `Must be an integer between 0 and ${MAX_RESULTS}.`);
  const token = query.get('pageToken');
  let offset = 0;
  if (token) {
    offset = Number(Buffer.from(token, 'base64url').toString('utf8'));
    if (!Number.isInteger(offset) || offset < 0) throw invalidField('pageToken', token, 'Invalid page token.');
  }
  return { size: max === 0 ? MAX_RESULTS : max, offset };
}

function pageToken(offset: number): string {
  return Buffer.from(String(offset)).toString('base64url');
}

function page<T>(items: T[], query: URLSearchParams): { items: T[]; nextPageToken?: string } {
  const { size, offset } = pageParams(query);
  const slice = items.slice(offset, offset + size);
  return offset + size < items.length ? { items: slice, nextPageToken: pageToken(offset + size) } : { items: slice };
}

/**
 * `aggregated/instances`, paged as GCE pages it (at most `maxResults`, 500, instances a
 * page, the filter applied first), so listing a large fleet takes several calls. The
 * token is a position in the zone-ordered fleet: each page renders only what it returns.
 */
function aggregatedInstances(ctx: ComputeContext, project: string, query: URLSearchParams): Record<string, unknown> {
  const matches = compileFilter(query.get('filter'));
  const { size, offset } = pageParams(query);
  const byZone = ctx.instances.byZone(project);
  const ordered = allZones(ctx.catalog).flatMap((z) => byZone.get(z.name) ?? []);
  const items: Record<string, { instances: unknown[] }> = {};
  let taken = 0;
  let position = offset;
  for (; position < ordered.length && taken < size; position++) {
    const rendered = renderInstance(ordered[position]);
    if (!matches(rendered)) continue;
    (items[`zones/${ordered[position].zone}`] ??= { instances: [] }).instances.push(rendered);
    taken++;
  }
  const id = `projects/${project}/aggregated/instances`;
  return { kind: 'compute#instanceAggregatedList', id, items, ...(position < ordered.length ? { nextPageToken: pageToken(position) } : {}), selfLink: `${API_BASE}${id}` };
}

function listOf(kind: string, id: string, items: unknown[], query: URLSearchParams): Record<string, unknown> {
  const filtered = items.filter(compileFilter(query.get('filter')));
  return { kind, id, ...page(filtered, query), selfLink: `${API_BASE}${id}` };
}

function methodNotAllowed(method: string, path: string): GceError {
  return new GceError(405, Reason.MethodNotAllowed, `Method ${method} is not allowed on ${path}`);
}

function requestIdOf(query: URLSearchParams): string | undefined {
  const id = query.get('requestId');
  if (id === null || id === '') return undefined;
  if (!/^[0-9a-fA-F-]{1,64}$/.test(id)) throw invalidField('requestId', id, 'Must be a UUID.');
  return id;
}

/** A retried insert/delete with the same requestId gets the operation of the first one. */
const requestOperations = new WeakMap<EmulatorState, Map<string, string>>();

function idempotent(ctx: ComputeContext, requestId: string | undefined, create: () => OperationRecord): OperationRecord {
  if (!requestId) return create();
  let seen = requestOperations.get(ctx.state);
  if (!seen) requestOperations.set(ctx.state, (seen = new Map()));
  const earlier = seen.get(requestId);
  const op = earlier ? ctx.operations.byName(earlier) : undefined;
  if (op) return op;
  const created = create();
  seen.set(requestId, created.name);
  return created;
}

export async function handleCompute(ctx: ComputeContext, req: ComputeRequest): Promise<{ status: number; body: unknown }> {
  const { method, segments: s, query } = req;
  const path = s.join('/');
  const ok = (body: unknown) => ({ status: 200, body });
  if (s[0] !== 'projects' || s.length < 2) throw notFound(path);
  const project = checkName('project', s[1], PROJECT_PATTERN);
  const rest = s.slice(2);
  const get = () => {
    if (method !== 'GET') throw methodNotAllowed(method, path);
  };

  if (rest.length === 0) {
    get();
    return ok({
      kind: 'compute#project',
      id: PROJECT_NUMBER,
      creationTimestamp: new Date(ctx.state.createdMs).toISOString(),
      name: project,
      quotas: projectQuotas(ctx.state, ctx.projectQuotas, project),
      selfLink: `${API_BASE}projects/${project}`,
      defaultServiceAccount: `${PROJECT_NUMBER}-compute@developer.gserviceaccount.com`,
      xpnProjectStatus: 'UNSPECIFIED_XPN_PROJECT_STATUS',
      defaultNetworkTier: 'PREMIUM',
    });
  }

  if (rest[0] === 'aggregated' && rest.length === 2) {
    get();
    if (rest[1] === 'acceleratorTypes') return ok(renderAggregatedAcceleratorTypes(project, ctx.catalog));
    if (rest[1] === 'instances') return ok(aggregatedInstances(ctx, project, query));
    throw notFound(path);
  }

  if (rest[0] === 'regions') {
    get();
    if (rest.length === 1) {
      const regions = Object.keys(ctx.catalog.regions).map((r) => renderRegion(ctx.state, project, r, ctx.catalog));
      return ok(listOf('compute#regionList', `projects/${project}/regions`, regions, query));
    }
    const region = checkName('region', rest[1]);
    if (!ctx.catalog.regions[region]) throw notFound(`projects/${project}/regions/${region}`);
    if (rest.length === 2) return ok(renderRegion(ctx.state, project, region, ctx.catalog));
    throw notFound(path);
  }

  if (rest[0] !== 'zones') throw notFound(path);
  if (rest.length === 1) {
    get();
    const zones = allZones(ctx.catalog).map((z) => renderZone(project, z.name, ctx.catalog));
    return ok(listOf('compute#zoneList', `projects/${project}/zones`, zones, query));
  }
  const zone = checkZone(ctx, project, rest[1]);
  const zonePath = `projects/${project}/zones/${zone}`;
  if (rest.length === 2) {
    get();
    return ok(renderZone(project, zone, ctx.catalog));
  }
  const collection = rest[2];
  const name = rest[3];
  const sub = rest[4];
  if (rest.length > 5) throw notFound(path);

  switch (collection) {
    case 'machineTypes': {
      get();
      if (sub !== undefined) throw notFound(path);
      if (name === undefined) return ok(listOf('compute#machineTypeList', `${zonePath}/machineTypes`, renderMachineTypes(project, zone, ctx.catalog), query));
      const m = machineTypesInZone(zone, ctx.catalog).find((x) => x.name === checkName('machineType', name));
      if (!m) throw notFound(`${zonePath}/machineTypes/${name}`);
      return ok(renderMachineType(project, zone, m));
    }
    case 'acceleratorTypes': {
      get();
      if (sub !== undefined) throw notFound(path);
      if (name === undefined) return ok(listOf('compute#acceleratorTypeList', `${zonePath}/acceleratorTypes`, renderAcceleratorTypes(project, zone, ctx.catalog), query));
      if (!findZone(zone, ctx.catalog)?.accelerators.includes(checkName('acceleratorType', name))) throw notFound(`${zonePath}/acceleratorTypes/${name}`);
      return ok(renderAcceleratorType(project, zone, name, ctx.catalog));
    }
    case 'instances':
      return handleInstances(ctx, req, project, zone, name, sub);
    case 'operations':
      return handleOperations(ctx, req, project, zone, name, sub);
    default:
      throw notFound(path);
  }
}

async function handleInstances(ctx: ComputeContext, req: ComputeRequest, project: string, zone: string, name: string | undefined, sub: string | undefined): Promise<{ status: number; body: unknown }> {
  const { method, query } = req;
  const zonePath = `projects/${project}/zones/${zone}`;
  if (name === undefined) {
    if (method === 'GET') {
      const list = ctx.instances.list(project, zone).map(renderInstance);
      return { status: 200, body: listOf('compute#instanceList', `${zonePath}/instances`, list, query) };
    }
    if (method === 'POST') {
      const op = idempotent(ctx, requestIdOf(query), () => ctx.instances.insert(project, zone, req.body));
      return { status: 200, body: renderOperation(op) };
    }
    throw methodNotAllowed(method, `${zonePath}/instances`);
  }
  checkName('instance', name, /^(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})$/);
  const byName = ID_PATTERN.test(name) ? ctx.instances.list(project, zone).find((i) => i.id === name)?.name ?? name : name;
  const instancePath = `${zonePath}/instances/${byName}`;
  if (sub === undefined) {
    if (method === 'GET') return { status: 200, body: renderInstance(ctx.instances.get(project, zone, byName)) };
    if (method === 'DELETE') {
      const op = idempotent(ctx, requestIdOf(query), () => ctx.instances.delete(project, zone, byName));
      return { status: 200, body: renderOperation(op) };
    }
    throw methodNotAllowed(method, instancePath);
  }
  if (sub === 'setMetadata') {
    if (method !== 'POST') throw methodNotAllowed(method, `${instancePath}/${sub}`);
    const op = idempotent(ctx, requestIdOf(query), () => ctx.instances.setMetadata(project, zone, byName, req.body));
    return { status: 200, body: renderOperation(op) };
  }
  if (sub === 'setLabels') {
    if (method !== 'POST') throw methodNotAllowed(method, `${instancePath}/${sub}`);
    const op = idempotent(ctx, requestIdOf(query), () => ctx.instances.setLabels(project, zone, byName, req.body));
    return { status: 200, body: renderOperation(op) };
  }
  if (method !== 'GET') throw methodNotAllowed(method, `${instancePath}/${sub}`);
  const instance = ctx.instances.get(project, zone, byName);
  if (sub === 'getGuestAttributes') {
    const queryPath = query.get('queryPath') ?? undefined;
    const variableKey = query.get('variableKey') ?? undefined;
    for (const [field, value] of [['queryPath', queryPath], ['variableKey', variableKey]] as const) {
      if (value !== undefined && !/^[A-Za-z0-9_/-]{0,300}$/.test(value)) throw invalidField(field, value, 'Malformed guest attribute path.');
    }
    return { status: 200, body: ctx.instances.guestAttributes(instance, queryPath, variableKey) };
  }
  if (sub === 'serialPort') {
    const port = query.get('port') ?? '1';
    if (port !== '1') throw invalidField('port', port, 'Only serial port 1 is emulated.');
    const start = Number(query.get('start') ?? '0');
    if (!Number.isInteger(start) || start < 0) throw invalidField('start', query.get('start'), 'Must be a non-negative integer.');
    return { status: 200, body: ctx.instances.serialPort(instance, start) };
  }
  throw notFound(`${instancePath}/${sub}`);
}

async function handleOperations(ctx: ComputeContext, req: ComputeRequest, project: string, zone: string, name: string | undefined, sub: string | undefined): Promise<{ status: number; body: unknown }> {
  const { method, query } = req;
  const zonePath = `projects/${project}/zones/${zone}`;
  if (name === undefined) {
    if (method !== 'GET') throw methodNotAllowed(method, `${zonePath}/operations`);
    const ops = ctx.operations.list(project, zone, query.get('filter') ?? undefined).map(renderOperation);
    return { status: 200, body: { kind: 'compute#operationList', id: `${zonePath}/operations`, ...page(ops, query), selfLink: `${API_BASE}${zonePath}/operations` } };
  }
  checkName('operation', name, /^(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})$/);
  const op = ctx.operations.find(project, zone, name) ?? ctx.operations.list(project, zone).find((o) => o.id === name);
  if (!op) throw notFound(`${zonePath}/operations/${name}`);
  if (sub === undefined) {
    if (method === 'GET') return { status: 200, body: renderOperation(op) };
    if (method === 'DELETE') {
      ctx.state.operations = ctx.state.operations.filter((o) => o !== op);
      ctx.persist();
      // GCE answers an empty DeleteZoneOperationResponse.
      return { status: 200, body: {} };
    }
    throw methodNotAllowed(method, `${zonePath}/operations/${name}`);
  }
  if (sub === 'wait') {
    if (method !== 'POST') throw methodNotAllowed(method, `${zonePath}/operations/${name}/wait`);
    const done = await ctx.operations.wait(op, ctx.operationWaitMs);
    return { status: 200, body: renderOperation(done) };
  }
  throw notFound(`${zonePath}/operations/${name}/${sub}`);
}
