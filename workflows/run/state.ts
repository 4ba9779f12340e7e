/**
 * The durable state of one training run. JSON-plain so it survives continue-as-new
 * unchanged. The reducers (machine.ts and the phases it calls) are its only writer: each
 * step returns a new, frozen state; views.ts reads it. Every slice of it is declared
 * here, so the modules that fill a slice import the state, never the other way round.
 */
import type { AutoState } from '../auto-policy';
import type { ZoneEvent } from '../placement';
import type { PriceStamp } from '../pricing-book/contract';
import type { ZoneMemory } from '../zones/memory';
import type { CheckpointRef, GpuReading, Offer, ProvisioningModel, ResourceRef } from '../types';

export const Phase = {
  Validating: 'validating',
  /** Waiting for its team to admit it (GPU quota, budget): teams/run-admission.ts. */
  Queued: 'queued',
  FindingCapacity: 'finding-capacity',
  Provisioning: 'provisioning',
  Staging: 'staging',
  Training: 'training',
  Recovering: 'recovering',
  Releasing: 'releasing',
  Completed: 'completed',
  Failed: 'failed',
  Cancelled: 'cancelled',
} as const;
export type Phase = (typeof Phase)[keyof typeof Phase];

/**
 * How an attempt ended: the one vocabulary for it, stored as these strings (running runs
 * carry them through continue-as-new). endings.ts `ENDINGS` is the one table from each
 * ending to its zone event, zone-memory outcome, timeline kind, named failure and next step.
 */
export const AttemptOutcome = {
  Running: 'running',
  Completed: 'completed',
  Preempted: 'preempted',
  Failed: 'failed',
  Stockout: 'stockout',
  /** A flex-start request's wait window ended without capacity (FlexStartWaitExpired). */
  WaitExpired: 'wait-expired',
  /** A flex-start VM reached its maxRunDuration: GCE stopped it; the run moves on from its last checkpoint. */
  RunDurationReached: 'run-duration-reached',
  QuotaExceeded: 'quota-exceeded',
  /** A resource that is not ours already had the attempt's name; it was left alone. */
  Conflict: 'conflict',
  /** The deadline-aware policy moved the run off this spot attempt to meet the deadline. */
  Switched: 'switched',
  /** Stopped by the run itself: cancelled, a limit reached, or handed over unfinished. */
  Stopped: 'stopped',
  /**
   * The training command could not be run at all (its program not found, or not
   * executable: exit 127 or 126, endings.ts NOT_RUNNABLE_EXITS): no other VM can change that.
   */
  NotRunnable: 'not-runnable',
  /** A setup command failed (agent exit 71): the same on every VM. */
  SetupFailed: 'setup-failed',
  /** The image could not be pulled, or the VM has no container runtime (agent exits 72, 73). */
  ImageUnavailable: 'image-unavailable',
  /** The workdir could not be fetched, checked or unpacked (agent exit 69). */
  WorkdirUnavailable: 'workdir-unavailable',
} as const;
export type AttemptOutcome = (typeof AttemptOutcome)[keyof typeof AttemptOutcome];
/** Every outcome but `running`: how an attempt can end. */
export type Ending = Exclude<AttemptOutcome, typeof AttemptOutcome.Running>;

export interface Attempt {
  attempt: number;
  ref: ResourceRef;
  offer: Offer;
  outcome: AttemptOutcome;
  /** ISO times the resource was RUNNING, from the provider: the ledger's basis. */
  startedAt?: string;
  stoppedAt?: string;
  resumedFromStep?: number;
  exitCode?: number;
  /** Why it failed, in words (the agent's own failures name their cause). */
  reason?: string;
  released: boolean;
  /**
   * True while its release runs beside the run's next steps (run/endings.ts `releaseBeside`);
   * `released` follows when it is done. Never carried across a continue-as-new.
   */
  releasing?: boolean;
  /**
   * True once the create has a definite answer (it ran, or failed with a named failure).
   * Until then a release must allow for a create still in flight landing late.
   */
  createSettled?: boolean;
  /** FLEX_START: the VM's `scheduling.maxRunDuration` (seconds), counted from when it starts running. */
  runDurationSeconds?: number;
  /** FLEX_START: when the request for capacity was made (ISO); it waits from then. */
  requestedAt?: string;
  /**
   * Its training as heard (run/progress.ts `noteTraining`): the first step heard and when
   * (epoch ms), then the steps trained to the last new step heard and the seconds between.
   */
  training?: { fromStep: number; fromMs: number; steps: number; seconds: number };
  /** FLEX_START: when the run asked the agent for its final checkpoint, to move before the cut (ISO; flex-cut.ts). */
  moveAskedAt?: string;
  /** The checkpoint interval the attempt's agent was last given, and why (run/live-interval.ts). */
  checkpointInterval?: AppliedInterval;
}

