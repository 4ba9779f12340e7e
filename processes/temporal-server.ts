/**
 * Finds Sterna's own Temporal server binary (temporal-server/ in the repository: a current
 * go.temporal.io/server on SQLite, with JWT authorization available), building it with Go
 * when there is none. The build goes to a per-user cache outside the repository, as the
 * Temporal CLI's does, under a name keyed by the program's source and the Go version, so
 * every clone on the machine shares one build and a changed program is built afresh.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { sternaCacheDir } from './temporal-cli';

const run = promisify(execFile);

export const TEMPORAL_SERVER_BINARY = 'sterna-temporal-server';

export class TemporalServerMissingError extends Error {
  override name = 'TemporalServerMissingError';
}

/** The Go program's folder in the repository (this file runs from build/config/). */
export function temporalServerSourceDir(): string {
  return join(__dirname, '..', '..', 'temporal-server');
}

/** The files that decide what is built: the module files and the Go sources. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f === 'go.mod' || f === 'go.sum' || (f.endsWith('.go') && !f.endsWith('_test.go')))
    .sort();
}

/** A short hash of the program's source and `go version` (which names the OS and architecture too). */
export function temporalServerCacheKey(dir: string, goVersion: string): string {
  const hash = createHash('sha256').update(goVersion.trim());
  for (const file of sourceFiles(dir)) hash.update(`\0${file}\0`).update(readFileSync(join(dir, file)));
  return hash.digest('hex').slice(0, 16);
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, name);
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}

async function goVersion(go: string): Promise<string> {
  return (await run(go, ['version'], { timeout: 30_000 })).stdout;
}

export async function cachedTemporalServerPath(go: string): Promise<string> {
  const key = temporalServerCacheKey(temporalServerSourceDir(), await goVersion(go));
  return join(sternaCacheDir(), `temporal-server-${key}`, TEMPORAL_SERVER_BINARY);
}

/** A usable binary without building anything: $STERNA_TEMPORAL_SERVER, then the cache. */
export async function findTemporalServer(): Promise<string | undefined> {
  const named = process.env.STERNA_TEMPORAL_SERVER;
  if (named) {
    if (!existsSync(named)) throw new TemporalServerMissingError(`STERNA_TEMPORAL_SERVER names ${named}, which does not exist: unset it to build the server from temporal-server/`);
    return named;
  }
  const go = onPath('go');
  if (!go) return undefined;
  const cached = await cachedTemporalServerPath(go);
  return existsSync(cached) ? cached : undefined;
}

/** Returns the path of the server binary, building it with Go if needed (minutes, once). */
export async function ensureTemporalServer(log: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<string> {
  const found = await findTemporalServer();
  if (found) return found;
  const go = onPath('go');
  if (!go) {
    throw new TemporalServerMissingError(
      `Go is not installed, and Sterna's Temporal server (temporal-server/) is built with it.\n` +
        `Install Go (the version named in temporal-server/go.mod or later), or build the program elsewhere\n` +
        `and set STERNA_TEMPORAL_SERVER to the binary.`,
    );
  }
  const target = await cachedTemporalServerPath(go);
  // Build into a private directory and rename, so a concurrent build or an interrupted
  // one never leaves a half-written binary at the cached path.
  const staging = `${target}.build-${process.pid}`;
  mkdirSync(staging, { recursive: true });
  log(`sterna: building the Temporal server (temporal-server/) with Go: once per version, several minutes...`);
  const started = Date.now();
  try {
    await run(go, ['build', '-trimpath', '-o', join(staging, TEMPORAL_SERVER_BINARY), '.'], {
      cwd: temporalServerSourceDir(),
      // -mod=readonly: go.sum pins every module; a build never rewrites the repository's files.
      env: { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-buildvcs=false -mod=readonly' },
      maxBuffer: 64 * 1024 * 1024,
    });
    renameSync(join(staging, TEMPORAL_SERVER_BINARY), target);
  } catch (err) {
    throw new TemporalServerMissingError(`Building the Temporal server in temporal-server/ failed: ${(err as Error).message}`);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  log(`sterna: built ${target} in ${Math.round((Date.now() - started) / 1000)} s`);
  return target;
}
