/**
 * How an attempt ended, and everything that follows from it, as complete tables: one
 * vocabulary (AttemptOutcome), no chains of ternaries. Pure.
 */
import { FailureType } from '../failures';
import { ZoneEventKind } from '../placement';
import { AttemptOutcome, TimelineKind, type Ending } from './state';

/** What the run does once the attempt is released. */
export const Next = {
  /** The run is done. */
  Complete: 'complete',
  /** Try the next offer of this placement round. */
  NextOffer: 'next-offer',
  /** Count a preemption and place again, resuming from the last checkpoint. */
  Resume: 'resume',
  /** Place again, resuming from the last checkpoint; nothing is counted (a planned end, not a loss). */
  Move: 'move',
  /** Count a restart (or fail, per recovery) and place again. */
  Restart: 'restart',
  /** Place again now (the policy asked for it). */
  Place: 'place',
  /** Nothing: the run is stopping for another reason. */
  Stop: 'stop',
  /** The run fails with the ending's named failure: no new VM can change the outcome. */
  Fail: 'fail',
} as const;
export type Next = (typeof Next)[keyof typeof Next];

export interface EndingRule {
  /** What the zone learns (fed to placement's cooldown and the policy). */
  zoneEvent?: ZoneEventKind;
  next: Next;
  /** Next.Fail: the named failure the run ends with. */
  failure?: FailureType;
  timeline: (typeof TimelineKind)[keyof typeof TimelineKind];
  /**
   * Whether the run may place its next attempt while this one's release is still running.
   * Only where nothing of the attempt can still write: its guest is down (preempted,
   * stopped at its run duration or moved off), it exited, or its create failed. A switch
   * deletes a guest that is still training and writes its final checkpoint in the stop
   * grace, so the next attempt waits for it; the run's end waits for every release.
   */
  releaseBeside: boolean;
}

export const ENDINGS: Record<Ending, EndingRule> = {
  [AttemptOutcome.Completed]: { next: Next.Complete, timeline: TimelineKind.Completed, releaseBeside: false },
  [AttemptOutcome.Preempted]: { zoneEvent: ZoneEventKind.Preempted, next: Next.Resume, timeline: TimelineKind.Preempted, releaseBeside: true },
  [AttemptOutcome.Failed]: { next: Next.Restart, timeline: TimelineKind.AttemptFailed, releaseBeside: true },
  [AttemptOutcome.Stockout]: { zoneEvent: ZoneEventKind.Stockout, next: Next.NextOffer, timeline: TimelineKind.AttemptFailed, releaseBeside: true },
  // The zone's flex-start pool had nothing within the wait: it cools down for flex-start only.
  [AttemptOutcome.WaitExpired]: { zoneEvent: ZoneEventKind.Stockout, next: Next.NextOffer, timeline: TimelineKind.AttemptFailed, releaseBeside: true },
  [AttemptOutcome.RunDurationReached]: { next: Next.Move, timeline: TimelineKind.RunDurationReached, releaseBeside: true },
  [AttemptOutcome.QuotaExceeded]: { zoneEvent: ZoneEventKind.Quota, next: Next.NextOffer, timeline: TimelineKind.AttemptFailed, releaseBeside: true },
  [AttemptOutcome.Conflict]: { next: Next.NextOffer, timeline: TimelineKind.AttemptFailed, releaseBeside: true },
  [AttemptOutcome.Switched]: { next: Next.Place, timeline: TimelineKind.Switching, releaseBeside: false },
  [AttemptOutcome.Stopped]: { next: Next.Stop, timeline: TimelineKind.Stopped, releaseBeside: false },
  // The command's program is missing or cannot execute: the same on every VM, so no restart.
  [AttemptOutcome.NotRunnable]: { next: Next.Fail, failure: FailureType.UserCodeFailed, timeline: TimelineKind.AttemptFailed, releaseBeside: true },
};

/** A provision that failed with one of these named failures ended its attempt so. */
export const PROVISION_FAILURES: Partial<Record<FailureType, Ending>> = {
  [FailureType.Stockout]: AttemptOutcome.Stockout,
  [FailureType.FlexStartWaitExpired]: AttemptOutcome.WaitExpired,
  [FailureType.QuotaExceeded]: AttemptOutcome.QuotaExceeded,
  [FailureType.Preempted]: AttemptOutcome.Preempted,
  [FailureType.ResourceConflict]: AttemptOutcome.Conflict,
};

/** The agent's own failures (sterna-agent.sh exit codes), before the trainer ran. */
export const AGENT_FAILURES: Readonly<Record<number, string>> = {
  64: 'no command given to the agent',
  65: 'a dataset path is not relative, or the agent\'s inputs are malformed',
  66: 'staging a dataset failed',
  67: 'the checkpoint to resume from is missing or does not match its sha256',
  68: 'a secret could not be read in the VM (the agent\'s log says which and why)',
  70: 'the agent could not create its work directory',
};

/**
 * Exit codes of the training command that say it never ran (the shell's and env's
 * conventions, which the agent's `exec env -- <command>` keeps): the same on any VM.
 * Each ends its attempt NotRunnable, and the run at once, with what to fix.
 */
export const NOT_RUNNABLE_EXITS: Readonly<Record<number, (program: string) => string>> = {
  126: (program) => `the training command's program ${program} cannot execute (exit code 126: not executable, or not a program this VM can run); make it executable (chmod +x) or run it through its interpreter in command, e.g. ["python", "train.py"]`,
  127: (program) => `the training command's program ${program} was not found (exit code 127); install it in the VM's image, stage it with datasets, or fix command[0]`,
};

export function exitReason(exitCode: number): string {
  return AGENT_FAILURES[exitCode] ?? `exit code ${exitCode}`;
}
