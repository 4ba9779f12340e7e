/**
 * `instances.insert` request validation, with GCE's synchronous 400s: a malformed or
 * inconsistent request is refused before any operation exists. Capacity and quota are
 * not checked here: GCE reports those asynchronously, in the operation.
 *
 * Rules enforced as GCE does (documented behaviour):
 *   - names match [a-z]([-a-z0-9]{0,61}[a-z0-9])?
 *   - the machine type and accelerator types exist in the request's zone
 *   - GPUs attach only to N1; A2/A3/G2 have theirs built in; counts GCE allows
 *   - GPU VMs cannot live-migrate: onHostMaintenance must be TERMINATE (400 otherwise)
 *   - spot / preemptible VMs: automaticRestart false, onHostMaintenance TERMINATE
 *     (both defaulted when omitted), instanceTerminationAction STOP (default) or DELETE
 *   - at most 64 labels, keys and values in GCE's format
 *   - metadata keys [a-zA-Z0-9-_]+ under 128 bytes, values up to 256 KiB, all keys and
 *     values together under 512 KiB (GCE's documented limits)
 *   - flex-start VMs (provisioningModel FLEX_START): accelerator-optimized machine types
 *     only, `maxRunDuration` required (at most 7 days; not `terminationTime`),
 *     onHostMaintenance TERMINATE, no automatic restart; `params.requestValidForDuration`
 *     (90 s to 2 hours, 2 hours when omitted: an assumption) is how long the request waits
 *   - time limits: `maxRunDuration` (30 s to 120 days) or `terminationTime` (RFC 3339,
 *     30 s to 120 days ahead, in emulated time), not both, not on legacy preemptible
 *     VMs; `instanceTerminationAction` STOP (GCE's default) or DELETE
 * Fields not modelled (disks, networks, access configs, service accounts and scopes,
 * Shielded VM) are type-checked and recorded as sent: `instances.get` echoes them, and a
 * VM's metadata server serves its service account and scopes (and tokens for them).
 */
import { z } from 'zod';
import { FLEX_START_MAX_RUN_SECONDS, FLEX_START_MAX_WAIT_SECONDS, FLEX_START_MIN_WAIT_SECONDS, findZone, machineTypesInZone, type Catalog } from '../config/catalog';
import { ProvisioningModel } from '../workflows/api';
import { badRequest, GceError, invalidField, Reason, required } from './errors';
import { NAME_PATTERN } from './ids';
import type { GpuRequest } from './types';

/** GCE: "The total size of all keys and values must be less than 512 KB." */
const MAX_METADATA_BYTES = 512 * 1024;
/** GCE: a value's size "must be less than or equal to 262144 bytes (256 KiB)". */
const MAX_METADATA_VALUE_BYTES = 256 * 1024;
/** GCE: keys match [a-zA-Z0-9-_]+ "and be less than 128 bytes in length". */
const METADATA_KEY = /^[a-zA-Z0-9_-]{1,127}$/;
const MAX_LABELS = 64;
const LABEL_KEY = /^[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]{0,62}$/u;
const LABEL_VALUE = /^[\p{Ll}\p{Lo}\p{N}_-]{0,63}$/u;
/** GCE's bounds on a VM time limit, both as a duration and as a termination time ahead of now. */
const MIN_TIME_LIMIT_SECONDS = 30;
const MAX_TIME_LIMIT_SECONDS = 120 * 86400;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})$/;

const Scheduling = z.looseObject({
  provisioningModel: z.string().optional(),
  preemptible: z.boolean().optional(),
  onHostMaintenance: z.string().optional(),
  automaticRestart: z.boolean().optional(),
  instanceTerminationAction: z.string().optional(),
  maxRunDuration: z.looseObject({ seconds: z.union([z.string(), z.number()]).optional(), nanos: z.number().int().optional() }).optional(),
  terminationTime: z.string().optional(),
});