/** A checkpoint interval handed to an agent: at the attempt's start, or updated while it trains. */
export interface AppliedInterval {
  seconds: number;
  /** The zone's preemption rate and the checkpoint cost it was chosen from. */
  preemptionsPerHour: number;
  checkpointSeconds: number;
  /** Set once an update could not reach the VM: the attempt keeps this interval. */
  frozen?: string;
}

/** The closed set of things a run's timeline records; views and tests read `kind`. */
export const TimelineKind = {
  RunStarted: 'run-started',
  /** What the checks before the run found (run/machine.ts `checked`). */
  Checked: 'checked',
  Queued: 'queued',
  Admitted: 'admitted',
  /** Valid but probably a mistake (a secret-looking env name...): spec.ts `specWarnings`. */
  Warning: 'warning',
  Placing: 'placing',
  NoAcceptableOffer: 'no-acceptable-offer',
  PolicyChoice: 'policy-choice',
  PolicyWait: 'policy-wait',
  AttemptFailed: 'attempt-failed',
  Running: 'running',
  Staged: 'staged',
  Checkpoint: 'checkpoint',
  PreemptionNotice: 'preemption-notice',
  Preempted: 'preempted',
  /** A flex-start VM reached its maximum run duration (GCE's 7-day cap, or the run's deadline). */
  RunDurationReached: 'run-duration-reached',
  /** The run asked a flex-start attempt's agent for its final checkpoint, to move before the cut (flex-cut.ts). */
  MoveAsked: 'move-asked',
  Restarting: 'restarting',
  Switching: 'switching',
  Completed: 'completed',
  Released: 'released',
  LimitChanged: 'limit-changed',
  ContinuedAsNew: 'continued-as-new',
  Stopped: 'stopped',
  /** The GPUs stayed below monitoring.minGpuUtilisation for the window (gpu-util.ts). */
  GpuIdle: 'gpu-idle',
  /** The live attempt's checkpoint interval moved (run/live-interval.ts). */
  CheckpointInterval: 'checkpoint-interval',
  /** Where a dataset's bucket is, as the storage API said, or why it is unknown (run/data-placement.ts). */
  DataLocation: 'data-location',
  /** A failed attempt's VM kept for inspection (recovery.keepOnFailure), or why it could not be (run/keep.ts). */
  Kept: 'kept',
} as const;
export type TimelineKind = (typeof TimelineKind)[keyof typeof TimelineKind];

/** The longest caller identity a limit update may name (Temporal's own identities are far shorter). */
export const MAX_CALLER_LENGTH = 256;

/** Who changed a limit last: the caller's Temporal client identity, and the time (ISO). */
export interface SetBy {
  by: string;
  at: string;
}

export interface LimitsSetBy {
  budget?: SetBy;
  deadline?: SetBy;
}

export interface TimelineEvent {
  at: string;
  kind: TimelineKind;
  /** Human-readable, for the CLI and the web UI. */
  event: string;
  attempt?: number;
  zone?: string;
  step?: number;
  outcome?: AttemptOutcome;
  /** The policy's choice (policy-choice events). */
  model?: ProvisioningModel;
  /** What release found (released events). */
  released?: 'deleted' | 'absent' | 'not-ours';
  /**
   * Released events of a create that may still have been in flight: `landed-late`, the
   * resource appeared while release watched for it; `deadline-passed`, none appeared
   * before no create of it could land any more (ReleaseResult.createWatch).
   */
  createWatch?: 'landed-late' | 'deadline-passed';
  /** Who asked (limit-changed events from an update that named its caller). */
  by?: string;
}

