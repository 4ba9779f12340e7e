#!/usr/bin/env node
// Installs node modules when they are missing or older than the lockfile, so that
// `npm run demo` and `npm test` work on a fresh clone with nothing done first.
// Plain JavaScript with no dependencies: it runs before node_modules exists.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');

const root = path.resolve(__dirname, '..');
const lockfile = path.join(root, 'package-lock.json');
const stamp = path.join(root, 'node_modules', '.sterna-lock-sha256');

function sha256(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

const wanted = sha256(lockfile);
const have = fs.existsSync(stamp) ? fs.readFileSync(stamp, 'utf8').trim() : '';
if (have !== wanted) {
  process.stderr.write('sterna: installing node modules (npm ci)...\n');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  execFileSync(npm, ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: root, stdio: 'inherit' });
  fs.writeFileSync(stamp, wanted + '\n');
}
