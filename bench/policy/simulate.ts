/**
 * Replays a trace window against an online policy, tick by tick, showing it what the
 * chosen view lets it know at that tick (README: "What a policy sees"):
 * - `full`: every zone's spot capacity at every tick (as if each were probed each tick);
 * - `live`: what a real run learns - its own instance, its failed launches, its own
 *   preemptions - through the same rule the workflow uses (workflows/policy/live-view.ts);
 * - `fleet`: the live view plus a random share of the zones seen each tick by other runs.
 */
import { type Action, ActionKind, liveZones, type Observation, type OnlinePolicy, type Sighting, type StatsTable, type ZoneObservation } from '../../workflows/policy';
import { seededRandom } from '../../workflows/api';
import { IDLE, type Problem, canEnter, isFlexMode, isSpotMode, priceAt, zoneOfMode } from './problem';
import { modeChar } from './schedule';

export const View = { Full: 'full', Live: 'live', Fleet: 'fleet' } as const;
export type View = (typeof View)[keyof typeof View];

export interface ViewOptions {
  view: View;
  /** Share of a tick a failed launch from idle costs (1: the tick is lost); the policy is asked again within the tick until a whole one is spent. */
  probeFraction: number;
  /** Fleet view: chance that another run sees a given zone at a given tick. */
  fleetFraction: number;
  /** Seeds the fleet's looks (per window, so every policy sees the same ones). */
  fleetSeed: number;
  /** Zone statistics from before the window (warm memory); none for cold. */
  memory?: StatsTable;
}

export const FULL_VIEW: ViewOptions = { view: View.Full, probeFraction: 1, fleetFraction: 0, fleetSeed: 0 };

export interface PolicyRun {
  cost: number;
  deadlineMet: boolean;
  /** -1 when the job did not finish within the window. */
  finishTick: number;
  schedule: string;
  preemptions: number;
  /** Launches into a zone without capacity. */
  failedLaunches: number;
  /** Flex-start requests made, and those whose wait window ended without capacity. */
  flexRequests: number;
  flexExpired: number;
}

function actionOf(p: Problem, mode: number): Action {
  if (mode === IDLE) return { kind: ActionKind.Idle };
  const zone = p.zones[zoneOfMode(p, mode)];
  if (isFlexMode(p, mode)) return { kind: ActionKind.FlexStart, zone };
  return isSpotMode(p, mode) ? { kind: ActionKind.Spot, zone } : { kind: ActionKind.OnDemand, zone };
}

function modeOf(p: Problem, action: Action): number {
  if (action.kind === ActionKind.Idle) return IDLE;
  const z = p.zones.indexOf(action.zone);
  if (z < 0) throw new Error(`policy chose unknown zone ${action.zone}`);
  if (action.kind === ActionKind.FlexStart) {
    if (p.flex === undefined) throw new Error(`policy chose flex-start in ${action.zone}, which this benchmark does not offer`);
    return z + 1 + 2 * p.zones.length;
  }
  return action.kind === ActionKind.Spot ? z + 1 : z + 1 + p.zones.length;
}

function zonesSeen(p: Problem, t: number, current: number, view: View, sightings: readonly Sighting[]): ZoneObservation[] {
  const flex = p.flex;
  const quotes = p.zones.map((zone, z) => ({
    zone,
    spotPrice: p.spotPrice[z][t],
    onDemandPrice: p.onDemandPrice[z],
    ...(flex ? { flexPrice: flex.price[z], flexWaitHours: flex.meanWaitHours[z] } : {}),
  }));
  if (view !== View.Full) return liveZones(quotes, actionOf(p, current), sightings);
  return quotes.map((q, z) => ({ ...q, spotAvailable: p.available[z][t] === 1 }));
}

