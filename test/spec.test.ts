import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { checkSpec, parseSpec } from '../workflows/spec';

const repo = join(__dirname, '..', '..');
const example = () => JSON.parse(readFileSync(join(repo, 'examples', 'run.json'), 'utf8'));

describe('run spec', () => {
  it('accepts the example spec and fills the defaults', () => {
    const spec = parseSpec(example());
    assert.equal(spec.backend, 'gce');
    assert.equal(spec.checkpoint.interval, 2);
    assert.equal(spec.resources.diskSizeGb, 100);
    assert.equal(spec.recovery.maxRestartsOnError, 2);
  });

  it('reads durations in seconds, minutes, hours and days', () => {
    const spec = parseSpec({ ...example(), time: { maxRunDuration: '1h30m', deadlineAfter: '2d', expectedDuration: 90 } });
    assert.equal(spec.time.maxRunDuration, 5400);
    assert.equal(spec.time.deadlineAfter, 172800);
    assert.equal(spec.time.expectedDuration, 90);
  });

  it('names every bad field at once, as a non-retryable InvalidSpec failure', () => {
    const bad = {
      ...example(),
      command: [],
      datasets: [{ uri: 'http://example.com/x', path: '../escape' }],
      resources: { accelerators: [{ type: 'tpu-v5', count: 0 }] },
      pricing: { mode: 'cheap' },
      labels: { Team: 'X' },
      surprise: true,
    };
    assert.throws(
      () => parseSpec(bad),
      (err: unknown) => {
        assert.ok(err instanceof ApplicationFailure);
        assert.equal(err.type, 'InvalidSpec');
        assert.equal(err.nonRetryable, true);
        for (const field of ['command', 'datasets.0.uri', 'datasets.0.path', 'resources.accelerators.0.type', 'resources.accelerators.0.count', 'pricing.mode', 'labels.Team']) {
          assert.match(err.message, new RegExp(`${field.replace(/\./g, '\\.')}: `), `names ${field}`);
        }
        assert.match(err.message, /surprise/);
        return true;
      },
    );
  });

  it('refuses labels that Sterna sets itself', () => {
    const check = checkSpec({ ...example(), labels: { 'sterna-run': 'mine' } });
    assert.equal(check.ok, false);
    assert.ok(!check.ok && check.problems.some((p) => p.path === 'labels.sterna-run'));
  });

  it('needs an expected duration for a deadline-aware auto run', () => {
    const check = checkSpec({ ...example(), pricing: { mode: 'auto' }, time: { deadlineAfter: '6h' } });
    assert.ok(!check.ok && check.problems.some((p) => p.path === 'time.expectedDuration'));
  });
});
