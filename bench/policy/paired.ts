/**
 * Paired comparison of two policies over the same windows: the mean of their per-window
 * differences and a 95% bootstrap interval for it. "Strictly cheaper on the mean" alone
 * cannot tell a real loss from the noise of 24 windows; the interval can. Windows are
 * resampled as pairs (both policies saw the same capacity), with a fixed seed so the
 * table reproduces exactly. Windows that overlap in the trace saw the same outages, so
 * they are not independent samples: given clusters (the block of trace time each window
 * starts in), whole clusters are resampled (a block bootstrap), and a market event many
 * windows share counts once, not once per window.
 */
import { seededRandom } from '../../workflows/api';

export interface PairedDifference {
  /** Mean of a[i] - b[i]. */
  mean: number;
  /** 2.5th and 97.5th percentiles of the bootstrapped mean. */
  low: number;
  high: number;
}

/** Whether `a` is cheaper than `b`, dearer, or the windows cannot tell them apart. */
export enum PairedVerdict {
  Cheaper = 'cheaper',
  Tie = 'tie',
  Dearer = 'dearer',
}

const RESAMPLES = 2000;

/**
 * `clusters[i]` names the cluster of window i (windows of one cluster are resampled
 * together); without it every window is its own.
 */
export function pairedDifference(a: readonly number[], b: readonly number[], clusters?: readonly number[]): PairedDifference {
  if (a.length !== b.length || a.length === 0) throw new Error(`paired samples need equal, non-zero lengths (got ${a.length} and ${b.length})`);
  if (clusters !== undefined && clusters.length !== a.length) throw new Error(`one cluster per window is needed (got ${clusters.length} for ${a.length} windows)`);
  const d = a.map((x, i) => x - b[i]);
  const groups = new Map<number, { sum: number; count: number }>();
  d.forEach((x, i) => {
    const key = clusters?.[i] ?? i;
    const g = groups.get(key) ?? { sum: 0, count: 0 };
    groups.set(key, { sum: g.sum + x, count: g.count + 1 });
  });
  const blocks = [...groups.values()];
  const k = blocks.length;
  const random = seededRandom(1);
  const means = new Float64Array(RESAMPLES);
  for (let r = 0; r < RESAMPLES; r += 1) {
    let sum = 0;
    let count = 0;
    for (let i = 0; i < k; i += 1) {
      const g = blocks[Math.floor(random() * k)];
      sum += g.sum;
      count += g.count;
    }
    means[r] = sum / count;
  }
  means.sort();
  return { mean: d.reduce((s, x) => s + x, 0) / d.length, low: means[Math.floor(0.025 * RESAMPLES)], high: means[Math.ceil(0.975 * RESAMPLES) - 1] };
}

export function pairedVerdict(p: PairedDifference): PairedVerdict {
  if (p.high < 0) return PairedVerdict.Cheaper;
  if (p.low > 0) return PairedVerdict.Dearer;
  return PairedVerdict.Tie;
}