/** The current placement round: the offers found and the ones tried since. */
export interface PlacementRound {
  offers: Offer[];
  /** `zone/model` keys tried in this round. */
  tried: string[];
}

export interface RunState {
  runId: string;
  /**
   * The Temporal namespace the run executes in (its workflow info, kept at each step): its
   * team, in every tenancy mode (docs/tenancy.md). Absent from states kept before it was.
   */
  namespace?: string;
  phase: Phase;
  startedAt: string;
  attempts: Attempt[];
  zoneEvents: ZoneEvent[];
  lastCheckpoint?: CheckpointRef;
  step?: number;
  preemptions: number;
  restarts: number;
  budgetUsd?: number;
  /** ISO time; absent means no deadline. */
  deadline?: string;
  /** Who set the budget and the deadline last by update, and when (absent: the spec's, or a caller that named no one). */
  limitsSetBy?: LimitsSetBy;
  timeline: TimelineEvent[];
  /** State of the deadline-aware pricing policy (workflows/policy), JSON-plain. */
  policyState?: AutoState;
  placement?: PlacementRound;
  /** Name of the attempt a preemption notice came for: it is draining, not lost. */
  notice?: string;
  /** Epoch ms of the last word about the live attempt (observer or look). */
  lastHeardAt?: number;
  /** Epoch ms of the fleet observer's last signal: while it speaks, looks are rare. */
  observerHeardAt?: number;
  /** How long the observer may stay silent, as its last signal said (seconds). */
  observerQuietSeconds?: number;
  /** When this run last asked for the observer (epoch ms). */
  observerAskedAt?: number;
  /** Epoch ms of the next look at capacity after a round found nothing acceptable. */
  capacityRetryAt?: number;
  /** Epoch ms the auto policy is asked again whether to leave spot. */
  policyCheckAt?: number;
  /** The price book behind the last round of offers (absent before the first, and in older runs). */
  prices?: RunPrices;
  /** The run's team admission (absent in runs from before teams, and until it asks). */
  admission?: RunAdmission;
  /** Set once the checks before the run answered (or could not): they are asked once, before anything else. */
  checked?: boolean;
  /** Regions whose data cache holds the run's datasets (run/data-placement.ts). */
  dataCachedRegions?: string[];
  /** The latest attempt's staging progress (run/data-placement.ts). */
  staging?: StagingProgress;
  /** Seconds one checkpoint costs, as the agent measured it, smoothed (run/checkpoint-interval.ts). */
  checkpointSeconds?: number;
  /** The notifications handed to delivery (run/notify.ts); absent in older runs. */
  notify?: NotifyMemory;
  /** The project's zone memory for the last round's zones, as read then (absent in older runs; workflows/zones). */
  zoneMemory?: ZoneMemory;
  /** The GPUs as the agent last reported them, and their average (gpu-util.ts). */
  gpu?: GpuState;
  /** The last line the live attempt printed, as its agent last published it, and when the run heard it (epoch ms; run/last-line.ts). */
  lastLine?: { attempt: number; text: string; atMs: number };
  /** The trainer's own report of its total steps (the spec's monitoring.totalSteps wins). */
  totalSteps?: number;
  /** Where the current attempt's step rate is measured from (progress.ts). */
  progressMark?: { attempt: number; step: number; atMs: number };
  /** Epoch ms the live attempt's checkpoint interval is looked at again (run/live-interval.ts). */
  intervalCheckAt?: number;
  /** Dataset buckets' locations from the storage API, or why each is unknown, by bucket (run/data-placement.ts). */
  bucketLocations?: Record<string, BucketLocation>;
  /** The failed attempt kept for inspection instead of released (recovery.keepOnFailure; run/keep.ts). */
  keep?: RunKeep;
}

/**
 * A failed attempt kept for inspection (run/keep.ts): asked when the run fails because of
 * it, then kept (labelled `sterna-keep-until`, left to the reaper) or, if that could not
 * be done, released like the others.
 */
