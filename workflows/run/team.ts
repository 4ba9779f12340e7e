/** Whose run this is. */
import type { RunState } from './state';

/**
 * The run's team: the namespace it executes in, in every tenancy mode, which is the team
 * its ledger charges (the askAdmission activity reads it from the server's record of the
 * caller and answers it). Never the spec's `labels.team`, which is only checked. A state
 * that does not know its namespace (kept before it did) has the team its ledger answered,
 * if any. Known from the run's first step, so what it shows as its team never changes.
 */
export function runTeamOf(state: RunState): string | undefined {
  return state.namespace ?? state.admission?.team;
}
