/**
 * The OCI runtime that runs a run's container image on this machine, for the tests and for
 * the emulator's VMs (which are local processes): Debian's `podman` and `runc` packages
 * (podman 4.3, runc 1.1 on bookworm), installed with apt-get when missing, as Prometheus
 * is (config/prometheus.ts; CI runs as root).
 *
 * Podman is given Sterna's own containers.conf through CONTAINERS_CONF, never the
 * machine's /etc/containers, which stays the machine owner's: runc rather than crun
 * (crun fails in containers like this machine on rlimits and hybrid cgroups), the
 * cgroupfs cgroup manager (no systemd here), no default ulimits (raising them is refused
 * inside such a container) and events to a file (no journald). A real GCE VM runs the
 * image with its own runtime and configuration (the agent prefers docker, see
 * activities/agent/sterna-agent.sh); none of this reaches it.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { sternaCacheDir } from './temporal-cli';

const run = promisify(execFile);

export class PodmanMissingError extends Error {
  override name = 'PodmanMissingError';
}

export const CONTAINERS_CONF = `# Written by Sterna (config/podman.ts) for podman on this machine: see that file for why.
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
`;

export interface PodmanSetup {
  /** The podman binary. */
  podman: string;
  /** Sterna's containers.conf: give it to podman as CONTAINERS_CONF. */
  containersConf: string;
  /** The environment that makes podman use it (for a VM's guest, or a test's own podman calls). */
  env: Record<string, string>;
}

const PODMAN_PATHS = ['/usr/bin/podman', '/usr/local/bin/podman'];
const RUNC_PATHS = ['/usr/sbin/runc', '/usr/bin/runc', '/usr/local/sbin/runc', '/usr/local/bin/runc'];

function first(paths: readonly (string | undefined)[]): string | undefined {
  return paths.find((p): p is string => p !== undefined && p !== '' && existsSync(p));
}

/** Sterna's containers.conf, written (whole, then renamed) when missing or different. */
export function containersConfPath(): string {
  const dir = join(sternaCacheDir(), 'containers');
  const path = join(dir, 'containers.conf');
  if (!existsSync(path) || readFileSync(path, 'utf8') !== CONTAINERS_CONF) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${path}.${process.pid}.tmp`, CONTAINERS_CONF);
    renameSync(`${path}.${process.pid}.tmp`, path);
  }
  return path;
}

function setupOf(podman: string): PodmanSetup {
  const containersConf = containersConfPath();
  return { podman, containersConf, env: { CONTAINERS_CONF: containersConf } };
}

/** Podman and runc, installed from Debian's packages when either is missing. STERNA_PODMAN may name another podman. */
export async function ensurePodman(log: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<PodmanSetup> {
  const podman = first([process.env.STERNA_PODMAN, ...PODMAN_PATHS]);
  if (podman && first(RUNC_PATHS)) return setupOf(podman);
  const missing = [podman ? undefined : 'podman', first(RUNC_PATHS) ? undefined : 'runc'].filter((p): p is string => p !== undefined);
  if (process.getuid?.() !== 0) {
    throw new PodmanMissingError(`no ${missing.join(' and ')} (container images are run with podman and runc here), and installing Debian's packages needs root: run \`apt-get install --no-install-recommends ${missing.join(' ')}\``);
  }
  log(`sterna: installing ${missing.join(' and ')} (apt-get install ${missing.join(' ')})...`);
  try {
    await run('apt-get', ['update', '-qq'], { maxBuffer: 64 * 1024 * 1024 });
    // No recommends: they bring crun (which fails here), buildah, slirp4netns; runc satisfies podman's "crun | runc".
    await run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, maxBuffer: 64 * 1024 * 1024 });
  } catch (err) {
    throw new PodmanMissingError(`installing ${missing.join(' and ')} failed (${(err as Error).message}); install them (Debian: apt-get install --no-install-recommends podman runc) and retry`);
  }
  const installed = first([process.env.STERNA_PODMAN, ...PODMAN_PATHS]);
  if (!installed || !first(RUNC_PATHS)) throw new PodmanMissingError(`the packages installed, but ${installed ? 'runc' : 'podman'} is still missing`);
  return setupOf(installed);
}