export interface RunKeep {
  attempt: number;
  status: 'asked' | 'kept' | 'not-kept';
  /** Epoch ms it was asked to be kept until. */
  untilMs: number;
  /** When it is kept until, as labelled (its VM's own time limit may cut the keep short). */
  keptUntil?: string;
  /** How to reach it: `gcloud compute ssh ...` (or the emulator's equivalent). */
  reach?: string[];
  /** Why it was not kept. */
  problem?: string;
}

/** The latest attempt's staging progress, as its agent reported it (run/data-placement.ts). */
export interface StagingProgress {
  attempt: number;
  stagedBytes: number;
  reusedBytes?: number;
  totalBytes?: number;
  /** Epoch ms the attempt's staging was first seen, and of the latest figure. */
  firstAt: number;
  at: number;
}

/** The notifications handed to delivery, by key (run/notify.ts): each is sent once. */
export interface NotifyMemory {
  sent: string[];
}

/** The price book behind the last round of offers (run/prices.ts). */
export interface RunPrices {
  /** The price book's date of the last round of offers. */
  asOf: string;
  source: PriceStamp['source'];
  /** Set when the Billing Catalog could not be read and the prices are older or the bundled catalog's. */
  warning?: string;
  /** `zone accelerator machineType` of zones that offer the accelerator but have no price. */
  unpriced: string[];
  unpricedCount: number;
}

export type AdmissionStatus = 'asked' | 'queued' | 'admitted';

/** What a run holds about its team admission (run/admission.ts). */
export interface RunAdmission {
  /**
   * The team its ledger charges it to, as askAdmission answered: the namespace the run
   * executes in. Absent until the ledger has answered (runs continued from before this
   * may hold what their spec named).
   */
  team?: string;
  status: AdmissionStatus;
  /** Epoch ms of the last ask. */
  askedAt: number;
  /** Epoch ms of the first ask: the queue's age key. */
  firstAskedAt: number;
  position?: number;
  /** Whether the worker knows webhooks for the team (absent until told). */
  teamWebhooks?: boolean;
  /** Epoch ms the run last told its team what it has spent (run/effects.ts). */
  spendReportedAt?: number;
}

/** One bucket's location as the storage API gave it (`location`), or the reason it is unknown (`problem`). */
export interface BucketLocation {
  location?: string;
  problem?: string;
}

export interface GpuState extends GpuReading {
  /** The attempt that reported it, and when the run heard it (epoch ms). */
  attempt: number;
  atMs: number;
  /** Time-weighted utilisation while training: percent-seconds over seconds. */
  weightedPercentSeconds: number;
  sampledSeconds: number;
  /** Since when (epoch ms) every reading was below monitoring.minGpuUtilisation. */
  belowSinceMs?: number;
  /** The idle rule flagged the run (idleAction "flag"), until the GPUs are busy again. */
  idle?: boolean;
}

/** The workflow keeps only the most recent events; the full story is in the history. */
const TIMELINE_LIMIT = 200;

export function record(state: RunState, nowMs: number, entry: Omit<TimelineEvent, 'at'>): void {
  state.timeline.push({ at: new Date(nowMs).toISOString(), ...entry });
  if (state.timeline.length > TIMELINE_LIMIT) state.timeline.splice(0, state.timeline.length - TIMELINE_LIMIT);
}

export function initialState(runId: string, nowMs: number, budgetUsd: number | undefined, deadlineMs: number | undefined): RunState {
  const state: RunState = {
    runId,
    phase: Phase.Validating,
    startedAt: new Date(nowMs).toISOString(),
    attempts: [],
    zoneEvents: [],
    preemptions: 0,
    restarts: 0,
    budgetUsd,
    deadline: deadlineMs === undefined ? undefined : new Date(deadlineMs).toISOString(),
    timeline: [],
  };
  record(state, nowMs, { kind: TimelineKind.RunStarted, event: 'run started' });
  return state;
}

export function currentAttempt(state: RunState): Attempt | undefined {
  const last = state.attempts[state.attempts.length - 1];
  return last && last.outcome === AttemptOutcome.Running ? last : undefined;
}

export function attemptNumbered(state: RunState, attempt: number): Attempt | undefined {
  return state.attempts[attempt - 1];
}
