/**
 * Recovery: after a preemption or a failed training command, place again or stop. Pure.
 */
import { FailureType } from '../failures';
import type { RunSpec } from '../spec';
import type { Attempt, RunState } from './state';

export type RecoveryDecision = { retry: true } | { retry: false; failure: FailureType; message: string; details?: unknown };

/** Called once per preemption, after it is counted. */
export function afterPreemption(state: RunState, spec: RunSpec): RecoveryDecision {
  if (state.preemptions > spec.recovery.maxPreemptions) {
    return { retry: false, failure: FailureType.Preempted, message: `preempted ${state.preemptions} times, more than recovery.maxPreemptions = ${spec.recovery.maxPreemptions}` };
  }
  return { retry: true };
}

/** Called once per failed attempt, before a restart is counted. */
export function afterFailure(state: RunState, spec: RunSpec, attempt: Attempt): RecoveryDecision {
  const exitCode = attempt.exitCode ?? 1;
  const noRetry = spec.recovery.noRetryExitCodes.includes(exitCode);
  if (noRetry || state.restarts >= spec.recovery.maxRestartsOnError) {
    const why = noRetry ? `exit code ${exitCode} is listed in recovery.noRetryExitCodes` : `after ${state.restarts} restarts (recovery.maxRestartsOnError)`;
    return { retry: false, failure: FailureType.UserCodeFailed, message: `training failed with ${attempt.reason ?? `exit code ${exitCode}`}; not retried: ${why}`, details: { exitCode } };
  }
  return { retry: true };
}
