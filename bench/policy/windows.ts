/** Seeded window placement, so every policy and the optimum see the same windows. */
import { seededRandom } from '../../workflows/api';

/** `count` start ticks, uniform over those where start + deadline fits in the trace. */
export function windowStarts(traceTicks: number, deadlineTicks: number, count: number, seed: number): number[] {
  const last = traceTicks - deadlineTicks;
  if (last < 0) throw new Error(`the deadline (${deadlineTicks} ticks) is longer than the trace (${traceTicks} ticks)`);
  const random = seededRandom(seed);
  return Array.from({ length: count }, () => Math.floor(random() * (last + 1)));
}
