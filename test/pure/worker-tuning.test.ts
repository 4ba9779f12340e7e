/**
 * The worker's observer cadence, workflow threads and process, as its environment sets
 * them (the configuration only, no server).
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { loadWorkerConfig } from '../../config/worker-config';
import { cachedRunsFor, DEFAULT_WORKER_HEAP_MB, workerProcess } from '../../workers/process-tuning';
import { DEFAULT_FLEET_SETTINGS } from '../../workflows/fleet/contract';

const base = { STERNA_GCE_ENDPOINT: 'http://127.0.0.1:1' };

describe("the worker's tuning from its environment", () => {
  it("reads a training VM's progress at the fleet default unless told, and never more often than every second", () => {
    assert.equal(loadWorkerConfig(base).observer.progressReadSeconds, DEFAULT_FLEET_SETTINGS.progressReadSeconds);
    assert.equal(loadWorkerConfig({ ...base, STERNA_OBSERVER_PROGRESS_SECONDS: '10' }).observer.progressReadSeconds, 10);
    assert.throws(() => loadWorkerConfig({ ...base, STERNA_OBSERVER_PROGRESS_SECONDS: '0.2' }), /STERNA_OBSERVER_PROGRESS_SECONDS.*at least 1/);
  });

  it("leaves the workflow threads to the SDK unless told, and refuses a count that is not a positive whole number", () => {
    assert.equal(loadWorkerConfig(base).workflowThreads, undefined);
    assert.equal(loadWorkerConfig({ ...base, STERNA_WORKFLOW_THREADS: '2' }).workflowThreads, 2);
    assert.throws(() => loadWorkerConfig({ ...base, STERNA_WORKFLOW_THREADS: '0' }), /STERNA_WORKFLOW_THREADS.*at least 1/);
    assert.throws(() => loadWorkerConfig({ ...base, STERNA_WORKFLOW_THREADS: '1.5' }), /STERNA_WORKFLOW_THREADS.*whole number/);
  });

  it('starts the worker with a 1 GB heap, a small young generation, heaps that grow by 30 % and two malloc arenas unless told, and keeps as many runs cached as that heap fits', () => {
    const tuned = workerProcess({});
    assert.deepEqual(tuned.nodeFlags, [`--max-old-space-size=${DEFAULT_WORKER_HEAP_MB}`, '--max-semi-space-size=4', '--heap-growing-percent=30']);
    assert.deepEqual([tuned.env.MALLOC_ARENA_MAX, tuned.env.MALLOC_MMAP_THRESHOLD_], ['2', '131072']);
    const told = workerProcess({ STERNA_WORKER_HEAP_MB: '4096', MALLOC_ARENA_MAX: '8' });
    assert.deepEqual([told.nodeFlags[0], told.env.MALLOC_ARENA_MAX], ['--max-old-space-size=4096', '8'], "the user's settings win");
    assert.throws(() => workerProcess({ STERNA_WORKER_HEAP_MB: '100' }), /STERNA_WORKER_HEAP_MB must be a whole number of MB, at least 256 \(got "100"\)/);
    assert.equal(cachedRunsFor(1024), 2060, '2,000 runs fit the default heap');
    assert.equal(cachedRunsFor(256), 140);
  });

  it('npm run worker exits as its worker does, with the worker\'s own message', () => {
    const launched = spawnSync(process.execPath, [join(__dirname, '..', '..', 'workers', 'start.js')], {
      env: { PATH: process.env.PATH, STERNA_GCE_ENDPOINT: 'http://127.0.0.1:1', STERNA_GCE_PROJECT: 'Not A Project' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(launched.status, 1, launched.stderr);
    assert.match(launched.stderr, /STERNA_GCE_PROJECT: a GCP project id/);
  });
});
