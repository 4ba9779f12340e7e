/**
 * Replay against the past: histories of the main paths, recorded from real runs and
 * committed under test/histories/, replay on every `npm test`. A change that would break
 * runs in flight fails here, and must go behind `patched()`.
 *
 * Re-record (only for a deliberate, patched change of shape):
 *   STERNA_RECORD_HISTORIES=test/histories scripts/mocha-only.sh build/test/lifecycle.test.js build/test/workflow-logic.test.js
 */
import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker } from '@temporalio/worker';
import { workflowBundle } from './helpers/temporal';

const DIR = join(__dirname, '..', '..', 'test', 'histories');

describe('replay of recorded histories', function () {
  this.timeout(120_000);

  it('replays every committed history without nondeterminism', async () => {
    const files = readdirSync(DIR).filter((f) => f.endsWith('.json')).sort();
    assert.ok(files.length >= 5, `histories of the main paths are committed (found ${files.length})`);
    const histories = files.map((f) => ({ workflowId: f, history: historyFromJSON(JSON.parse(readFileSync(join(DIR, f), 'utf8'))) }));
    const replay = Worker.runReplayHistories({ workflowBundle: await workflowBundle(require.resolve('../workflows')) }, histories);
    const failed: string[] = [];
    for await (const result of replay) if (result.error) failed.push(`${result.workflowId}: ${String(result.error)}`);
    assert.deepEqual(failed, []);
  });
});
