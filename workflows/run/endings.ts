/**
 * How an attempt ended, and everything that follows from it, as one complete table: each
 * ending (state.ts `Ending`, the strings stored in run state) has one row naming its zone
 * event, zone-memory outcome, timeline kind, named failure and next step. The other
 * vocabularies are different facts (a timeline records more than endings, a failure type
 * also names spec errors, the zone memory hears from the fleet observer too), so they stay
 * their own sets and meet here, nowhere else. Pure.
 */
import { FailureType } from '../failures';
import { ZoneEventKind } from '../placement';
import { OutcomeKind } from '../zones/memory';
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

export interface EndingRow {
  /** What the run's own placement learns of the zone (its cooldown and the policy's view). */
  zoneEvent?: ZoneEventKind;
  /**
   * What the zone memory is told once the attempt is released (zones/from-run.ts).
   * `Released` is told only where the VM's running time is known; absent, nothing is told
   * (quota and name conflicts say nothing about a zone's capacity).
   */
  memory?: OutcomeKind;
  timeline: TimelineKind;
  /**
   * The named failure that spells this ending: a provision that fails with it ended its
   * attempt so (PROVISION_FAILURES); with Next.Fail, the failure the run ends with.
   */
  failure?: FailureType;
  next: Next;
  /**
   * Whether the run may place its next attempt while this one's release is still running.
   * Only where nothing of the attempt can still write: its guest is down (preempted,
   * stopped at its run duration or moved off), it exited, or its create failed. A switch
   * deletes a guest that is still training and writes its final checkpoint in the stop
   * grace, so the next attempt waits for it; the run's end waits for every release.
   */
  releaseBeside: boolean;
}

const A = AttemptOutcome;
const T = TimelineKind;
const Z = ZoneEventKind;
const M = OutcomeKind;
const F = FailureType;

/** Every ending's row: a `Record` over the closed set, so an ending without one does not compile. */
export const ENDINGS: Readonly<Record<Ending, EndingRow>> = {
  [A.Completed]: { memory: M.Released, timeline: T.Completed, next: Next.Complete, releaseBeside: false },
  [A.Preempted]: { zoneEvent: Z.Preempted, memory: M.Preempted, timeline: T.Preempted, failure: F.Preempted, next: Next.Resume, releaseBeside: true },
  [A.Failed]: { memory: M.Released, timeline: T.AttemptFailed, next: Next.Restart, releaseBeside: true },
  [A.Stockout]: { zoneEvent: Z.Stockout, memory: M.Stockout, timeline: T.AttemptFailed, failure: F.Stockout, next: Next.NextOffer, releaseBeside: true },
  // The zone's flex-start pool had nothing within the wait: it cools down for flex-start only
  // (the event's and the memory key's model is FLEX_START).
  [A.WaitExpired]: { zoneEvent: Z.Stockout, memory: M.Stockout, timeline: T.AttemptFailed, failure: F.FlexStartWaitExpired, next: Next.NextOffer, releaseBeside: true },
  [A.RunDurationReached]: { memory: M.Released, timeline: T.RunDurationReached, next: Next.Move, releaseBeside: true },
  [A.QuotaExceeded]: { zoneEvent: Z.Quota, timeline: T.AttemptFailed, failure: F.QuotaExceeded, next: Next.NextOffer, releaseBeside: true },
  [A.Conflict]: { timeline: T.AttemptFailed, failure: F.ResourceConflict, next: Next.NextOffer, releaseBeside: true },
  [A.Switched]: { memory: M.Released, timeline: T.Switching, next: Next.Place, releaseBeside: false },
  [A.Stopped]: { memory: M.Released, timeline: T.Stopped, next: Next.Stop, releaseBeside: false },
  // The command's program is missing or cannot execute: the same on every VM, so no restart.
  [A.NotRunnable]: { memory: M.Released, timeline: T.AttemptFailed, failure: F.UserCodeFailed, next: Next.Fail, releaseBeside: true },
  // What the agent could not prepare the same way on any VM: the run ends, naming it.
  [A.SetupFailed]: { memory: M.Released, timeline: T.AttemptFailed, failure: F.SetupFailed, next: Next.Fail, releaseBeside: true },
  [A.ImageUnavailable]: { memory: M.Released, timeline: T.AttemptFailed, failure: F.ImageUnavailable, next: Next.Fail, releaseBeside: true },
  [A.WorkdirUnavailable]: { memory: M.Released, timeline: T.AttemptFailed, failure: F.WorkdirUnavailable, next: Next.Fail, releaseBeside: true },
};

/** Every ending, in the table's order. */
export const ENDING_NAMES = Object.keys(ENDINGS) as Ending[];

/**
 * A provision that failed with one of these named failures ended its attempt so: the
 * table's failures, read backwards, but for the run's own (Next.Fail) failures, which no
 * provision raises.
 */
export const PROVISION_FAILURES: Readonly<Partial<Record<FailureType, Ending>>> = Object.fromEntries(
  ENDING_NAMES.filter((e) => ENDINGS[e].failure !== undefined && ENDINGS[e].next !== Next.Fail).map((e) => [ENDINGS[e].failure, e]),
);

/**
 * The agent's own exits (sterna-agent.sh, activities/agent/script.ts AgentExit), before the
 * trainer ran: why, and the ending when it is not `failed` (restarted within
 * recovery.maxRestartsOnError): what no other VM would do differently ends the run.
 */
export const AGENT_EXITS: Readonly<Record<number, { reason: string; ending?: Ending }>> = {
  64: { reason: 'no command given to the agent' },
  65: { reason: 'a dataset path is not relative, or the agent\'s inputs are malformed' },
  66: { reason: 'staging a dataset failed' },
  67: { reason: 'the checkpoint to resume from is missing or does not match its sha256' },
  68: { reason: 'a secret could not be read in the VM (the agent\'s log says which and why)' },
  69: { reason: 'the working directory could not be fetched, did not match its sha256, or did not unpack (the run\'s log says which)', ending: A.WorkdirUnavailable },
  70: { reason: 'the agent could not create its work directory' },
  71: { reason: 'a setup command failed', ending: A.SetupFailed },
  72: { reason: 'the container image could not be pulled: it does not exist, or the VM\'s service account may not read its registry', ending: A.ImageUnavailable },
  73: { reason: 'the VM has neither docker (with its daemon up) nor podman to run the image: use a VM image with one (GCE\'s Deep Learning VM images have docker)', ending: A.ImageUnavailable },
  74: { reason: 'the container runtime could not create or start the container (the run\'s log says why)' },
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
  return AGENT_EXITS[exitCode]?.reason ?? `exit code ${exitCode}`;
}
