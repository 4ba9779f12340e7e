/**
 * A container image for the tests, made on this machine without a registry (none is
 * reachable): a root file system of this machine's own programs (bash, coreutils...) and
 * the shared libraries each loads (ldd), plus an /etc/os-release that names the image and
 * so proves a program ran in it, packed as a tarball and `podman import`ed. The tarball
 * is cached under ~/.cache/sterna/containers by a hash of what went into it, and an image
 * podman already holds under its tag is not imported again.
 *
 *   const { podman } = await ensurePodman();
 *   const image = await testImage(podman);   // localhost/sterna-test-image:<hash>
 *   const withPython = await testImage(podman, { python: true });   // and Debian's python3 with pip
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { sternaCacheDir } from '../../config/temporal-cli';
import type { PodmanSetup } from '../../config/podman';

const run = promisify(execFile);

/** What the tests' trainers and setup commands use; `sh` is the machine's /bin/sh (dash on Debian). */
export const TEST_IMAGE_PROGRAMS = ['bash', 'sh', 'cat', 'cp', 'mv', 'rm', 'mkdir', 'ls', 'sleep', 'date', 'head', 'tail', 'sha256sum', 'env', 'touch', 'grep', 'id'];

/** The image's ID in its /etc/os-release: no machine the tests run on has it. */
export const TEST_IMAGE_ID = 'sterna-test-image';

async function which(program: string): Promise<string> {
  const { stdout } = await run('bash', ['-c', 'command -v -- "$1"', 'which', program]);
  const path = stdout.trim();
  if (!path.startsWith('/')) throw new Error(`the test image needs ${program}, which this machine does not have`);
  return path;
}

/** The libraries `binary` loads, by the paths it loads them from (ldd: "name => /path (addr)" and the loader's "/path (addr)"). */
async function librariesOf(binary: string): Promise<string[]> {
  const { stdout } = await run('ldd', [binary]).catch(() => ({ stdout: '' })); // a static binary: "not a dynamic executable"
  return [...stdout.matchAll(/(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/g)].map((m) => m[1]);
}

/** Copies a file to the same path under `root`, following symlinks (the image holds the bytes). */
function place(root: string, path: string, mode = 0o755): void {
  const target = join(root, path);
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(realpathSync(path), target);
  chmodSync(target, mode);
}

/**
 * Debian's own Python (not a pyenv one on PATH): its interpreter, standard library (less
 * its tests and the EXTERNALLY-MANAGED marker, so pip installs as in a python image) and
 * pip, with the libraries its extension modules load.
 */
const PYTHON = { binary: '/usr/bin/python3.11', trees: ['/usr/lib/python3.11', '/usr/lib/python3/dist-packages/pip', '/usr/lib/python3/dist-packages/pip-23.0.1.dist-info'], links: ['/usr/bin/python3', '/usr/bin/python'] };

export interface TestImageOptions {
  programs?: readonly string[];
  /** Python 3.11 and pip from this machine's Debian packages (python3, python3-pip). */
  python?: boolean;
}

/** Every regular file under `dir`, skipping what `skip` names. */
function filesUnder(dir: string, skip: (path: string) => boolean): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (skip(path)) return [];
    return e.isDirectory() ? filesUnder(path, skip) : e.isFile() ? [path] : [];
  });
}

const skipInPython = (path: string) => path === '/usr/lib/python3.11/test' || path.endsWith('/EXTERNALLY-MANAGED') || path.endsWith('/__pycache__');

/** The image's tag; built and imported into podman when it is not there yet. */
export async function testImage(podman: PodmanSetup, options: TestImageOptions = {}): Promise<string> {
  const binaries = new Map<string, string>();
  for (const program of options.programs ?? TEST_IMAGE_PROGRAMS) {
    const path = await which(program);
    // /bin/sh is where every image's shell is looked for, whatever this machine calls it.
    binaries.set(program === 'sh' ? '/bin/sh' : path, path);
  }
  const trees: string[] = [];
  if (options.python) {
    for (const path of [PYTHON.binary, ...PYTHON.trees]) if (!existsSync(path)) throw new Error(`the Python test image needs ${path} (Debian: apt-get install python3 python3-pip)`);
    binaries.set(PYTHON.binary, PYTHON.binary);
    for (const tree of PYTHON.trees) trees.push(...filesUnder(tree, skipInPython));
  }
  const libraries = new Set<string>();
  for (const path of [...binaries.values(), ...trees.filter((f) => f.endsWith('.so'))]) for (const lib of await librariesOf(path)) libraries.add(lib);
  const hash = createHash('sha256');
  for (const [at, path] of [...binaries, ...[...libraries].map((l) => [l, l] as const)].sort()) hash.update(`${at}\0`).update(readFileSync(realpathSync(path)));
  // The trees by name, size and time: hashing 50 MB of Python on every run would cost more than it saves.
  for (const file of trees.sort()) {
    const { size, mtimeMs } = statSync(file);
    hash.update(`${file}\0${size}\0${mtimeMs}\0`);
  }
  const key = hash.digest('hex').slice(0, 16);
  const tag = `localhost/sterna-test-image:${key}`;
  const env = { ...process.env, ...podman.env };
  const exists = await run(podman.podman, ['image', 'exists', tag], { env }).then(() => true, () => false);
  if (exists) return tag;

  const dir = join(sternaCacheDir(), 'containers');
  const tarball = join(dir, `test-image-${key}.tar`);
  if (!existsSync(tarball)) {
    mkdirSync(dir, { recursive: true });
    const root = mkdtempSync(join(dir, 'rootfs-'));
    try {
      for (const [at, path] of binaries) {
        mkdirSync(join(root, dirname(at)), { recursive: true });
        copyFileSync(realpathSync(path), join(root, at));
        chmodSync(join(root, at), 0o755);
      }
      for (const lib of libraries) place(root, lib);
      for (const file of trees) place(root, file, statSync(file).mode & 0o777);
      if (options.python) for (const link of PYTHON.links) symlinkSync('python3.11', join(root, link));
      mkdirSync(join(root, 'etc'), { recursive: true });
      writeFileSync(join(root, 'etc', 'os-release'), `ID=${TEST_IMAGE_ID}\nNAME="Sterna test image"\nVERSION_ID=${key}\n`);
      for (const d of ['tmp', 'root', 'opt']) mkdirSync(join(root, d), { recursive: true });
      chmodSync(join(root, 'tmp'), 0o1777);
      await run('tar', ['-C', root, '--numeric-owner', '--owner=0', '--group=0', '-cf', `${tarball}.tmp`, '.']);
      renameSync(`${tarball}.tmp`, tarball);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }
  // PATH as a real image sets it: podman import gives an image no environment of its own.
  await run(podman.podman, ['import', '--quiet', '--change', 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', tarball, tag], { env });
  return tag;
}