const InstanceBody = z.looseObject({
  name: z.string().optional(),
  machineType: z.string().optional(),
  description: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  metadata: z
    .looseObject({
      items: z.array(z.looseObject({ key: z.string(), value: z.string().optional() })).optional(),
      fingerprint: z.string().optional(),
    })
    .optional(),
  scheduling: Scheduling.optional(),
  guestAccelerators: z.array(z.looseObject({ acceleratorType: z.string(), acceleratorCount: z.number().int() })).optional(),
  disks: z.array(z.looseObject({ boot: z.boolean().optional(), autoDelete: z.boolean().optional(), deviceName: z.string().optional() })).optional(),
  networkInterfaces: z
    .array(
      z.looseObject({
        network: z.string().optional(),
        subnetwork: z.string().optional(),
        accessConfigs: z.array(z.looseObject({ name: z.string().optional(), type: z.enum(['ONE_TO_ONE_NAT', 'DIRECT_IPV6']).optional() })).max(1).optional(),
      }),
    )
    .optional(),
  // GCE takes full scope URLs (and a few aliases the gcloud CLI expands before sending).
  serviceAccounts: z.array(z.looseObject({ email: z.string().optional(), scopes: z.array(z.string().regex(/^https:\/\/www\.googleapis\.com\/auth\/[a-z0-9._-]+$/, 'Invalid scope')).optional() })).max(1).optional(),
  shieldedInstanceConfig: z.looseObject({ enableSecureBoot: z.boolean().optional(), enableVtpm: z.boolean().optional(), enableIntegrityMonitoring: z.boolean().optional() }).optional(),
  tags: z.looseObject({ items: z.array(z.string()).optional() }).optional(),
  deletionProtection: z.boolean().optional(),
  params: z.looseObject({ requestValidForDuration: z.looseObject({ seconds: z.union([z.string(), z.number()]).optional(), nanos: z.number().int().optional() }).optional() }).optional(),
});

/** `scheduling.maxRunDuration` (emulated seconds of RUNNING) or `scheduling.terminationTime` (epoch ms, wall clock). */
export type TimeLimit = { maxRunDurationSeconds: number } | { terminationTimeMs: number };

/** What validation needs to know about time: now (wall clock) and how fast emulated time runs. */
export interface ValidationClock {
  nowMs: number;
  timeFactor: number;
}

export interface ValidInsert {
  name: string;
  machineType: string;
  gpus?: GpuRequest;
  spot: boolean;
  model: ProvisioningModel;
  /** FLEX_START: emulated seconds the request waits for capacity before the insert fails. */
  flexWaitSeconds?: number;
  terminationAction: 'STOP' | 'DELETE';
  /** A time limit, if the request set one. */
  timeLimit?: TimeLimit;
  labels: Record<string, string>;
  metadata: Record<string, string>;
  /** The body with scheduling defaults filled in, as the instance will echo it. */
  resource: Record<string, unknown>;
}