function observe(p: Problem, t: number, current: number, inMode: number, progress: number, zones: ZoneObservation[]): Observation {
  const h = p.tickHours;
  return {
    nowHours: t * h,
    remainingWorkHours: (p.workTicks - progress) * h,
    hoursUntilDeadline: (p.deadlineTicks - t) * h,
    changeoverHours: p.changeoverTicks * h,
    stepHours: h,
    current: actionOf(p, current),
    changeoverRemainingHours: current === IDLE ? 0 : Math.max(0, p.changeoverTicks - inMode) * h,
    zones,
    ...(p.flex ? { flexStart: { maxWaitHours: p.flex.maxWaitHours, maxRunHours: p.flex.maxRunHours } } : {}),
  };
}

export function simulate<S>(p: Problem, policy: OnlinePolicy<S>, options: ViewOptions = FULL_VIEW): PolicyRun {
  let state = policy.initialState(options.memory);
  let mode = IDLE;
  let inMode = 0;
  let progress = 0;
  let cost = 0;
  let preemptions = 0;
  let failedLaunches = 0;
  let probeDebt = 0;
  let schedule = '';
  let sightings: Sighting[] = [];
  let flexRequests = 0;
  let flexExpired = 0;
  // A flex-start request waits (idle, unpaid, the policy not asked) until granted or its window ends.
  let pending: { mode: number; untilTick: number } | undefined;
  const fleet = seededRandom(options.fleetSeed);
  for (let t = 0; t < p.deadlineTicks; t++) {
    // Capacity lost at this tick preempts a running spot instance before the policy looks.
    if (isSpotMode(p, mode) && p.available[zoneOfMode(p, mode)][t] === 0) {
      sightings.push({ zone: p.zones[zoneOfMode(p, mode)], available: false });
      mode = IDLE;
      preemptions++;
    }
    if (options.view === View.Fleet) {
      p.zones.forEach((zone, z) => fleet() < options.fleetFraction && sightings.push({ zone, available: p.available[z][t] === 1, byOthers: true }));
    }
    let next = IDLE;
    const waiting = pending !== undefined && t < pending.untilTick;
    if (waiting && canEnter(p, pending!.mode, t)) [next, pending] = [pending!.mode, undefined];
    if (!waiting && pending !== undefined) {
      flexExpired++;
      pending = undefined;
    }
    while (!waiting) {
      const decision = policy.decide(state, observe(p, t, mode, inMode, progress, zonesSeen(p, t, mode, options.view, sightings)));
      sightings = [];
      state = decision.state;
      next = modeOf(p, decision.action);
      if (isFlexMode(p, next) && next !== mode) {
        // A new request: granted now, or the run waits for it (any instance it ran is released).
        flexRequests++;
        if (!canEnter(p, next, t)) [pending, next] = [{ mode: next, untilTick: t + p.flex!.maxWaitTicks }, IDLE];
        break;
      }
      if (Number.isFinite(priceAt(p, next, t))) break;
      // A launch into a zone without capacity fails and is seen as such. A running
      // instance runs on; from idle the probe's time is spent, and once a whole tick is
      // spent that tick passes idle and unpaid (otherwise the policy is asked again).
      failedLaunches++;
      sightings.push({ zone: p.zones[zoneOfMode(p, next)], available: false });
      if (mode !== IDLE) {
        next = mode;
        break;
      }
      probeDebt += options.probeFraction;
      if (probeDebt >= 1 - 1e-9) {
        probeDebt -= 1;
        next = IDLE;
        break;
      }
    }
    inMode = next !== IDLE && next === mode ? inMode + 1 : 1;
    mode = next;
    schedule += modeChar(p, mode);
    if (mode === IDLE) continue;
    cost += priceAt(p, mode, t) * p.tickHours;
    if (inMode > p.changeoverTicks) progress++;
    if (progress === p.workTicks) return { cost, deadlineMet: true, finishTick: t, schedule, preemptions, failedLaunches, flexRequests, flexExpired };
  }
  return { cost, deadlineMet: false, finishTick: -1, schedule, preemptions, failedLaunches, flexRequests, flexExpired };
}
