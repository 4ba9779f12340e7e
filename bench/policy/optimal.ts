/**
 * The omniscient optimum of a window, exactly, by dynamic programming.
 *
 * State after tick t: (mode, ticks in that mode capped at d+1, slack used s), where
 * slack s counts ticks without progress so far, so progress = t + 1 - s. Because the
 * job must finish by the deadline, s never exceeds S = deadlineTicks - workTicks, which
 * bounds the table to (2Z(d+1) + 1) x (S+1) per tick instead of one row per progress
 * value. Entering a mode by a switch costs the cheapest state of any *other* mode at the
 * same slack (restarting the same mode in place is never better than continuing it).
 * Idle costs nothing, so it is just a shift of that minimum by one unit of slack.
 *
 * With a flex-start tier, a flex-start mode is entered only at a tick where a request is
 * granted (the optimum knows the grants: it asks exactly then, or waits idle for them) and
 * then runs unpreempted; the DP is otherwise the same, so it stays exact, and a lower
 * bound for every online policy (which must ask before it knows, and wait).
 */
import { type Problem, canEnter, modeCount, priceAt } from './problem';
import { modeChar } from './schedule';

export interface OptimalRun {
  cost: number;
  finishTick: number;
  schedule: string;
}

interface Layout {
  modes: number;
  /** Counter values per non-idle mode: 1..d+1. */
  levels: number;
  width: number;
  states: number;
}

const stateId = (l: Layout, mode: number, level: number) => (mode === 0 ? 0 : 1 + (mode - 1) * l.levels + (level - 1));
const modeOfState = (l: Layout, id: number) => (id === 0 ? 0 : 1 + Math.floor((id - 1) / l.levels));

/** Best and second-best-by-mode value at each slack, with the states that hold them. */
function entryMinima(l: Layout, v: Float64Array, best: Float64Array, bestId: Int32Array, second: Float64Array, secondId: Int32Array): void {
  best.fill(Infinity);
  second.fill(Infinity);
  for (let id = 0; id < l.states; id++) {
    const mode = modeOfState(l, id);
    const row = id * l.width;
    for (let s = 0; s < l.width; s++) {
      const x = v[row + s];
      if (x >= second[s]) continue;
      if (x < best[s]) {
        if (modeOfState(l, bestId[s]) !== mode) {
          second[s] = best[s];
          secondId[s] = bestId[s];
        }
        best[s] = x;
        bestId[s] = id;
      } else if (modeOfState(l, bestId[s]) !== mode) {
        second[s] = x;
        secondId[s] = id;
      }
    }
  }
}

export function optimal(p: Problem): OptimalRun | undefined {
  const d = p.changeoverTicks;
  const T = p.deadlineTicks;
  const S = T - p.workTicks;
  if (S < d) return undefined;
  const modes = modeCount(p);
  const l: Layout = { modes, levels: d + 1, width: S + 1, states: 1 + (modes - 1) * (d + 1) };
  let v = new Float64Array(l.states * l.width).fill(Infinity);
  let next = new Float64Array(l.states * l.width);
  v[0] = 0; // before tick 0: idle, no slack used
  const best = new Float64Array(l.width);
  const second = new Float64Array(l.width);
  const bestId = new Int32Array(l.width);
  const secondId = new Int32Array(l.width);
  // Back-pointers: the entry state per (tick, slack, best|second), and whether a
  // productive state came from the already-productive level (1) or the last warm-up level (0).
  const entryFrom = new Int32Array(T * l.width * 2);
  const stayedWarm = new Uint8Array(T * modes * l.width);
  const prices = new Float64Array(modes);
  let answer: { cost: number; t: number; id: number; s: number } | undefined;

  for (let t = 0; t < T; t++) {
    entryMinima(l, v, best, bestId, second, secondId);
    entryFrom.set(bestId, (t * 2) * l.width);
    entryFrom.set(secondId, (t * 2 + 1) * l.width);
    next.fill(Infinity);
    for (let s = 0; s + 1 < l.width; s++) next[s + 1] = best[s]; // idle
    for (let m = 1; m < modes; m++) prices[m] = priceTick(p, m, t);
    for (let m = 1; m < modes; m++) {
      const c = prices[m];
      if (!Number.isFinite(c)) continue;
      stepMode(l, d, m, c, canEnter(p, m, t), v, next, best, bestId, second, stayedWarm, (t * modes + m) * l.width);
    }
    const done = finished(l, p, t, next);
    if (done !== undefined && done.cost < (answer?.cost ?? Infinity)) answer = done;
    [v, next] = [next, v];
  }
  if (answer === undefined) return undefined;
  return { cost: answer.cost, finishTick: answer.t, schedule: backtrack(l, p, answer, entryFrom, stayedWarm) };
}