/** The last path segment of a (partial or full) resource URL, if its zone matches. */
function resourceName(field: string, value: string, collection: string, zone: string): string {
  const parts = value.replace(/^https?:\/\/[^/]+\/compute\/(?:v1|beta|alpha)\//, '').split('/');
  const name = parts[parts.length - 1];
  if (parts.length > 1) {
    const zi = parts.indexOf('zones');
    const ci = parts.indexOf(collection);
    if (ci !== parts.length - 2 || (zi >= 0 && parts[zi + 1] !== zone)) {
      throw invalidField(field, value, `Must be a URL of a ${collection} resource in zone '${zone}'.`);
    }
  }
  if (!NAME_PATTERN.test(name ?? '')) throw invalidField(field, value, 'Malformed resource name.');
  return name;
}

function issuePath(path: PropertyKey[]): string {
  return ['resource', ...path.map((p) => (typeof p === 'number' ? `[${p}]` : String(p)))].join('.').replace(/\.\[/g, '[');
}

function maxRunDurationSeconds(value: { seconds?: string | number; nanos?: number }): number {
  const field = 'resource.scheduling.maxRunDuration';
  const raw = value.seconds ?? 0;
  const seconds = typeof raw === 'number' ? raw : /^-?\d{1,12}$/.test(raw) ? Number(raw) : NaN;
  const nanos = value.nanos ?? 0;
  if (!Number.isInteger(seconds)) throw invalidField(`${field}.seconds`, raw, 'Must be a whole number of seconds.');
  if (nanos < 0 || nanos > 999_999_999) throw invalidField(`${field}.nanos`, nanos, 'Must be from 0 to 999,999,999.');
  const total = seconds + nanos / 1e9;
  if (total < MIN_TIME_LIMIT_SECONDS || total > MAX_TIME_LIMIT_SECONDS) {
    throw invalidField(field, `${total}s`, `The time limit must be between ${MIN_TIME_LIMIT_SECONDS} seconds and 120 days.`);
  }
  return total;
}

/** `params.requestValidForDuration` in seconds: 90 s to 2 hours; 2 hours when omitted. */
function requestValidForSeconds(value: { seconds?: string | number; nanos?: number } | undefined): number {
  if (value === undefined) return FLEX_START_MAX_WAIT_SECONDS;
  const field = 'resource.params.requestValidForDuration';
  const raw = value.seconds ?? 0;
  const seconds = typeof raw === 'number' ? raw : /^\d{1,12}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(seconds) || seconds < FLEX_START_MIN_WAIT_SECONDS || seconds > FLEX_START_MAX_WAIT_SECONDS) {
    throw invalidField(field, String(raw), `Must be between ${FLEX_START_MIN_WAIT_SECONDS} seconds and 2 hours.`);
  }
  return seconds;
}

function terminationTimeMs(value: string, clock: ValidationClock): number {
  const field = 'resource.scheduling.terminationTime';
  const ms = RFC3339.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms)) throw invalidField(field, value, 'Must be a timestamp in RFC 3339 format, e.g. 2025-01-01T00:00:00Z.');
  // The shortest limit ahead of now in emulated seconds, so a fast emulated clock keeps
  // it meaningful; the longest in real seconds, as the timestamp is wall-clock time (a
  // client bounding a VM by GCE's 120 days must not be refused by a fast clock).
  const realAhead = (ms - clock.nowMs) / 1000;
  if (realAhead * clock.timeFactor < MIN_TIME_LIMIT_SECONDS || realAhead > MAX_TIME_LIMIT_SECONDS) {
    throw invalidField(field, value, `The termination time must be between ${MIN_TIME_LIMIT_SECONDS} seconds and 120 days from now.`);
  }
  return ms;
}

/** Metadata items as GCE checks them (keys, sizes, no duplicates), for an insert or a setMetadata; `field` names them in errors. */
export function metadataOf(items: readonly { key: string; value?: string }[], field: string): Record<string, string> {
  const metadata: Record<string, string> = {};
  let metadataBytes = 0;
  for (const [index, item] of items.entries()) {
    if (!METADATA_KEY.test(item.key)) {
      throw invalidField(`${field}.items[${index}].key`, item.key.slice(0, 200), 'Metadata keys must match [a-zA-Z0-9-_]+ and be less than 128 bytes.');
    }
    if (item.key in metadata) throw invalidField(field, item.key, `Duplicate metadata key '${item.key}'.`);
    const value = item.value ?? '';
    const valueBytes = Buffer.byteLength(value);
    if (valueBytes > MAX_METADATA_VALUE_BYTES) {
      throw invalidField(`${field}.items[${index}].value`, `${valueBytes} bytes`, `The value of metadata key '${item.key}' is too large: at most ${MAX_METADATA_VALUE_BYTES} bytes (256 KiB).`);
    }
    metadata[item.key] = value;
    metadataBytes += Buffer.byteLength(item.key) + valueBytes;
  }
  if (metadataBytes >= MAX_METADATA_BYTES) {
    throw invalidField(field, `${metadataBytes} bytes`, `The total size of all metadata keys and values must be less than ${MAX_METADATA_BYTES} bytes (512 KiB).`);
  }
  return metadata;
}

/** A setMetadata body: the full new item list, and the fingerprint of the metadata it replaces. */
const SetMetadataBody = z.looseObject({
  items: z.array(z.looseObject({ key: z.string(), value: z.string().optional() })).optional(),
  fingerprint: z.string().optional(),
});

/** Parses a setMetadata body; GCE requires the fingerprint (a missing one fails the precondition like a stale one). */
export function validateSetMetadata(body: unknown): { metadata: Record<string, string>; fingerprint?: string } {
  const parsed = SetMetadataBody.safeParse(body ?? {});
  if (!parsed.success) throw badRequest(`Invalid metadata: ${parsed.error.issues[0]?.message ?? 'malformed body'}`);
  return { metadata: metadataOf(parsed.data.items ?? [], 'metadata'), fingerprint: parsed.data.fingerprint };
}

