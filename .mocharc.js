/**
 * Mocha settings for `npm test`. The suite mostly waits (on VMs, timers, the cloud's
 * answers), so test files run in parallel worker processes, each with its own Temporal
 * dev server (test/helpers/temporal.ts). Workers take files in the order listed here:
 * the longest files go first so that none of them starts last and keeps the run going
 * alone; every other compiled test file follows in name order.
 * `scripts/mocha-only.sh` runs chosen files serially, without this file.
 */
const { readdirSync } = require('node:fs');
const { join } = require('node:path');

const dir = join('build', 'test');
const longestFirst = ['safety', 'bench-scale', 'lifecycle', 'observer', 'workflow-logic', 'gke', 'observer-gke', 'cli', 'auto-policy'].map((name) => join(dir, `${name}.test.js`));
let all = [];
try {
  all = readdirSync(dir, { recursive: true }).filter((f) => f.endsWith('.test.js')).sort().map((f) => join(dir, f));
} catch {
  // Not built yet: mocha reports that no test files were found.
}

module.exports = {
  spec: [...longestFirst.filter((f) => all.includes(f)), ...all.filter((f) => !longestFirst.includes(f))],
  require: ['build/test/global.js'],
  parallel: true,
  jobs: Number(process.env.STERNA_TEST_JOBS ?? 3),
  timeout: 120000,
  slow: 5000,
  exit: true,
};
