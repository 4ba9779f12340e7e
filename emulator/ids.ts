/** Resource ids and names in GCE's formats. */
import { randomBytes } from 'node:crypto';

/** GCE resource ids are unsigned 64-bit integers, serialized as decimal strings. */
export function newId(): string {
  const n = randomBytes(8).readBigUInt64BE() % 9_000_000_000_000_000_000n;
  return String(n + 1_000_000_000_000_000_000n);
}

/** e.g. operation-1700000000000-60b1c2d3e4f5a-1a2b3c4d-5e6f7a8b, like GCE's. */
export function newOperationName(nowMs: number): string {
  const hex = (bytes: number) => randomBytes(bytes).toString('hex');
  return `operation-${nowMs}-${hex(7).slice(0, 13)}-${hex(4)}-${hex(4)}`;
}

/** GCE names: a lowercase letter, then up to 62 lowercase letters, digits or hyphens, not ending in a hyphen. */
export const NAME_PATTERN = /^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$/;

/** Project ids (including domain-scoped `example.com:my-project`). */
export const PROJECT_PATTERN = /^(?:[a-z][-a-z0-9.]{0,62}:)?[a-z][-a-z0-9]{0,61}[a-z0-9]?$/;

/** The self links GCE returns name the public endpoint, whatever endpoint the client used. */
export const API_BASE = 'https://www.googleapis.com/compute/v1/';

/** The project number every emulated project has (GCE's metadata and quota errors name projects by number). */
export const PROJECT_NUMBER = '123456789012';
