/**
 * The Prometheus server the metrics test scrapes a worker with: Debian's `prometheus`
 * package (2.42 on bookworm), installed with apt-get when missing, as etcd is for the
 * GKE tests (CI runs as root). STERNA_PROMETHEUS may name another binary.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);

export class PrometheusMissingError extends Error {
  override name = 'PrometheusMissingError';
}

export function findPrometheus(): string | undefined {
  for (const candidate of [process.env.STERNA_PROMETHEUS, '/usr/bin/prometheus', '/usr/local/bin/prometheus']) if (candidate && existsSync(candidate)) return candidate;
  return undefined;
}

/** The prometheus binary, installed from Debian's package when there is none. */
export async function ensurePrometheus(log: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<string> {
  const found = findPrometheus();
  if (found) return found;
  if (process.getuid?.() !== 0) {
    throw new PrometheusMissingError('no prometheus binary, and installing Debian\'s package needs root: run `apt-get install prometheus` (or set STERNA_PROMETHEUS to a prometheus binary)');
  }
  log('sterna: installing Prometheus (apt-get install prometheus)...');
  try {
    await run('apt-get', ['update', '-qq'], { maxBuffer: 64 * 1024 * 1024 });
    // The package's service is not started (no init system here, and the tests start their own).
    await run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'prometheus'], { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, maxBuffer: 64 * 1024 * 1024 });
  } catch (err) {
    throw new PrometheusMissingError(`installing Prometheus failed (${(err as Error).message}); install it (Debian: prometheus) and retry`);
  }
  const installed = findPrometheus();
  if (!installed) throw new PrometheusMissingError('the prometheus package installed but /usr/bin/prometheus is missing');
  return installed;
}
