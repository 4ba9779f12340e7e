/**
 * The emulator's Cloud Storage objects, read-only, from its local buckets (gs://b/p =
 * <bucketsDir>/b/p): what a reader of a run's log asks of GCS (logs/store.ts).
 *
 *   GET /storage/v1/b/{bucket}/o?prefix=&delimiter=/&startOffset=&pageToken=&maxResults=
 *       -> {kind: storage#objects, prefixes?, items?: [{name, size, ...}], nextPageToken?}
 *   GET /storage/v1/b/{bucket}/o/{object, URL-encoded}?alt=media  [Range: bytes=N-]
 *       -> the bytes (206 with a Range), 416 for a range past the end, 404 for no object
 *
 *   GET /storage/v1/b/{bucket}/o/{object, URL-encoded}
 *       -> the object's metadata (storage#object: name, bucket, size, ...), 404 for no object
 *   POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name={object}[&ifGenerationMatch=0]
 *       -> the body becomes the object, written whole then renamed (a packed workdir,
 *          client/workdir/upload.ts); 412 when ifGenerationMatch=0 and it exists, 403 on
 *          a bucket declared `readOnly` or `forbidden`
 *
 * As GCS: names in lexicographic order, a delimiter folds deeper names into `prefixes`,
 * startOffset is inclusive, a page token continues after the last name of a page. A
 * file being written as `<name>.part` (the agent's atomic upload) is an object too,
 * as a GCS upload in progress is not: the agent's readers skip it by name.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { GceError, Reason } from './errors';
import { bucketSettings, STORAGE_PREFIX, validBucketName, type StorageContext } from './storage-api';

const OBJECTS_PATH = new RegExp(`^${STORAGE_PREFIX}/b/([^/]+)/o(?:/([^/]+))?/?$`);
const UPLOAD_PATH = new RegExp(`^/upload${STORAGE_PREFIX}/b/([^/]+)/o/?$`);
/** The largest object upload taken in one request (GCS takes 5 TiB; a packed workdir is capped far lower). */
export const MAX_UPLOAD_BYTES = 1024 * 1024 * 1024;
const MAX_RESULTS = 1000;

export type ObjectsAnswer = { status: number; body: unknown } | { status: number; media: Buffer; headers: Record<string, string> };

/** True for the paths this module answers. */
export function isObjectsPath(pathname: string): boolean {
  return OBJECTS_PATH.test(pathname);
}

function decode(segment: string, what: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new GceError(400, Reason.Invalid, `Invalid ${what}: '${segment.slice(0, 200)}'`);
  }
}

/** Every object (file) under `dir`, by its name relative to the bucket. */
function walk(bucketDir: string, dir: string, out: string[]): void {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) walk(bucketDir, path, out);
    else if (e.isFile()) out.push(relative(bucketDir, path).split(sep).join('/'));
  }
}

export function handleObjects(ctx: StorageContext, method: string, pathname: string, query: URLSearchParams, range: string | undefined): ObjectsAnswer {
  const match = OBJECTS_PATH.exec(pathname)!;
  const bucket = decode(match[1], 'bucket name');
  if (method !== 'GET') throw new GceError(405, Reason.MethodNotAllowed, `Method ${method} is not allowed: the emulator's objects are read-only`);
  if (!validBucketName(bucket)) throw new GceError(400, Reason.Invalid, `Invalid bucket name: '${bucket.slice(0, 230)}'`);
  const settings = bucketSettings(ctx, bucket);
  if (!settings || !ctx.bucketsDir || !existsSync(join(ctx.bucketsDir, bucket))) throw new GceError(404, Reason.NotFound, 'The specified bucket does not exist.');
  if (settings.forbidden) throw new GceError(403, Reason.Forbidden, `sterna-worker@sterna-emulator.iam.gserviceaccount.com does not have storage.objects.list access to the Google Cloud Storage bucket.`);
  const bucketDir = resolve(ctx.bucketsDir, bucket);
  return match[2] === undefined ? list(bucketDir, query) : media(bucketDir, decode(match[2], 'object name'), query, range);
}

function list(bucketDir: string, query: URLSearchParams): ObjectsAnswer {
  const prefix = query.get('prefix') ?? '';
  const delimiter = query.get('delimiter') ?? undefined;
  if (delimiter !== undefined && delimiter !== '/') throw new GceError(400, Reason.Invalid, `The emulator lists with delimiter "/" only (got '${delimiter.slice(0, 20)}')`);
  const startOffset = query.get('startOffset') ?? '';
  const after = query.get('pageToken') ?? undefined;
  const maxResults = Math.min(MAX_RESULTS, Number(query.get('maxResults') ?? MAX_RESULTS) || MAX_RESULTS);
  // Only the directory the prefix names (or is in) can hold its objects.
  const under = prefix.includes('/') ? prefix.slice(0, prefix.lastIndexOf('/')) : '';
  const root = resolve(bucketDir, under);
  if (root !== bucketDir && !root.startsWith(bucketDir + sep)) return { status: 200, body: { kind: 'storage#objects' } };
  const names: string[] = [];
  walk(bucketDir, root, names);
  const entries = new Map<string, { name: string; size?: number; prefix: boolean }>();
  for (const name of names) {
    if (!name.startsWith(prefix) || name < startOffset) continue;
    const rest = name.slice(prefix.length);
    const cut = delimiter ? rest.indexOf(delimiter) : -1;
    const key = cut >= 0 ? prefix + rest.slice(0, cut + 1) : name;
    if (!entries.has(key)) entries.set(key, cut >= 0 ? { name: key, prefix: true } : { name, size: statSync(join(bucketDir, name)).size, prefix: false });
  }
  const sorted = [...entries.values()].filter((e) => after === undefined || e.name > after).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const page = sorted.slice(0, maxResults);
  const items = page.filter((e) => !e.prefix).map((e) => ({ kind: 'storage#object', name: e.name, size: String(e.size) }));
  const prefixes = page.filter((e) => e.prefix).map((e) => e.name);
  return {
    status: 200,
    body: {
      kind: 'storage#objects',
      ...(prefixes.length > 0 ? { prefixes } : {}),
      ...(items.length > 0 ? { items } : {}),
      ...(sorted.length > page.length ? { nextPageToken: page[page.length - 1].name } : {}),
    },
  };
}

