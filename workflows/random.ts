/**
 * mulberry32: a tiny, well-mixed, seeded 32-bit PRNG, uniform in [0, 1). Pure and
 * deterministic, so the benchmark's windows, the emulator's spot model and fault
 * injection, and the example dataset all replay exactly from their seeds.
 */
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
