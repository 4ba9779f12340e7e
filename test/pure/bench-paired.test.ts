/** The robustness table's paired comparison: a loss the windows show, and a tie they cannot break. */
import { strict as assert } from 'node:assert';
import { PairedVerdict, pairedDifference, pairedVerdict } from '../../bench/policy/paired';
import { seededRandom } from '../../workflows/random';

describe('paired comparison of two policies over the same windows', () => {
  const random = seededRandom(7);
  const base = Array.from({ length: 24 }, () => 1 + random());

  it('is exactly zero, interval included, for the same ratios', () => {
    assert.deepEqual(pairedDifference(base, base), { mean: 0, low: 0, high: 0 });
    assert.equal(pairedVerdict(pairedDifference(base, base)), PairedVerdict.Tie);
  });

  it('calls a policy dearer that loses in most windows, however noisy the windows themselves', () => {
    const worse = base.map((x, i) => x + (i % 6 === 0 ? -0.01 : 0.02));
    const p = pairedDifference(worse, base);
    assert.ok(p.low > 0 && p.low <= p.mean && p.mean <= p.high, JSON.stringify(p));
    assert.equal(pairedVerdict(p), PairedVerdict.Dearer);
    assert.equal(pairedVerdict(pairedDifference(base, worse)), PairedVerdict.Cheaper);
  });

  it('calls a tie a lower mean made of one window', () => {
    const oneWindow = base.map((x, i) => (i === 3 ? x - 0.2 : x + 0.001));
    const p = pairedDifference(oneWindow, base);
    assert.ok(p.mean < 0, 'the mean is lower');
    assert.equal(pairedVerdict(p), PairedVerdict.Tie, JSON.stringify(p));
  });

  it('counts windows that saw the same outages once: a loss made in two blocks of trace time is a tie', () => {
    // 24 windows in 4 blocks; the policy loses in two blocks, by a lot, and gains a little in two.
    const blocks = base.map((_, i) => Math.floor(i / 6));
    const worse = base.map((x, i) => x + (blocks[i] < 2 ? 0.05 : -0.01));
    assert.equal(pairedVerdict(pairedDifference(worse, base)), PairedVerdict.Dearer, 'as independent windows');
    const p = pairedDifference(worse, base, blocks);
    assert.ok(Math.abs(p.mean - 0.02) < 1e-12, 'the same mean');
    assert.equal(pairedVerdict(p), PairedVerdict.Tie, JSON.stringify(p));
  });

  it('resamples each window alone when every window is its own block', () => {
    const worse = base.map((x, i) => x + (i % 6 === 0 ? -0.01 : 0.02));
    assert.deepEqual(pairedDifference(worse, base, base.map((_, i) => i)), pairedDifference(worse, base));
  });

  it('refuses samples that are not pairs', () => {
    assert.throws(() => pairedDifference([1, 2], [1, 2], [0]), /one cluster per window/);
    assert.throws(() => pairedDifference([1, 2], [1]), /equal, non-zero lengths/);
    assert.throws(() => pairedDifference([], []), /equal, non-zero lengths/);
  });
});
