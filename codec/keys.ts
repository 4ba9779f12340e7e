/**
 * The keys that encrypt Temporal payloads, from the environment or a file, never from
 * the repository. A key set is a list of `<id>:<base64 of 32 random bytes>` entries,
 * one per line (or comma-separated in a variable); `#` starts a comment. The first key
 * encrypts; every key decrypts, so a key is rotated by putting a new one first and
 * retired once no history that still matters was written with it.
 *
 *   STERNA_CODEC_KEYS='k2:BASE64,k1:BASE64'       inline (a secret manager's env injection)
 *   STERNA_CODEC_KEYS_FILE=/etc/sterna/codec-keys  a file, mode 0600 (0400)
 *   neither: ~/.config/sterna/codec-keys           where `sterna codec-key new` writes
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/** AES-256: 32 bytes of key. */
export const KEY_BYTES = 32;
const KEY_ID = /^[A-Za-z0-9_.-]{1,64}$/;

export interface CodecKeys {
  /** The id new payloads are encrypted with (the first key). */
  activeId: string;
  /** Every key that may decrypt, by id. */
  keys: ReadonlyMap<string, Buffer>;
  /** Where the keys came from, for messages (never the key material). */
  source: string;
}

export class CodecKeyError extends Error {
  override name = 'CodecKeyError';
}

/** Parses a key set; `source` names where it came from in every message. */
export function parseCodecKeys(text: string, source: string): CodecKeys {
  const entries = text
    .split('\n')
    .flatMap((line) => line.replace(/#.*$/, '').split(','))
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  if (entries.length === 0) throw new CodecKeyError(`${source} holds no key; create one with \`sterna codec-key new\``);
  const keys = new Map<string, Buffer>();
  for (const [index, entry] of entries.entries()) {
    const colon = entry.indexOf(':');
    const id = colon > 0 ? entry.slice(0, colon) : '';
    const material = colon > 0 ? entry.slice(colon + 1).trim() : '';
    // The entry's position, never its text: the text is key material.
    const where = `${source}, key ${index + 1}`;
    if (!KEY_ID.test(id)) throw new CodecKeyError(`${where}: expected <id>:<base64 key> with an id of 1-64 letters, digits, ".", "_", "-"`);
    if (keys.has(id)) throw new CodecKeyError(`${where}: the id ${id} appears twice`);
    const key = /^[A-Za-z0-9+/]+={0,2}$/.test(material) ? Buffer.from(material, 'base64') : Buffer.alloc(0);
    if (key.length !== KEY_BYTES) throw new CodecKeyError(`${where} (${id}): expected ${KEY_BYTES} bytes in base64, e.g. from \`sterna codec-key new\` or \`openssl rand -base64 32\``);
    keys.set(id, key);
  }
  return { activeId: entries[0].slice(0, entries[0].indexOf(':')), keys, source };
}

export function defaultKeyFile(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'sterna', 'codec-keys');
}

/** A key file others can read is refused, as ssh refuses such a private key. */
function readKeyFile(path: string): string {
  const mode = statSync(path).mode & 0o777;
  if (mode & 0o077) throw new CodecKeyError(`${path} is readable by others (mode ${mode.toString(8)}); run \`chmod 600 ${path}\``);
  return readFileSync(path, 'utf8');
}

/**
 * The configured keys, or undefined when none are configured at all (no variable, no
 * default file). Malformed keys always throw: a typo must not silently turn encryption off.
 */
export function loadCodecKeys(env: NodeJS.ProcessEnv = process.env): CodecKeys | undefined {
  if (env.STERNA_CODEC_KEYS !== undefined && env.STERNA_CODEC_KEYS_FILE !== undefined) {
    throw new CodecKeyError('set either STERNA_CODEC_KEYS or STERNA_CODEC_KEYS_FILE, not both');
  }
  if (env.STERNA_CODEC_KEYS !== undefined) return parseCodecKeys(env.STERNA_CODEC_KEYS, 'STERNA_CODEC_KEYS');
  const file = env.STERNA_CODEC_KEYS_FILE ?? defaultKeyFile(env);
  if (!existsSync(file)) {
    if (env.STERNA_CODEC_KEYS_FILE !== undefined) throw new CodecKeyError(`STERNA_CODEC_KEYS_FILE: no file at ${file}; create it with \`sterna codec-key new --file ${file}\``);
    return undefined;
  }
  return parseCodecKeys(readKeyFile(file), file);
}

/** A new key entry: `<id>:<base64>`, the id made from the date and random bits. */
export function newKeyEntry(now = new Date()): { id: string; entry: string } {
  const id = `k${now.toISOString().slice(0, 10).replace(/-/g, '')}-${randomBytes(3).toString('hex')}`;
  return { id, entry: `${id}:${randomBytes(KEY_BYTES).toString('base64')}` };
}

/**
 * Puts a new key first in `file` (created with mode 0600), keeping the others: new
 * payloads use it at once, old ones still decrypt. Returns the new key's id.
 */
export function addKeyToFile(file: string, now = new Date()): string {
  const { id, entry } = newKeyEntry(now);
  const existing = existsSync(file) ? readKeyFile(file) : '';
  if (existing.trim()) parseCodecKeys(existing, file);
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, `# Sterna payload keys: the first encrypts, all decrypt. Keep this file out of any repository.\n${entry}\n${existing.replace(/^#.*\n/, '')}`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return id;
}

/**
 * For short-lived local stacks (the demo, the tests, the benchmarks): when no key is
 * configured, a fresh key for this process and the processes it starts, kept in memory
 * only, so their payloads are encrypted like any others. Returns true if it made one.
 */
export function useEphemeralKeyIfNone(env: NodeJS.ProcessEnv = process.env): boolean {
  if (loadCodecKeys(env)) return false;
  env.STERNA_CODEC_KEYS = newKeyEntry().entry;
  return true;
}
