/**
 * Finds the Temporal CLI (`temporal`) that runs the embedded dev server, building it
 * from source with Go when there is none. Downloading a release binary is not an option
 * on an offline machine, so we `go install` the newest tag that has no replace
 * directives (v1.5.1) into a per-user cache, where every clone on the machine reuses it.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const TEMPORAL_CLI_VERSION = '1.5.1';
const MINIMUM_VERSION: readonly [number, number] = [1, 5];

export class TemporalCliMissingError extends Error {
  override name = 'TemporalCliMissingError';
}

export function sternaCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'sterna');
}

export function cachedCliPath(): string {
  return join(sternaCacheDir(), `temporal-${TEMPORAL_CLI_VERSION}`, 'temporal');
}

/** `temporal --version` prints e.g. "temporal version 1.5.1 (Server 1.29.1, UI 2.42.1)". */
export function parseCliVersion(output: string): [number, number] | undefined {
  const match = /temporal version (\d+)\.(\d+)/.exec(output);
  return match ? [Number(match[1]), Number(match[2])] : undefined;
}

async function versionOf(binary: string): Promise<[number, number] | undefined> {
  try {
    const { stdout } = await run(binary, ['--version'], { timeout: 10_000 });
    return parseCliVersion(stdout);
  } catch {
    return undefined;
  }
}

function isRecentEnough([major, minor]: [number, number]): boolean {
  return major > MINIMUM_VERSION[0] || (major === MINIMUM_VERSION[0] && minor >= MINIMUM_VERSION[1]);
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, name);
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** A usable binary without building anything: $STERNA_TEMPORAL_CLI, PATH, then the cache. */
export async function findTemporalCli(): Promise<string | undefined> {
  const candidates = [process.env.STERNA_TEMPORAL_CLI, onPath('temporal'), cachedCliPath()];
  for (const candidate of candidates) {
    if (!candidate || !existsSync(candidate)) continue;
    const version = await versionOf(candidate);
    if (version && isRecentEnough(version)) return candidate;
  }
  return undefined;
}

/** Returns the path of a usable `temporal` binary, building it with Go if needed. */
export async function ensureTemporalCli(log: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<string> {
  const found = await findTemporalCli();
  if (found) return found;
  const go = onPath('go');
  if (!go) {
    throw new TemporalCliMissingError(
      'No Temporal CLI (version >= 1.5) found and Go is not installed to build one.\n' +
        'Install the Temporal CLI (https://docs.temporal.io/cli#install) and put `temporal` on PATH,\n' +
        'or install Go >= 1.23 so Sterna can run `go install github.com/temporalio/cli/cmd/temporal@v1.5.1`,\n' +
        'or set STERNA_TEMPORAL_CLI to the path of a temporal binary.',
    );
  }
  const target = cachedCliPath();
  // Build into a private directory and rename, so a concurrent build or an interrupted
  // one never leaves a half-written binary at the cached path.
  const staging = `${target}.build-${process.pid}`;
  mkdirSync(staging, { recursive: true });
  log(`sterna: building the Temporal CLI v${TEMPORAL_CLI_VERSION} with Go (one time, a few minutes)...`);
  const started = Date.now();
  try {
    await run(
      go,
      [
        'install',
        '-ldflags',
        `-X github.com/temporalio/cli/temporalcli.Version=${TEMPORAL_CLI_VERSION}`,
        `github.com/temporalio/cli/cmd/temporal@v${TEMPORAL_CLI_VERSION}`,
      ],
      { env: { ...process.env, GOBIN: staging, CGO_ENABLED: '0', GOFLAGS: '-buildvcs=false' }, maxBuffer: 64 * 1024 * 1024 },
    );
    renameSync(join(staging, 'temporal'), target);
  } catch (err) {
    throw new TemporalCliMissingError(`Building the Temporal CLI failed: ${(err as Error).message}`);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  log(`sterna: built ${target} in ${Math.round((Date.now() - started) / 1000)} s`);
  return target;
}
