/**
 * "Informed-online" references for the benchmark (`--hindsight`): a two-threshold online
 * policy family, with its thresholds chosen in hindsight
 * - per window (`threshold-hindsight`): no rule of this family, however it picks its
 *   thresholds from what it has seen, can beat this on average;
 * - once for all windows (`threshold-best-fixed`): the best a single pair tuned to the
 *   trace file does - what a policy with constants fitted to the file would get.
 * The distance between the two is what knowing each window's outage and run lengths is
 * worth to this family.
 *
 * The family (every rule is online; only the choice of thresholds sees the future):
 * - on spot: stay while it has capacity; when preempted or idle, spot in the zone with
 *   capacity that has held longest (cheapest first);
 * - no capacity anywhere: wait until the outage has lasted `waitTicks`, then on-demand;
 * - on on-demand: back to spot once some zone's capacity has held `holdTicks`
 *   (`Infinity`: never);
 * - the shared deadline safety net.
 */
import { type Action, ActionKind, idle, isAvailable, onDemandAction, type OnlinePolicy, withSafetyNet } from '../../workflows/policy';
import { type Problem } from './problem';
import { simulate } from './simulate';

interface ThresholdState {
  /** Per zone: ticks its current spot capacity has held (0 when it has none). */
  upTicks: Record<string, number>;
  /** Ticks since some zone last had capacity. */
  outageTicks: number;
}

export function thresholdPolicy(waitTicks: number, holdTicks: number): OnlinePolicy<ThresholdState> {
  return {
    name: `threshold(${waitTicks},${holdTicks})`,
    initialState: () => ({ upTicks: {}, outageTicks: 0 }),
    decide(state, obs) {
      const upTicks = Object.fromEntries(obs.zones.map((z) => [z.zone, isAvailable(z) ? (state.upTicks[z.zone] ?? 0) + 1 : 0]));
      const open = obs.zones.filter(isAvailable).sort((a, b) => a.spotPrice - b.spotPrice || upTicks[b.zone] - upTicks[a.zone]);
      const outageTicks = open.length === 0 ? state.outageTicks + 1 : 0;
      const next = { upTicks, outageTicks };
      let action: Action;
      if (obs.current.kind === ActionKind.Spot) action = obs.current;
      else if (obs.current.kind === ActionKind.OnDemand) {
        const held = open.find((z) => upTicks[z.zone] > holdTicks);
        action = held === undefined ? obs.current : { kind: ActionKind.Spot, zone: held.zone };
      } else if (open.length > 0) action = { kind: ActionKind.Spot, zone: open[0].zone };
      else action = outageTicks > waitTicks ? onDemandAction(obs) : idle;
      return { action: withSafetyNet(obs, action), state: next };
    },
  };
}

/** Every wait up to 16 ticks, then steps of a quarter more, up to all the slack. */
function waitGrid(slackTicks: number): number[] {
  const grid: number[] = [];
  for (let w = 0; w <= slackTicks; w = w < 16 ? w + 1 : Math.ceil(w * 1.25)) grid.push(w);
  if (grid[grid.length - 1] !== slackTicks) grid.push(slackTicks);
  return grid;
}

/** A pair of thresholds in changeovers (d), the unit that carries across grids and d. */
export interface ThresholdPair {
  waitChangeovers: number;
  holdChangeovers: number;
}

/** The pair in whole ticks of a problem whose changeover is `changeoverTicks` long. */
export function pairPolicy(pair: ThresholdPair, changeoverTicks: number): OnlinePolicy<ThresholdState> {
  return thresholdPolicy(Math.round(pair.waitChangeovers * changeoverTicks), Math.round(pair.holdChangeovers * changeoverTicks));
}

const HOLD_GRID = [0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 36, 48, Infinity];

export interface ThresholdRun {
  waitTicks: number;
  holdTicks: number;
  /** Infinity when the deadline was missed (the safety net makes that rare). */
  cost: number;
}

/** Every pair of the grid on one window; the grid depends only on the slack, so it is the same for every window of a run. */
export function thresholdRuns(p: Problem): ThresholdRun[] {
  const runs: ThresholdRun[] = [];
  for (const waitTicks of waitGrid(p.deadlineTicks - p.workTicks)) {
    for (const holdTicks of HOLD_GRID) {
      const run = simulate(p, thresholdPolicy(waitTicks, holdTicks));
      runs.push({ waitTicks, holdTicks, cost: run.deadlineMet ? run.cost : Infinity });
    }
  }
  return runs;
}

/** The pair with the lowest mean cost / optimum over all windows, given each window's `thresholdRuns` and optimum. */
export function bestFixedPair(runsPerWindow: ThresholdRun[][], optimalCosts: number[]): number {
  let best = 0;
  let bestMean = Infinity;
  for (let k = 0; k < runsPerWindow[0].length; k++) {
    const mean = runsPerWindow.reduce((sum, runs, w) => sum + runs[k].cost / optimalCosts[w], 0) / runsPerWindow.length;
    if (mean < bestMean) [best, bestMean] = [k, mean];
  }
  return best;
}
