/**
 * The closed set of ways a run or one of its steps can fail. Each provider translates
 * its API's own errors into these once, at its boundary; the workflow and the retry
 * policies speak only these names.
 */
import { ApplicationFailure } from '@temporalio/common';
import { causeChain } from './causes';

export const FailureType = {
  /** The run spec is wrong; nothing was created. Never retried. */
  InvalidSpec: 'InvalidSpec',
  /** The zone has no capacity of that kind right now; try the next offer. */
  Stockout: 'Stockout',
  /**
   * A flex-start (DWS) request found no capacity within its wait window
   * (`requestValidForDuration`): GCE failed the create. Not a spot stockout; try the next choice.
   */
  FlexStartWaitExpired: 'FlexStartWaitExpired',
  /**
   * The project's quota does not allow the request in that region; try another region. Also
   * a run needing more GPUs than its team may ever hold at once (workflows/teams).
   */
  QuotaExceeded: 'QuotaExceeded',
  /** The provider reclaimed the spot capacity; resume elsewhere from the last checkpoint. */
  Preempted: 'Preempted',
  /** The training command exited non-zero. */
  UserCodeFailed: 'UserCodeFailed',
  /**
   * Spending more would exceed the run's budget, or starting the run would exceed its
   * team's budget for the period (workflows/teams: the message names team, period and amounts).
   */
  BudgetExceeded: 'BudgetExceeded',
  /** The run can no longer finish before its deadline (or its maximum duration). */
  DeadlineMissed: 'DeadlineMissed',
  /** Every acceptable offer failed and retrying cannot help (e.g. nothing matches). */
  NoCapacity: 'NoCapacity',
  /** A resource with our idempotent name exists but belongs to another run or attempt. */
  ResourceConflict: 'ResourceConflict',
  /** The run's GPUs stayed below monitoring.minGpuUtilisation for monitoring.idleWindow (idleAction "stop"). */
  GpuIdle: 'GpuIdle',
  /** A setup command exited non-zero: the same on every VM, so the run ends (its log holds the command's output). */
  SetupFailed: 'SetupFailed',
  /** The container image cannot be run: it cannot be pulled, or the VM has no container runtime. */
  ImageUnavailable: 'ImageUnavailable',
  /** The run's working directory could not be fetched, did not match its sha256, or did not unpack. */
  WorkdirUnavailable: 'WorkdirUnavailable',
  /**
   * The checks before the run (activities/check, `sterna check`) found what makes it fail
   * whatever it tries (a zero GPU quota, a missing bucket...): nothing was created.
   */
  ChecksFailed: 'ChecksFailed',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/** Failure types an activity retry can never fix: listed in every retry policy. */
export const nonRetryableFailureTypes: FailureType[] = [
  FailureType.InvalidSpec,
  FailureType.Stockout,
  FailureType.FlexStartWaitExpired,
  FailureType.QuotaExceeded,
  FailureType.Preempted,
  FailureType.ResourceConflict,
];

export function failure(type: FailureType, message: string, details?: unknown): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true, details: details === undefined ? undefined : [details] });
}

const NAMED = new Set<string>(Object.values(FailureType));

/**
 * The named failure somewhere in an error's cause chain (an activity's ApplicationFailure
 * arrives wrapped in an ActivityFailure), with its own message; undefined for anything
 * else (cancellation, timeouts, bugs).
 */
export function namedFailureOf(err: unknown): { type: FailureType; message: string } | undefined {
  const link = causeChain(err).find((l): l is ApplicationFailure => l instanceof ApplicationFailure && NAMED.has(l.type ?? ''));
  return link && { type: link.type as FailureType, message: link.message };
}
