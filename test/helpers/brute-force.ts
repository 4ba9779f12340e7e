/**
 * The benchmark's exact optimum checked the slow way: the cheapest cost over every
 * feasible mode sequence of the window (spot only where it has capacity, flex-start
 * entered only at a tick where a request is granted).
 */
import { canEnter, IDLE, isFlexMode, modeCount, priceAt, type Problem } from '../../bench/policy/problem';
import { evaluate } from '../../bench/policy/schedule';

export function bruteForce(p: Problem): number {
  const modes = modeCount(p);
  const seq: number[] = new Array(p.deadlineTicks).fill(IDLE);
  let best = Infinity;
  const visit = (t: number): void => {
    if (t === p.deadlineTicks) {
      const o = evaluate(p, seq);
      if (o.deadlineMet) best = Math.min(best, o.cost);
      return;
    }
    for (let m = 0; m < modes; m++) {
      if (!Number.isFinite(priceAt(p, m, t))) continue;
      if (isFlexMode(p, m) && (t === 0 || seq[t - 1] !== m) && !canEnter(p, m, t)) continue;
      seq[t] = m;
      visit(t + 1);
    }
  };
  visit(0);
  return best;
}