export function validateInsert(body: unknown, zone: string, catalog: Catalog, clock: ValidationClock = { nowMs: Date.now(), timeFactor: 1 }): ValidInsert {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new GceError(400, Reason.ParseError, 'Invalid JSON payload received. Expected an object (the instance resource).');
  const parsed = InstanceBody.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new GceError(400, Reason.Invalid, `Invalid value at '${issuePath(issue.path)}': ${issue.message}`);
  }
  const b = parsed.data;
  if (!b.name) throw required('resource.name');
  if (!NAME_PATTERN.test(b.name)) throw invalidField('resource.name', b.name, `Must be a match of regex '${NAME_PATTERN.source}'`);
  if (!b.machineType) throw required('resource.machineType');

  const zoneInfo = findZone(zone, catalog);
  if (!zoneInfo) throw invalidField('zone', zone, 'Unknown zone.');
  const machineTypeName = resourceName('resource.machineType', b.machineType, 'machineTypes', zone);
  const machineType = machineTypesInZone(zone, catalog).find((m) => m.name === machineTypeName);
  if (!machineType) throw invalidField('resource.machineType', b.machineType, `Machine type with name '${machineTypeName}' does not exist in zone '${zone}'.`);

  // GPUs: built into A2/A3/G2, attached to N1 with guestAccelerators.
  const attached = b.guestAccelerators ?? [];
  if (attached.length > 1) throw invalidField('resource.guestAccelerators', attached.length, 'Only one accelerator type per instance is supported.');
  let gpus: GpuRequest | undefined = machineType.builtIn ? { ...machineType.builtIn } : undefined;
  if (attached.length === 1) {
    const [acc] = attached;
    const type = resourceName('resource.guestAccelerators[0].acceleratorType', acc.acceleratorType, 'acceleratorTypes', zone);
    const info = catalog.accelerators[type];
    if (!info || !zoneInfo.accelerators.includes(type)) {
      throw invalidField('resource.guestAccelerators[0].acceleratorType', acc.acceleratorType, `Accelerator type '${type}' does not exist in zone '${zone}'.`);
    }
    if (machineType.builtIn) {
      if (machineType.builtIn.type !== type || machineType.builtIn.count !== acc.acceleratorCount) {
        throw invalidField('resource.guestAccelerators[0]', `${acc.acceleratorCount} x ${type}`, `Machine type ${machineType.name} comes with ${machineType.builtIn.count} x ${machineType.builtIn.type} and accepts no other accelerators.`);
      }
    } else if (acc.acceleratorCount > 0) {
      if (!machineType.acceptsAttachedGpus) throw badRequest(`Machine type ${machineType.name} does not support accelerators.`);
      if (!info.attachableCounts?.includes(acc.acceleratorCount)) {
        throw invalidField('resource.guestAccelerators[0].acceleratorCount', acc.acceleratorCount, `${type} can be attached in counts of ${(info.attachableCounts ?? []).join(', ')}.`);
      }
      gpus = { type, count: acc.acceleratorCount };
    }
  }

  // Scheduling: spot/preemptible rules, then the GPU live-migration rule.
  const s = b.scheduling ?? {};
  const model = s.provisioningModel;
  if (model !== undefined && model !== 'SPOT' && model !== 'STANDARD' && model !== 'FLEX_START') {
    throw invalidField('resource.scheduling.provisioningModel', model, "Must be one of 'SPOT', 'STANDARD', 'FLEX_START'.");
  }
  const flexStart = model === 'FLEX_START';
  if (flexStart) {
    if (!machineType.builtIn) throw invalidField('resource.machineType', b.machineType, 'Flex-start VMs support only accelerator-optimized machine types (A2, A3, A4, G2...).');
    if (s.preemptible === true) throw invalidField('resource.scheduling.preemptible', true, 'A FLEX_START provisioning model cannot be preemptible.');
    if (s.automaticRestart === true) throw invalidField('resource.scheduling.automaticRestart', true, 'Flex-start instances cannot be automatically restarted.');
    if (s.maxRunDuration === undefined) throw required('resource.scheduling.maxRunDuration');
    if (s.terminationTime !== undefined) throw badRequest('Flex-start instances take scheduling.maxRunDuration, not scheduling.terminationTime.');
  } else if (b.params?.requestValidForDuration !== undefined) {
    throw invalidField('resource.params.requestValidForDuration', 'set', 'Only flex-start (FLEX_START) instances wait for capacity.');
  }
  if (model === 'STANDARD' && s.preemptible === true) throw invalidField('resource.scheduling.preemptible', true, 'A STANDARD provisioning model cannot be preemptible.');
  const spot = model === 'SPOT' || s.preemptible === true;
  if (spot && s.automaticRestart === true) throw invalidField('resource.scheduling.automaticRestart', true, 'Preemptible instances cannot be automatically restarted.');
  const onHostMaintenance = s.onHostMaintenance ?? (spot || flexStart ? 'TERMINATE' : 'MIGRATE');
  if (onHostMaintenance !== 'TERMINATE' && onHostMaintenance !== 'MIGRATE') {
    throw invalidField('resource.scheduling.onHostMaintenance', onHostMaintenance, "Must be one of 'MIGRATE', 'TERMINATE'.");
  }
  if (spot && onHostMaintenance !== 'TERMINATE') throw invalidField('resource.scheduling.onHostMaintenance', onHostMaintenance, 'Preemptible instances must have onHostMaintenance set to TERMINATE.');
  if (gpus && onHostMaintenance !== 'TERMINATE') throw badRequest('Instances with guest accelerators do not support live migration.');
  const action = s.instanceTerminationAction ?? 'STOP';
  if (action !== 'STOP' && action !== 'DELETE') throw invalidField('resource.scheduling.instanceTerminationAction', action, "Must be one of 'STOP', 'DELETE'.");

  let timeLimit: TimeLimit | undefined;
  if (s.maxRunDuration !== undefined && s.terminationTime !== undefined) {
    throw badRequest('Only one of scheduling.maxRunDuration and scheduling.terminationTime can be set.');
  }
  if (s.maxRunDuration !== undefined) timeLimit = { maxRunDurationSeconds: maxRunDurationSeconds(s.maxRunDuration) };
  if (s.terminationTime !== undefined) timeLimit = { terminationTimeMs: terminationTimeMs(s.terminationTime, clock) };
  if (flexStart && timeLimit && 'maxRunDurationSeconds' in timeLimit && timeLimit.maxRunDurationSeconds > FLEX_START_MAX_RUN_SECONDS) {
    throw invalidField('resource.scheduling.maxRunDuration', `${timeLimit.maxRunDurationSeconds}s`, 'Flex-start instances run for at most 7 days (604800 seconds).');
  }
  const flexWaitSeconds = flexStart ? requestValidForSeconds(b.params?.requestValidForDuration) : undefined;
  if (timeLimit && s.preemptible === true && model !== 'SPOT') {
    throw badRequest('Time limits (maxRunDuration, terminationTime) are not supported for legacy preemptible VMs; use provisioningModel SPOT.');
  }

  const labels = b.labels ?? {};
  if (Object.keys(labels).length > MAX_LABELS) throw invalidField('resource.labels', Object.keys(labels).length, `At most ${MAX_LABELS} labels are allowed.`);
  for (const [k, v] of Object.entries(labels)) {
    if (!LABEL_KEY.test(k)) throw invalidField('resource.labels', k, `Label key '${k}' violates format constraints. The key must start with a lowercase character, can only contain lowercase letters, numeric characters, underscores and dashes, and be at most 63 characters long.`);
    if (!LABEL_VALUE.test(v)) throw invalidField('resource.labels', v, `Label value '${v}' violates format constraints. The value can only contain lowercase letters, numeric characters, underscores and dashes, and be at most 63 characters long.`);
  }

  const metadata = metadataOf(b.metadata?.items ?? [], 'resource.metadata');

  const provisioningModel: ProvisioningModel = flexStart ? ProvisioningModel.FlexStart : spot ? ProvisioningModel.Spot : ProvisioningModel.OnDemand;
  const scheduling = {
    ...s,
    provisioningModel,
    preemptible: spot,
    onHostMaintenance,
    automaticRestart: s.automaticRestart ?? !(spot || flexStart),
    ...(spot || timeLimit ? { instanceTerminationAction: action } : {}),
  };
  return {
    name: b.name,
    machineType: machineType.name,
    gpus,
    spot,
    model: provisioningModel,
    ...(flexWaitSeconds !== undefined ? { flexWaitSeconds } : {}),
    terminationAction: action,
    timeLimit,
    labels: { ...labels },
    metadata,
    resource: { ...(body as Record<string, unknown>), scheduling },
  };
}
