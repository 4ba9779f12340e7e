#!/usr/bin/env node
// The first step of every npm script (through `npm run build`): makes a supported Node.js
// available and installs node modules when they are missing or older than the lockfile,
// so that `npm run demo` and `npm test` work on a fresh clone with nothing done first.
// Plain JavaScript with no dependencies: it runs before node_modules exists, under
// whatever node the machine has.
//
// How the rest of a script comes to run on the supported node without a re-exec: npm
// puts node_modules/.bin first on PATH for every script it runs (and every process those
// start inherits that PATH), so on a machine whose node is older this links the cached
// node there as `node`. Every later `node ...` of a script, every tool whose shebang is
// `#!/usr/bin/env node` (tsc, eslint, mocha, npm itself in a nested `npm run`), and every
// child that runs `node` from PATH (a VM's trainer) then runs on it, and the processes
// Sterna starts with process.execPath inherit it from their parent. The one command that
// ran on the old node is this file. A shell remembers where it found a command, so a
// script line must not run `node` again after this in the same shell: package.json runs
// this as `npm run bootstrap`, in a shell of its own.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const runtime = require('./node-runtime');

const root = path.resolve(__dirname, '..');
const lockfile = path.join(root, 'package-lock.json');
const stamp = path.join(root, 'node_modules', '.sterna-lock-sha256');
const nodeLink = path.join(root, 'node_modules', '.bin', 'node');

function sha256(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

function linkTarget(link) {
  try {
    return fs.readlinkSync(link);
  } catch {
    return undefined;
  }
}

/** node_modules/.bin/node -> `target`; or, with none, no link of ours left behind. */
function linkNode(target) {
  const current = linkTarget(nodeLink);
  if (current === target) return;
  // Only a link of ours is replaced or removed (an npm package's own `node` bin is not).
  if (current !== undefined && current.startsWith(path.dirname(runtime.cacheDir()) + path.sep)) fs.rmSync(nodeLink);
  else if (current !== undefined || fs.existsSync(nodeLink)) return;
  if (target === undefined) return;
  fs.mkdirSync(path.dirname(nodeLink), { recursive: true });
  fs.symlinkSync(target, nodeLink);
}

function main() {
  let node;
  try {
    node = runtime.ensureNode();
  } catch (err) {
    process.stderr.write(`sterna: ${err.message}\n`);
    process.exit(1);
  }
  const own = node.source === 'own';
  // npm ci runs on the supported node too (npm's own shebang finds it first on PATH), so
  // the engines of the packages it installs are checked against the node that runs them.
  const env = own ? process.env : { ...process.env, PATH: `${path.dirname(node.path)}${path.delimiter}${process.env.PATH ?? ''}` };

  const wanted = sha256(lockfile);
  const have = fs.existsSync(stamp) ? fs.readFileSync(stamp, 'utf8').trim() : '';
  if (have !== wanted) {
    process.stderr.write(`sterna: installing node modules (npm ci, on Node.js ${node.version})...\n`);
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    execFileSync(npm, ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: root, stdio: 'inherit', env });
    fs.writeFileSync(stamp, wanted + '\n');
  }

  linkNode(own ? undefined : node.path);
  if (!own) {
    const how = node.source === 'installed' ? 'installed just now from the npm registry' : 'cached';
    const machine = node.machine ? `${node.machine.version} (${node.machine.path})` : 'none on PATH';
    process.stderr.write(
      `sterna: this machine's Node.js is ${machine}, older than the ${runtime.NODE_MAJOR} Sterna needs: ` +
        `npm scripts run on Node.js ${node.version} (${how}, ${node.path}), linked as node_modules/.bin/node\n`,
    );
  }
}

main();
