/**
 * The client package as another service gets it: `npm pack` of packages/client (its
 * prepack builds dist/ from the repository's sources), installed into a project outside
 * the repository. The project's lockfile pins every package the client needs to the
 * version and integrity the repository's package-lock.json pins, so `npm ci` takes them
 * from npm's cache, which the repository's own `npm ci` filled: no registry lookup, and
 * the network only for a tarball that cache lacks (as the repository's install would).
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';

export const REPO_ROOT = join(__dirname, '..', '..', '..');
export const PACKAGE_DIR = join(REPO_ROOT, 'packages', 'client');

interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

interface LockEntry extends Partial<Manifest> {
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  [field: string]: unknown;
}

export interface Packed {
  tarball: string;
  integrity: string;
  /** Paths inside the package, e.g. `dist/client/index.js`. */
  files: string[];
  manifest: Manifest;
}

export function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(file, 'utf8')) as T;
}

async function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  try {
    return (await promisify(execFile)(command, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 })).stdout;
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(' ')} (in ${cwd}) failed: ${(err as Error).message}\n${stdout ?? ''}\n${stderr ?? ''}`);
  }
}

/** `npm pack` of the client package into `dir`. */
export async function packClient(dir: string): Promise<Packed> {
  const out = await run('npm', ['pack', '--json', '--pack-destination', dir, '--loglevel=error'], PACKAGE_DIR);
  // The prepack script's banner may precede npm's JSON.
  const [report] = JSON.parse(out.slice(out.indexOf('['))) as { filename: string; integrity: string; files: { path: string }[] }[];
  return { tarball: join(dir, report.filename), integrity: report.integrity, files: report.files.map((f) => f.path), manifest: readJson<Manifest>(join(PACKAGE_DIR, 'package.json')) };
}

/**
 * The entries of the repository's lockfile that `names`, needed from the project's root,
 * resolve to, with everything they need in turn, at the same paths (so at the same
 * versions and in the same layout as in the repository).
 */
export function lockClosure(lock: Record<string, LockEntry>, names: string[]): Record<string, LockEntry> {
  const out: Record<string, LockEntry> = {};
  const parentOf = (path: string) => path.slice(0, Math.max(0, path.lastIndexOf('/node_modules/')));
  const place = (from: string, name: string, optional: boolean) => {
    // Node's lookup: the package's own node_modules, then each enclosing one.
    for (let base = from; ; base = parentOf(base)) {
      const path = `${base ? `${base}/` : ''}node_modules/${name}`;
      if (lock[path]) return visit(path);
      if (!base) break;
    }
    if (!optional) throw new Error(`${name}, needed by ${from || 'the client package'}, is not in the repository's package-lock.json: add it to the root package.json and run npm install`);
  };
  const visit = (path: string) => {
    if (out[path]) return;
    // Dev and optional flags describe the repository's tree, not the service's.
    const { dev: _dev, devOptional: _devOptional, peer: _peer, ...entry } = lock[path];
    out[path] = entry;
    for (const name of Object.keys(entry.dependencies ?? {})) place(path, name, false);
    for (const name of Object.keys(entry.optionalDependencies ?? {})) place(path, name, true);
    for (const name of Object.keys(entry.peerDependencies ?? {})) place(path, name, entry.peerDependenciesMeta?.[name]?.optional === true);
  };
  for (const name of names) place('', name, false);
  return out;
}

/**
 * A service's project in `dir` (outside the repository) with the packed client as its
 * dependency and `devDependencies` (pinned as the repository pins them) for its build,
 * installed with `npm ci`.
 */
export async function installConsumer(dir: string, packed: Packed, devDependencies: string[]): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const tarball = basename(packed.tarball);
  copyFileSync(packed.tarball, join(dir, tarball));
  const rootManifest = readJson<Manifest>(join(REPO_ROOT, 'package.json'));
  const rootLock = readJson<{ packages: Record<string, LockEntry> }>(join(REPO_ROOT, 'package-lock.json')).packages;
  const dev = Object.fromEntries(devDependencies.map((name) => [name, rootManifest.devDependencies?.[name] ?? rootManifest.dependencies?.[name] ?? '*']));
  const manifest = { name: 'a-service', version: '1.0.0', private: true, type: 'module', dependencies: { [packed.manifest.name]: `file:${tarball}` }, devDependencies: dev };
  const closure = lockClosure(rootLock, [...Object.keys(packed.manifest.dependencies ?? {}), ...devDependencies]);
  const client = { version: packed.manifest.version, resolved: `file:${tarball}`, integrity: packed.integrity, dependencies: packed.manifest.dependencies };
  const lock = { name: manifest.name, version: manifest.version, lockfileVersion: 3, requires: true, packages: { '': { name: manifest.name, version: manifest.version, dependencies: manifest.dependencies, devDependencies: dev }, [`node_modules/${packed.manifest.name}`]: client, ...closure } };
  writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
  writeFileSync(join(dir, 'package-lock.json'), JSON.stringify(lock, null, 2));
  await run('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund', '--update-notifier=false', '--loglevel=error'], dir);
}

/** The repository's tsc on the project's tsconfig.json (the compiler is a build tool, not something the package brings). */
export async function typecheck(dir: string): Promise<void> {
  await run(process.execPath, [join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], dir);
}
