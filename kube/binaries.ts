/**
 * The Kubernetes control plane the GKE tests run against, built from source: nothing
 * prebuilt can be downloaded here, but the Go module proxy serves k8s.io/kubernetes.
 *
 * k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces every k8s.io/* staging
 * module with a local path), so we build it the documented library way: a tiny wrapper
 * module that requires k8s.io/kubernetes and replaces each staging module with its
 * published v0.x release. The binaries are cached per user, like the Temporal CLI.
 * etcd comes from Debian (`etcd-server`).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { sternaCacheDir } from '../processes/temporal-cli';

const run = promisify(execFile);

export const KUBERNETES_VERSION = '1.34.4';
export const CONTROL_PLANE = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;
export type ControlPlaneBinary = (typeof CONTROL_PLANE)[number];

export class KubeBuildError extends Error {
  override name = 'KubeBuildError';
}

export function kubeCacheDir(): string {
  return join(sternaCacheDir(), `kube-v${KUBERNETES_VERSION}`);
}

export function binaryPath(name: ControlPlaneBinary): string {
  return join(kubeCacheDir(), name);
}

type Log = (line: string) => void;
const stderrLog: Log = (line) => process.stderr.write(line + '\n');

/** `replace k8s.io/x => k8s.io/x v0.34.4` for every staging module k8s.io/kubernetes replaces. */
export function wrapperGoMod(kubernetesGoMod: string, version = KUBERNETES_VERSION): string {
  const staging = [...kubernetesGoMod.matchAll(/^\s*(k8s\.io\/[a-z0-9-]+)\s+=>\s+\.\/staging\//gm)].map((m) => m[1]);
  if (staging.length === 0) throw new KubeBuildError('found no staging replace directives in k8s.io/kubernetes go.mod');
  const stagingVersion = `v0.${version.split('.').slice(1).join('.')}`;
  return [
    'module sterna.local/kube-control-plane',
    '',
    'go 1.24.0',
    '',
    `require k8s.io/kubernetes v${version}`,
    '',
    'replace (',
    ...staging.map((m) => `\t${m} => ${m} ${stagingVersion}`),
    ')',
    '',
  ].join('\n');
}

const TOOLS_GO = `//go:build tools

package controlplane

import (
${CONTROL_PLANE.map((b) => `\t_ "k8s.io/kubernetes/cmd/${b}"`).join('\n')}
)
`;

/** Builds (once per machine) and returns the directory holding the three binaries. */
export async function ensureControlPlane(log: Log = stderrLog): Promise<string> {
  const dir = kubeCacheDir();
  if (CONTROL_PLANE.every((b) => existsSync(binaryPath(b)))) return dir;
  // A directory of this build's own: two builders at once (two test runs on one machine)
  // must not delete or rename each other's half-built binaries. Go's module and build
  // caches are shared and safe to use concurrently; the last rename wins with equal files.
  mkdirSync(sternaCacheDir(), { recursive: true });
  const work = mkdtempSync(join(sternaCacheDir(), `kube-build-v${KUBERNETES_VERSION}-`));
  const env = { ...process.env, GOFLAGS: '-mod=mod -buildvcs=false', CGO_ENABLED: '0' };
  const go = (args: string[]) => run('go', args, { cwd: work, env, maxBuffer: 256 * 1024 * 1024 });
  log(`sterna: building the Kubernetes v${KUBERNETES_VERSION} control plane from source (one time, ~8 minutes on 2 cores, ~2.5 GB of memory)...`);
  const started = Date.now();
  try {
    const { stdout } = await go(['mod', 'download', '-json', `k8s.io/kubernetes@v${KUBERNETES_VERSION}`]);
    const goModPath = (JSON.parse(stdout) as { GoMod: string }).GoMod;
    writeFileSync(join(work, 'go.mod'), wrapperGoMod(readFileSync(goModPath, 'utf8')));
    writeFileSync(join(work, 'tools.go'), TOOLS_GO);
    await go(['mod', 'tidy', '-e']);
    const staging = join(work, 'bin');
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging, { recursive: true });
    const [major, minor] = KUBERNETES_VERSION.split('.');
    const ldflags = [
      `-X k8s.io/component-base/version.gitVersion=v${KUBERNETES_VERSION}`,
      `-X k8s.io/component-base/version.gitMajor=${major}`,
      `-X k8s.io/component-base/version.gitMinor=${minor}`,
      '-X k8s.io/component-base/version.gitTreeState=clean',
      '-s -w',
    ].join(' ');
    await go(['build', '-ldflags', ldflags, '-o', staging + '/', ...CONTROL_PLANE.map((b) => `k8s.io/kubernetes/cmd/${b}`)]);
    mkdirSync(dir, { recursive: true });
    for (const b of CONTROL_PLANE) renameSync(join(staging, b), binaryPath(b));
  } catch (err) {
    throw new KubeBuildError(`building the Kubernetes control plane failed: ${(err as Error).message}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  log(`sterna: built the control plane into ${dir} in ${Math.round((Date.now() - started) / 1000)} s`);
  return dir;
}

/** etcd from PATH, or installed from Debian's `etcd-server` package (CI runs as root). */
export async function ensureEtcd(log: Log = stderrLog): Promise<string> {
  for (const candidate of ['/usr/bin/etcd', '/usr/local/bin/etcd']) if (existsSync(candidate)) return candidate;
  log('sterna: installing etcd (apt-get install etcd-server)...');
  try {
    await run('apt-get', ['update', '-qq'], { maxBuffer: 64 * 1024 * 1024 });
    await run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'etcd-server'], {
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (err) {
    throw new KubeBuildError(`installing etcd failed (${(err as Error).message}); install etcd (Debian: etcd-server) and retry`);
  }
  if (!existsSync('/usr/bin/etcd')) throw new KubeBuildError('etcd-server installed but /usr/bin/etcd is missing');
  return '/usr/bin/etcd';
}
