/**
 * The emulator's Cloud Storage metadata: the GCS JSON API calls Sterna makes about buckets,
 *
 *   GET /storage/v1/b/{bucket}     -> a storage#bucket resource (GCS's shape), or GCS's
 *                                     404 / 403 error ({"error": {code, message, errors}})
 *   GET /storage/v1/b/{bucket}/iam/testPermissions?permissions=storage.objects.get&...
 *                                  -> storage#testIamPermissionsResponse: which of the asked
 *                                     permissions the caller holds (none on a `forbidden`
 *                                     bucket, only reads on a `readOnly` one); 404 when
 *                                     there is no such bucket
 *
 * The local buckets are the directories of `bucketsDir` (gs://b/p = <bucketsDir>/b/p),
 * plus any the admin API declares. Each is in DEFAULT_BUCKET_LOCATION (GCS's own default
 * for a bucket created without one) unless the admin API or the `buckets` option gives
 * it another location; a bucket may also be declared unreadable (`forbidden`), as one
 * the worker's service account has no storage.buckets.get on. `fields` is accepted and
 * the whole resource returned (a superset, as a partial response would be).
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { GceError, Reason } from './errors';
import { PROJECT_NUMBER } from './ids';
import type { BucketSettings, EmulatorState } from './types';

export type { BucketSettings };

export const STORAGE_PREFIX = '/storage/v1';
/** Where GCS puts a bucket created without a location: the US multi-region. */
export const DEFAULT_BUCKET_LOCATION = 'US';
const BUCKET_NAME = /^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$/;
const MULTI_REGIONS = new Set(['US', 'EU', 'ASIA']);
const DUAL_REGIONS = new Set(['NAM4', 'EUR4', 'EUR5', 'EUR7', 'EUR8', 'ASIA1']);

export const BucketSettingsSchema = z.strictObject({
  location: z
    .string()
    .regex(/^[A-Za-z]+(-[A-Za-z]+[0-9]+)?[0-9]*$/, 'a GCS location such as ASIA-SOUTHEAST1, US-CENTRAL1, NAM4 or US')
    .transform((l) => l.toUpperCase())
    .optional(),
  forbidden: z.boolean().optional(),
  readOnly: z.boolean().optional(),
});

/** What a caller of a `readOnly` bucket holds: reading, not writing. */
const READ_PERMISSIONS = new Set(['storage.buckets.get', 'storage.objects.get', 'storage.objects.list']);
const PERMISSION = /^storage\.[a-zA-Z]+\.[a-zA-Z]+$/;

export interface StorageContext {
  state: EmulatorState;
  bucketsDir?: string;
  /** http://host:port, for selfLink. */
  endpoint(): string;
}

export function validBucketName(name: string): boolean {
  return BUCKET_NAME.test(name) && !name.includes('..');
}

function localBucketExists(ctx: StorageContext, name: string): boolean {
  if (!ctx.bucketsDir) return false;
  const dir = join(ctx.bucketsDir, name);
  return existsSync(dir) && statSync(dir).isDirectory();
}

function locationType(location: string): string {
  if (MULTI_REGIONS.has(location)) return 'multi-region';
  if (DUAL_REGIONS.has(location)) return 'dual-region';
  return 'region';
}

/** A bucket's settings, or undefined when no such bucket exists. */
export function bucketSettings(ctx: StorageContext, name: string): BucketSettings | undefined {
  const declared = ctx.state.buckets?.[name];
  if (declared) return declared;
  return localBucketExists(ctx, name) ? {} : undefined;
}

export function handleStorage(ctx: StorageContext, method: string, segments: string[], query: URLSearchParams = new URLSearchParams()): { status: number; body: unknown } {
  // segments: ['storage', 'v1', 'b', <bucket>, ...]
  const [, , collection, name, ...rest] = segments;
  const testPermissions = rest.length === 2 && rest[0] === 'iam' && rest[1] === 'testPermissions';
  if (collection !== 'b' || name === undefined || (rest.length > 0 && !testPermissions)) {
    throw new GceError(404, Reason.NotFound, `The emulator serves only GET ${STORAGE_PREFIX}/b/<bucket> and GET ${STORAGE_PREFIX}/b/<bucket>/iam/testPermissions of the storage API`);
  }
  if (method !== 'GET') throw new GceError(405, Reason.MethodNotAllowed, `Method ${method} is not allowed on ${STORAGE_PREFIX}/b/${name}`);
  if (!validBucketName(name)) throw new GceError(400, Reason.Invalid, `Invalid bucket name: '${name.slice(0, 230)}'`);
  const settings = bucketSettings(ctx, name);
  if (!settings) throw new GceError(404, Reason.NotFound, 'The specified bucket does not exist.');
  if (testPermissions) return permissionsHeld(settings, query.getAll('permissions'));
  if (settings.forbidden) {
    throw new GceError(403, Reason.Forbidden, `sterna-worker@sterna-emulator.iam.gserviceaccount.com does not have storage.buckets.get access to the Google Cloud Storage bucket. Permission 'storage.buckets.get' denied on resource (or it may not exist).`);
  }
  const location = settings.location ?? DEFAULT_BUCKET_LOCATION;
  const created = new Date(ctx.state.createdMs).toISOString();
  return {
    status: 200,
    body: {
      kind: 'storage#bucket',
      selfLink: `${ctx.endpoint()}${STORAGE_PREFIX}/b/${name}`,
      id: name,
      name,
      projectNumber: PROJECT_NUMBER,
      metageneration: '1',
      location,
      locationType: locationType(location),
      storageClass: 'STANDARD',
      etag: 'CAE=',
      timeCreated: created,
      updated: created,
      iamConfiguration: { uniformBucketLevelAccess: { enabled: true }, publicAccessPrevention: 'enforced' },
    },
  };
}

/** testIamPermissions: the asked permissions the caller holds on a bucket that exists. */
function permissionsHeld(settings: BucketSettings, asked: string[]): { status: number; body: unknown } {
  if (asked.length === 0) throw new GceError(400, Reason.Required, 'Required parameter: permissions');
  const bad = asked.find((p) => !PERMISSION.test(p));
  if (bad !== undefined) throw new GceError(400, Reason.Invalid, `Permission '${bad.slice(0, 100)}' is not a valid Cloud Storage permission.`);
  const held = settings.forbidden ? [] : asked.filter((p) => !settings.readOnly || READ_PERMISSIONS.has(p));
  // As a proto3 JSON answer, an empty list is left out.
  return { status: 200, body: { kind: 'storage#testIamPermissionsResponse', ...(held.length > 0 ? { permissions: [...new Set(held)] } : {}) } };
}