/** The file holding object `name`; refuses a name that would leave the bucket's directory. */
function objectFile(bucketDir: string, name: string): string {
  const segments = name.split('/');
  if (segments.some((s) => s === '' || s === '.' || s === '..') || name.includes('\0')) throw new GceError(400, Reason.Invalid, `Invalid object name: '${name.slice(0, 200)}'`);
  return join(bucketDir, ...segments);
}

function objectResource(bucket: string, name: string, size: number, updated: Date): Record<string, unknown> {
  const generation = String(updated.getTime() * 1000);
  return { kind: 'storage#object', id: `${bucket}/${name}/${generation}`, name, bucket, generation, metageneration: '1', contentType: 'application/octet-stream', size: String(size), updated: updated.toISOString() };
}

function media(bucketDir: string, name: string, query: URLSearchParams, range: string | undefined): ObjectsAnswer {
  const file = objectFile(bucketDir, name);
  if (query.get('alt') !== 'media') {
    const stat = statSync(file, { throwIfNoEntry: false });
    if (!stat?.isFile()) throw new GceError(404, Reason.NotFound, `No such object: ${name.slice(0, 200)}`);
    return { status: 200, body: objectResource(basename(bucketDir), name, stat.size, stat.mtime) };
  }
  let data: Buffer;
  try {
    data = readFileSync(file);
  } catch {
    throw new GceError(404, Reason.NotFound, `No such object: ${name.slice(0, 200)}`);
  }
  if (range === undefined) return { status: 200, media: data, headers: {} };
  const match = /^bytes=(\d+)-$/.exec(range.trim());
  if (!match) throw new GceError(400, Reason.Invalid, `The emulator reads ranges of the form bytes=N- (got '${range.slice(0, 40)}')`);
  const from = Number(match[1]);
  if (from >= data.length) throw new GceError(416, Reason.Invalid, 'The requested range cannot be satisfied.');
  return { status: 206, media: data.subarray(from), headers: { 'Content-Range': `bytes ${from}-${data.length - 1}/${data.length}` } };
}

/** True for the object upload path (`/upload/storage/v1/b/{bucket}/o`). */
export function isUploadPath(pathname: string): boolean {
  return UPLOAD_PATH.test(pathname);
}

/** objects.insert, a media upload: the bytes become the object, whole or not at all. */
export function handleUpload(ctx: StorageContext, method: string, pathname: string, query: URLSearchParams, data: Buffer): { status: number; body: unknown } {
  const bucket = decode(UPLOAD_PATH.exec(pathname)![1], 'bucket name');
  if (method !== 'POST') throw new GceError(405, Reason.MethodNotAllowed, `Method ${method} is not allowed on an upload`);
  if (query.get('uploadType') !== 'media') throw new GceError(400, Reason.Invalid, 'The emulator takes media uploads only (uploadType=media)');
  const name = query.get('name');
  if (!name) throw new GceError(400, Reason.Required, 'Required parameter: name');
  if (!validBucketName(bucket)) throw new GceError(400, Reason.Invalid, `Invalid bucket name: '${bucket.slice(0, 230)}'`);
  const settings = bucketSettings(ctx, bucket);
  if (!settings || !ctx.bucketsDir || !existsSync(join(ctx.bucketsDir, bucket))) throw new GceError(404, Reason.NotFound, 'The specified bucket does not exist.');
  if (settings.forbidden || settings.readOnly) throw new GceError(403, Reason.Forbidden, `sterna-worker@sterna-emulator.iam.gserviceaccount.com does not have storage.objects.create access to the Google Cloud Storage object.`);
  const bucketDir = resolve(ctx.bucketsDir, bucket);
  const file = objectFile(bucketDir, name);
  const condition = query.get('ifGenerationMatch');
  if (condition !== null && condition !== '0') throw new GceError(400, Reason.Invalid, 'The emulator takes ifGenerationMatch=0 (only if absent) only');
  if (condition === '0' && existsSync(file)) throw new GceError(412, Reason.ConditionNotMet, 'At least one of the pre-conditions you specified did not hold.');
  const part = `${file}.part-${randomBytes(6).toString('hex')}`;
  try {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(part, data);
    renameSync(part, file);
  } catch (err) {
    rmSync(part, { force: true });
    throw new GceError(500, Reason.InternalError, `could not write the object: ${(err as Error).message}`);
  }
  return { status: 200, body: objectResource(bucket, name, data.length, statSync(file).mtime) };
}
