/**
 * Reference: Uniform Progress ("Can't Be Late", NSDI 2024, section 5.2) confined to the
 * single zone whose spot price is lowest when the run starts. Its rules:
 * spot whenever available; when idle and behind the uniform-progress line ep(t) = C t / R,
 * on-demand; once on on-demand, stay until progress reaches ep(t + 2d); safety net.
 * Where its zone's capacity is not seen (the live view) it launches to find out whenever
 * it would take spot that was seen, except when idle and behind the line.
 */
import { withSafetyNet } from '../deadline';
import { type Action, ActionKind, type Observation, type OnlinePolicy, idle } from '../types';

export interface UniformProgressState {
  zone: string | null;
  /** C(0) and R(0), fixed at the first decision. */
  jobHours: number;
  deadlineHours: number;
  startHours: number;
}

function aheadOfLine(s: UniformProgressState, obs: Observation, leadHours: number): boolean {
  const elapsed = obs.nowHours - s.startHours + leadHours;
  const done = s.jobHours - obs.remainingWorkHours;
  return done >= (s.jobHours * elapsed) / s.deadlineHours;
}

function initialise(state: UniformProgressState, obs: Observation): UniformProgressState {
  if (state.zone !== null) return state;
  const zone = obs.zones.reduce((best, z) => (z.spotPrice < best.spotPrice ? z : best)).zone;
  return { zone, jobHours: obs.remainingWorkHours, deadlineHours: obs.hoursUntilDeadline, startHours: obs.nowHours };
}

function choose(s: UniformProgressState, obs: Observation, zone: string): Action {
  const onDemand: Action = obs.current.kind === ActionKind.OnDemand ? obs.current : { kind: ActionKind.OnDemand, zone };
  // Hysteresis: leaving on-demand early risks paying two changeovers for little spot time.
  if (obs.current.kind === ActionKind.OnDemand && !aheadOfLine(s, obs, 2 * obs.changeoverHours)) return onDemand;
  const here = obs.zones.find((z) => z.zone === zone);
  if (here?.spotAvailable === true) return { kind: ActionKind.Spot, zone };
  const ahead = aheadOfLine(s, obs, 0);
  // Not seen (the live view): a launch finds out; a failure costs what a wait would.
  if (here?.spotAvailable === 'unknown' && (ahead || obs.current.kind === ActionKind.OnDemand)) return { kind: ActionKind.Spot, zone };
  return ahead ? idle : onDemand;
}

export const uniformProgressPolicy: OnlinePolicy<UniformProgressState> = {
  name: 'uniform-progress',
  initialState: () => ({ zone: null, jobHours: 0, deadlineHours: 0, startHours: 0 }),
  decide(state, obs) {
    const s = initialise(state, obs);
    const zone = s.zone ?? obs.zones[0].zone;
    return { action: withSafetyNet(obs, choose(s, obs, zone), zone), state: s };
  },
};
