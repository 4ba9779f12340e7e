/** bench:scale's reading of a worker's CPU profile: a real `node --cpu-prof`, its time charged to the function and package that spent it. */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageOf, summarizeProfiles } from '../../bench/common/cpu-profile';

describe('a CPU profile read by package and function', () => {
  it('names the package of a script by its last node_modules folder, scoped names whole', () => {
    assert.equal(packageOf('file:///app/node_modules/google-gax/build/src/fallbackServiceStub.js'), 'google-gax');
    assert.equal(packageOf('file:///app/node_modules/@google-cloud/compute/build/src/v1/instances_client.js'), '@google-cloud/compute');
    assert.equal(packageOf('file:///app/node_modules/gtoken/node_modules/gaxios/build/cjs/src/gaxios.js'), 'gaxios');
    assert.equal(packageOf('file:///app/build/activities/providers/gce.js'), 'sterna');
    assert.equal(packageOf('node:internal/streams/readable'), 'node:internal');
  });

  it("charges a real process's busy time to the function that spun, in the package it lives in, and its sleep to nobody", () => {
    const dir = mkdtempSync(join(tmpdir(), 'sterna-cpu-profile-'));
    try {
      const lib = join(dir, 'node_modules', 'busy-lib');
      mkdirSync(lib, { recursive: true });
      writeFileSync(join(lib, 'index.js'), 'exports.spin = function spinInLibrary(ms) { const end = Date.now() + ms; let x = 0; while (Date.now() < end) x += Math.sqrt(x + 1); return x; };\n');
      writeFileSync(join(dir, 'main.js'), "const { spin } = require('busy-lib');\nspin(400);\nsetTimeout(() => spin(10), 300);\n");
      execFileSync(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${join(dir, 'profiles')}`, join(dir, 'main.js')], { cwd: dir });

      const [thread, ...others] = summarizeProfiles(join(dir, 'profiles'));
      assert.equal(others.length, 0, 'one thread, one profile');
      assert.ok(thread.sampledSeconds >= 0.3, `the 0.4 s of spinning was sampled: ${thread.sampledSeconds} s`);
      assert.ok(thread.idleSeconds >= 0.2, `the 0.3 s timer is idle, not charged: ${thread.idleSeconds} s`);
      assert.equal(thread.byPackage[0].name, 'busy-lib');
      assert.ok(thread.byPackage[0].share > 0.5, JSON.stringify(thread.byPackage));
      assert.match(thread.byFunction[0].name, /^spinInLibrary busy-lib\/index\.js:1$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
