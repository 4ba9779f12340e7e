/**
 * A staged dataset reused in its region, end to end: a real run on the GCE emulator with a
 * per-region data cache, preempted once, whose second attempt in the same region copies
 * its datasets from the cache and nothing from their source.
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { runKey } from '../../workflows/naming';
import { statusQuery } from '../../workflows/messages';
import { eventually } from '../helpers/processes';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';

describe('a staged dataset reused by the next attempt in its region', function () {
  this.timeout(240_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  it('stages from the source once, then from the region\'s cache: the second attempt stages nothing', async () => {
    const spec = exampleSpec({ placement: { regions: { allow: ['us-central1'] }, dataCache: 'gs://sterna-cache-{region}/runs' } });
    const run = await stack.start(spec);
    const first = await eventually('attempt 1 trains past a checkpoint', async () => {
      const s = await run.query(statusQuery);
      return s.attempt === 1 && s.phase === 'training' && (s.lastCheckpoint?.step ?? 0) > 40 ? s : undefined;
    }, 90_000);
    const total = first.staging!.totalBytes!;
    assert.ok(total > 0);
    assert.deepEqual([first.staging!.stagedBytes, first.staging!.reusedBytes], [total, undefined], 'attempt 1 staged everything from the source');
    const [vm] = (await stack.provider.listRunResources(runKey(run.workflowId))).map((r) => r.name);
    await stack.emulator.preempt(first.zone!, vm);
    const result = await run.result();
    assert.deepEqual(result.attempts.map((a) => a.outcome), ['preempted', 'completed']);
    assert.notEqual(result.attempts[1].zone, result.attempts[0].zone, 'another zone (cooldown)');
    assert.equal(result.attempts[1].zone.slice(0, -2), 'us-central1', 'the same region');
    const after = await run.query(statusQuery);
    assert.deepEqual(after.staging && [after.staging.attempt, after.staging.stagedBytes, after.staging.reusedBytes, after.staging.totalBytes], [2, 0, total, total]);
    const staged = after.timeline.filter((e) => e.kind === 'staged').map((e) => e.event);
    assert.deepEqual(staged, [`staged ${total} bytes`, `staged 0 bytes (${total} more from the region's data cache)`]);
    assert.ok(existsSync(join(stack.bucketsDir, 'sterna-cache-us-central1', 'runs', runKey(run.workflowId), '0.done')), 'the cache lives in the region\'s bucket, under the run');
  });
});
