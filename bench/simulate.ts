/**
 * Replays a trace window against an online policy, tick by tick, showing it only what
 * the real system could know at that tick (see README: every zone is probed each tick).
 */
import { type Action, ActionKind, type Observation, type OnlinePolicy } from '../workflows/policy/types';
import { IDLE, type Problem, isSpotMode, priceAt, zoneOfMode } from './problem';
import { modeChar } from './schedule';

export interface PolicyRun {
  cost: number;
  deadlineMet: boolean;
  /** -1 when the job did not finish within the window. */
  finishTick: number;
  schedule: string;
  preemptions: number;
}

function actionOf(p: Problem, mode: number): Action {
  if (mode === IDLE) return { kind: ActionKind.Idle };
  const zone = p.zones[zoneOfMode(p, mode)];
  return isSpotMode(p, mode) ? { kind: ActionKind.Spot, zone } : { kind: ActionKind.OnDemand, zone };
}

function modeOf(p: Problem, action: Action): number {
  if (action.kind === ActionKind.Idle) return IDLE;
  const z = p.zones.indexOf(action.zone);
  if (z < 0) throw new Error(`policy chose unknown zone ${action.zone}`);
  return action.kind === ActionKind.Spot ? z + 1 : z + 1 + p.zones.length;
}

function observe(p: Problem, t: number, current: number, inMode: number, progress: number): Observation {
  const h = p.tickHours;
  return {
    nowHours: t * h,
    remainingWorkHours: (p.workTicks - progress) * h,
    hoursUntilDeadline: (p.deadlineTicks - t) * h,
    changeoverHours: p.changeoverTicks * h,
    stepHours: h,
    current: actionOf(p, current),
    changeoverRemainingHours: current === IDLE ? 0 : Math.max(0, p.changeoverTicks - inMode) * h,
    zones: p.zones.map((zone, z) => ({
      zone,
      spotAvailable: p.available[z][t] === 1,
      spotPrice: p.spotPrice[z][t],
      onDemandPrice: p.onDemandPrice[z],
    })),
  };
}

export function simulate<S>(p: Problem, policy: OnlinePolicy<S>): PolicyRun {
  let state = policy.initialState();
  let mode = IDLE;
  let inMode = 0;
  let progress = 0;
  let cost = 0;
  let preemptions = 0;
  let schedule = '';
  for (let t = 0; t < p.deadlineTicks; t++) {
    // Capacity lost at this tick preempts a running spot instance before the policy looks.
    if (isSpotMode(p, mode) && p.available[zoneOfMode(p, mode)][t] === 0) {
      mode = IDLE;
      preemptions++;
    }
    const decision = policy.decide(state, observe(p, t, mode, inMode, progress));
    state = decision.state;
    let next = modeOf(p, decision.action);
    // A launch into a zone without capacity fails: the tick passes idle and unpaid.
    if (!Number.isFinite(priceAt(p, next, t))) next = IDLE;
    inMode = next !== IDLE && next === mode ? inMode + 1 : 1;
    mode = next;
    schedule += modeChar(p, mode);
    if (mode === IDLE) continue;
    cost += priceAt(p, mode, t) * p.tickHours;
    if (inMode > p.changeoverTicks) progress++;
    if (progress === p.workTicks) return { cost, deadlineMet: true, finishTick: t, schedule, preemptions };
  }
  return { cost, deadlineMet: false, finishTick: -1, schedule, preemptions };
}