function priceTick(p: Problem, mode: number, t: number): number {
  return priceAt(p, mode, t) * p.tickHours;
}

function stepMode(l: Layout, d: number, m: number, c: number, enterable: boolean, v: Float64Array, next: Float64Array, best: Float64Array, bestId: Int32Array, second: Float64Array, stayedWarm: Uint8Array, warmRow: number): void {
  const entry = (s: number) => (!enterable ? Infinity : modeOfState(l, bestId[s]) === m ? second[s] : best[s]);
  const row = (level: number) => stateId(l, m, level) * l.width;
  const top = row(d + 1);
  if (d === 0) {
    for (let s = 0; s < l.width; s++) next[top + s] = Math.min(entry(s), v[top + s]) + c;
    for (let s = 0; s < l.width; s++) stayedWarm[warmRow + s] = v[top + s] < entry(s) ? 1 : 0;
    return;
  }
  const first = row(1);
  for (let s = 0; s + 1 < l.width; s++) next[first + s + 1] = entry(s) + c;
  for (let level = 2; level <= d; level++) {
    const from = row(level - 1);
    const to = row(level);
    for (let s = 0; s + 1 < l.width; s++) next[to + s + 1] = v[from + s] + c;
  }
  const warm = row(d);
  for (let s = 0; s < l.width; s++) {
    const stay = v[top + s];
    const arrive = v[warm + s];
    stayedWarm[warmRow + s] = stay < arrive ? 1 : 0;
    next[top + s] = Math.min(stay, arrive) + c;
  }
}

/** States that just completed the work: record the cheapest, and stop them there. */
function finished(l: Layout, p: Problem, t: number, next: Float64Array): { cost: number; t: number; id: number; s: number } | undefined {
  const s = t + 1 - p.workTicks;
  if (s < 0 || s >= l.width) return undefined;
  let found: { cost: number; t: number; id: number; s: number } | undefined;
  for (let id = 0; id < l.states; id++) {
    const x = next[id * l.width + s];
    if (x < (found?.cost ?? Infinity)) found = { cost: x, t, id, s };
  }
  // A finished job stops paying; its states must not run on as if more work remained.
  for (let id = 0; id < l.states; id++) next[id * l.width + s] = Infinity;
  return found;
}

function backtrack(l: Layout, p: Problem, end: { t: number; id: number; s: number }, entryFrom: Int32Array, stayedWarm: Uint8Array): string {
  const d = p.changeoverTicks;
  const chars: string[] = [];
  let { id, s } = end;
  for (let t = end.t; t >= 0; t--) {
    const mode = modeOfState(l, id);
    chars.push(modeChar(p, mode));
    const level = mode === 0 ? 0 : id - stateId(l, mode, 1) + 1;
    const entered = (slack: number) => {
      const bestAt = entryFrom[t * 2 * l.width + slack];
      return modeOfState(l, bestAt) === mode ? entryFrom[(t * 2 + 1) * l.width + slack] : bestAt;
    };
    if (mode === 0) [id, s] = [entryFrom[t * 2 * l.width + s - 1], s - 1];
    else if (level === d + 1 && d === 0) id = stayedWarm[(t * l.modes + mode) * l.width + s] === 1 ? id : entered(s);
    else if (level === d + 1) id = stayedWarm[(t * l.modes + mode) * l.width + s] === 1 ? id : stateId(l, mode, d);
    else if (level === 1) [id, s] = [entered(s - 1), s - 1];
    else [id, s] = [stateId(l, mode, level - 1), s - 1];
  }
  return chars.reverse().join('');
}
