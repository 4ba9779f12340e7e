/**
 * The worker's observer cadence and workflow threads, as its environment sets them (pure:
 * the configuration only, no server).
 */
import { strict as assert } from 'node:assert';
import { loadWorkerConfig } from '../config/worker-config';
import { DEFAULT_FLEET_SETTINGS } from '../workflows/fleet/contract';

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
});
