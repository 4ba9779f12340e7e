/** Whose run this is. */
import type { RunSpec } from '../spec';
import { DEFAULT_TEAM } from '../teams/rules';
import type { RunState } from './state';

/**
 * The run's team as it is charged: the team its ledger named when it asked (with a
 * namespace per team, the run's namespace, whatever its spec says), else the spec's.
 * Undefined for a run of no team (the default team names none).
 */
export function runTeamOf(state: RunState, spec: RunSpec): string | undefined {
  const charged = state.admission?.team;
  return charged !== undefined && charged !== DEFAULT_TEAM ? charged : spec.labels.team;
}
