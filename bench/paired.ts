/**
 * Paired comparison of two policies over the same windows: the mean of their per-window
 * differences and a 95% bootstrap interval for it. "Strictly cheaper on the mean" alone
 * cannot tell a real loss from the noise of 24 windows; the interval can. Windows are
 * resampled as pairs (both policies saw the same capacity), with a fixed seed so the
 * table reproduces exactly.
 */
import { seededRandom } from '../workflows/random';

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

export function pairedDifference(a: readonly number[], b: readonly number[], seed = 1): PairedDifference {
  if (a.length !== b.length || a.length === 0) throw new Error(`paired samples need equal, non-zero lengths (got ${a.length} and ${b.length})`);
  const d = a.map((x, i) => x - b[i]);
  const n = d.length;
  const random = seededRandom(seed);
  const means = new Float64Array(RESAMPLES);
  for (let r = 0; r < RESAMPLES; r += 1) {
    let sum = 0;
    for (let i = 0; i < n; i += 1) sum += d[Math.floor(random() * n)];
    means[r] = sum / n;
  }
  means.sort();
  return { mean: d.reduce((s, x) => s + x, 0) / n, low: means[Math.floor(0.025 * RESAMPLES)], high: means[Math.ceil(0.975 * RESAMPLES) - 1] };
}

export function pairedVerdict(p: PairedDifference): PairedVerdict {
  if (p.high < 0) return PairedVerdict.Cheaper;
  if (p.low > 0) return PairedVerdict.Dearer;
  return PairedVerdict.Tie;
}
