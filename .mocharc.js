/**
 * Mocha settings for `npm test`. The suite mostly waits (on VMs, timers, the cloud's
 * answers), so test files run in parallel worker processes, each with its own Temporal
 * dev server (test/helpers/temporal.ts). Workers take files in the order listed here:
 * the longest files go first so that none of them starts last and keeps the run going
 * alone; every other compiled test file follows in name order.
 *
 * Test files live in one folder per tier, by what the file starts (docs/testing.md):
 * test/pure (nothing but Node), test/emulator (the GCE emulator, no Temporal) and
 * test/stack (a Temporal server with Sterna's workflows). STERNA_TEST_TIER=<tier> runs
 * one tier (`npm run test:pure` ...); unset, every tier runs, each file once. Only the
 * tier folders are read, so a compiled file left in build/test/ by an older layout is
 * never run.
 * `scripts/mocha-only.sh` runs chosen files (or one tier's folder) serially, without this file.
 */
const { readdirSync } = require('node:fs');
const { basename, join } = require('node:path');

const TIERS = ['pure', 'emulator', 'stack'];
const tier = process.env.STERNA_TEST_TIER || undefined;
if (tier !== undefined && !TIERS.includes(tier)) {
  throw new Error(`STERNA_TEST_TIER=${tier} is not a test tier: use one of ${TIERS.join(', ')}, or unset it to run every tier`);
}

// A test file outside the tier folders would never run: refuse it rather than skip it.
const untiered = readdirSync('test').filter((f) => f.endsWith('.test.ts'));
if (untiered.length > 0) {
  throw new Error(`${untiered.map((f) => `test/${f}`).join(', ')}: a test file belongs in the folder of its tier, test/${TIERS.join(', test/')} (docs/testing.md)`);
}

const longestFirst = ['safety', 'bench-scale', 'lifecycle', 'observer', 'workflow-logic', 'gke', 'observer-gke', 'cli', 'auto-policy'].map((name) => `${name}.test.js`);
let all = [];
for (const t of tier ? [tier] : TIERS) {
  const dir = join('build', 'test', t);
  try {
    all.push(...readdirSync(dir, { recursive: true }).filter((f) => f.endsWith('.test.js')).map((f) => join(dir, f)));
  } catch {
    // Not built yet: mocha reports that no test files were found.
  }
}
all = all.sort();
const first = longestFirst.flatMap((name) => all.filter((f) => basename(f) === name));

module.exports = {
  spec: [...first, ...all.filter((f) => !first.includes(f))],
  require: ['build/test/global.js'],
  parallel: true,
  jobs: Number(process.env.STERNA_TEST_JOBS ?? 3),
  timeout: 120000,
  slow: 5000,
  exit: true,
};
