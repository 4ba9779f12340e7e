/**
 * Schedules as strings, one character per tick: `-` idle, `a`.. spot in zones[0]..,
 * `A`.. on-demand there, `0`.. flex-start there. Evaluating a schedule is the single
 * definition of the cost model that the simulator and the optimum are checked against.
 */
import { IDLE, type Problem, canEnter, isFlexMode, isSpotMode, priceAt, zoneOfMode } from './problem';

const LETTERS = 'abcdefghijklmnopqrstuvwxyz';
const DIGITS = '0123456789';

export function modeChar(p: Problem, mode: number): string {
  if (mode === IDLE) return '-';
  const z = zoneOfMode(p, mode);
  if (isFlexMode(p, mode)) {
    if (z >= DIGITS.length) throw new Error(`flex-start schedules name at most ${DIGITS.length} zones`);
    return DIGITS[z];
  }
  const letter = LETTERS[z];
  return isSpotMode(p, mode) ? letter : letter.toUpperCase();
}

export function parseSchedule(p: Problem, schedule: string): number[] {
  return [...schedule].map((c) => {
    if (c === '-') return IDLE;
    const f = DIGITS.indexOf(c);
    if (f >= 0) {
      if (p.flex === undefined || f >= p.zones.length) throw new Error(`schedule character ${c} names no flex-start zone`);
      return f + 1 + 2 * p.zones.length;
    }
    const z = LETTERS.indexOf(c.toLowerCase());
    if (z < 0 || z >= p.zones.length) throw new Error(`schedule character ${c} names no zone`);
    return c === c.toLowerCase() ? z + 1 : z + 1 + p.zones.length;
  });
}

export interface Outcome {
  /** USD, changeover ticks included. */
  cost: number;
  progressTicks: number;
  /** The tick the last unit of work completed, or -1. */
  finishTick: number;
  deadlineMet: boolean;
  changeovers: number;
}

/** Cost and progress of running `modes` tick by tick; spot without capacity is an error. */
export function evaluate(p: Problem, modes: readonly number[]): Outcome {
  let cost = 0;
  let progressTicks = 0;
  let inMode = 0;
  let changeovers = 0;
  for (let t = 0; t < modes.length; t++) {
    const mode = modes[t];
    const price = priceAt(p, mode, t);
    if (!Number.isFinite(price)) throw new Error(`tick ${t}: spot in ${p.zones[zoneOfMode(p, mode)]} has no capacity`);
    inMode = mode !== IDLE && t > 0 && modes[t - 1] === mode ? inMode + 1 : 1;
    if (mode === IDLE) continue;
    if (inMode === 1 && !canEnter(p, mode, t)) throw new Error(`tick ${t}: no flex-start request in ${p.zones[zoneOfMode(p, mode)]} is granted then`);
    if (inMode === 1) changeovers++;
    cost += price * p.tickHours;
    if (inMode > p.changeoverTicks) progressTicks++;
    if (progressTicks === p.workTicks) return { cost, progressTicks, finishTick: t, deadlineMet: t < p.deadlineTicks, changeovers };
  }
  return { cost, progressTicks, finishTick: -1, deadlineMet: false, changeovers };
}

export function evaluateSchedule(p: Problem, schedule: string): Outcome {
  return evaluate(p, parseSchedule(p, schedule));
}
