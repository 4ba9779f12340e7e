/**
 * Where a spec's data may come from and land: gs:// URIs that stay inside their bucket,
 * and relative paths that stay inside the work directory.
 *
 * Specs take gs:// only. Nothing needs file:// in a spec (the emulator maps gs:// to its
 * local bucket directory itself), and a file:// URI would let a spec read any file of
 * the host. "." and ".." segments would climb out of a bucket's directory in that
 * mapping; wildcards and "#" mean something else to `gcloud storage` (globs, object
 * generations).
 */
import { utf8Length } from './text';

/** GCS object names are at most 1024 bytes of UTF-8. */
export const MAX_OBJECT_BYTES = 1024;

/** GCS bucket names: 3-63 characters (222 with dots, 63 per dot-separated part). */
export function isBucketName(name: string): boolean {
  return /^[a-z0-9][a-z0-9_.-]{1,220}[a-z0-9]$/.test(name) && name.split('.').every((part) => part.length >= 1 && part.length <= 63) && (name.includes('.') || name.length <= 63);
}

/** Why `uri` is not a gs://bucket[/object-or-prefix] that stays inside its bucket, or undefined. */
export function storageUriProblem(uri: string, maxObjectBytes = MAX_OBJECT_BYTES): string | undefined {
  if (/^file:/i.test(uri)) return 'file:// URIs are not accepted; use gs://bucket/path';
  const match = /^gs:\/\/([^/]*)(?:\/(.*))?$/s.exec(uri);
  if (!match) return 'expected gs://bucket/path';
  const [, bucket, object = ''] = match;
  if (!isBucketName(bucket)) return `"${bucket}" is not a bucket name: 3-63 of a-z, 0-9, "-", "_", ".", starting and ending with a letter or digit`;
  if (object === '') return undefined;
  const segments = object.replace(/\/$/, '').split('/');
  if (segments.some((s) => s === '.' || s === '..')) return 'path segments "." and ".." are not allowed';
  if (segments.some((s) => s === '')) return 'empty path segment ("//")';
  if (/[*?[\]#]/.test(object)) return 'wildcards (*, ?, [ ]) and "#" are not supported; name an object or a prefix';
  if (utf8Length(object) > maxObjectBytes) return `the object path is longer than ${maxObjectBytes} bytes`;
  return undefined;
}

/** Why `path` is not a plain relative path (no leading "/", no empty, "." or ".." segment), or undefined. */
export function relativePathProblem(path: string): string | undefined {
  if (path.startsWith('/')) return 'must be a relative path, e.g. data/train.csv';
  if (path.split('/').some((s) => s === '' || s === '.' || s === '..')) return 'path segments must not be empty, "." or ".."';
  return undefined;
}
