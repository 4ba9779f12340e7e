/** Seeded window placement, so every policy and the optimum see the same windows. */

/** mulberry32: a tiny, well-mixed 32-bit PRNG; determinism matters here, not quality. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `count` start ticks, uniform over those where start + deadline fits in the trace. */
export function windowStarts(traceTicks: number, deadlineTicks: number, count: number, seed: number): number[] {
  const last = traceTicks - deadlineTicks;
  if (last < 0) throw new Error(`the deadline (${deadlineTicks} ticks) is longer than the trace (${traceTicks} ticks)`);
  const random = seededRandom(seed);
  return Array.from({ length: count }, () => Math.floor(random() * (last + 1)));
}
