/**
 * Replay within a version: histories of the main paths, recorded from real runs of the
 * current code and committed under test/histories/, replay on every `npm test`. A change
 * that fails here changes the rules: it ships as a new worker version (docs/versions.md),
 * and the histories are re-recorded for it:
 *   rm test/histories/*.binpb
 *   STERNA_RECORD_HISTORIES=test/histories scripts/mocha-only.sh build/test/lifecycle.test.js build/test/workflow-logic.test.js build/test/team.test.js build/test/zone-memory-stack.test.js
 */
import { strict as assert } from 'node:assert';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from '@temporalio/worker';
import { loadHistory } from './helpers/histories';
import { workflowBundle } from './helpers/temporal';

const DIR = join(__dirname, '..', '..', 'test', 'histories');

describe('replay of recorded histories', function () {
  this.timeout(120_000);

  it('replays every committed history without nondeterminism', async () => {
    const files = readdirSync(DIR).filter((f) => f.endsWith('.binpb')).sort();
    assert.ok(files.length >= 5, `histories of the main paths are committed (found ${files.length})`);
    // Each replays under the workflow id it ran with: a run tells its own resources (and the
    // observer's word about them) by the run key of its id, so any other id would replay
    // a run that ignores what it heard.
    const histories = files.map((f) => {
      const history = loadHistory(join(DIR, f));
      return { file: f, workflowId: history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowId || f, history };
    });
    const fileOf = new Map(histories.map((h) => [h.workflowId, h.file]));
    assert.equal(fileOf.size, histories.length, 'every history has its own workflow id');
    const replay = Worker.runReplayHistories({ workflowBundle: await workflowBundle(require.resolve('../workflows')) }, histories);
    const failed: string[] = [];
    for await (const result of replay) if (result.error) failed.push(`${fileOf.get(result.workflowId)}: ${String(result.error)}`);
    assert.deepEqual(failed, []);
  });
});
