/**
 * What the run's reducers hear and what they say, as data: the events (an activity's
 * answer, a message, a timer), the one action the shell carries out next, and the effects
 * it carries out beside it. The shell (training-run.ts) turns actions and effects into
 * activities, timers and messages, and answers with events; nothing else writes the state.
 * An action names what to do and to which attempt; what the request looks like on the
 * wire is requests.ts's, read from the same state.
 */
import type { SearchAttributeUpdatePair } from '@temporalio/common';
import type { BucketAnswer, CreateWatch, DatasetAnswer, UnpricedZone } from '../activity-contract';
import type { Finding } from '../checks';
import type { FailureType } from '../failures';
import { runKey, type Owner } from '../naming';
import type { ThroughputSample } from '../plan/measured';
import type { PriceStamp } from '../pricing-book/contract';
import type { AdmissionDecision } from '../teams/rules';
import type { Offer, ResourceObservation, ResourceRef } from '../types';
import type { ZoneMemory, ZoneOutcome } from '../zones/memory';
import type { CostMemo } from './cost-refresh';
import type { IntervalUpdateOutcome } from './live-interval';
import type { NotifyEvent } from './notify';
import type { AppliedInterval, Phase } from './state';

/** What happened, as the shell tells the reducers. */
export type RunEvent =
  | { kind: 'start' }
  /**
   * `zoneMemory`: the project's zone memory for this run's accelerators, when the run read it (workflows/zones).
   * `bucketLocations`: the storage API's word on the datasets' buckets, when the run asked (run/data-placement.ts).
   * `datasets`: whether each dataset exists, asked before the run's first VM (run/datasets.ts).
   */
  | { kind: 'offers'; offers: Offer[]; unpriced?: UnpricedZone[]; prices?: PriceStamp; zoneMemory?: ZoneMemory; bucketLocations?: BucketAnswer[]; datasets?: DatasetAnswer[] }
  /** The zone memory read again while an attempt trains (undefined: not reachable). */
  | { kind: 'zone-memory'; memory?: ZoneMemory }
  /** What came of handing the live attempt's agent a new checkpoint interval (run/live-interval.ts). */
  | { kind: 'checkpoint-interval-set'; attempt: number; interval: AppliedInterval; outcome: IntervalUpdateOutcome; message?: string }
  /** `ref`: the resource as created (a gang's names, a GKE Job's uid); absent, as the run named it. */
  | { kind: 'provisioned'; attempt: number; ref?: ResourceRef; startedAt?: string; adopted: boolean; observerAsked?: boolean }
  /** A provision that ended with a named failure (workflows/failures.ts). */
  | { kind: 'provision-failed'; attempt: number; failure: string; message: string }
  | { kind: 'released'; attempt: number; outcome: 'deleted' | 'absent' | 'not-ours'; startedAt?: string; stoppedAt?: string; createWatch?: CreateWatch }
  /** A release running beside the run began (its `released` comes later), or it failed: it is asked again, before anything else. */
  | { kind: 'releasing'; attempt: number }
  | { kind: 'release-failed'; attempt: number; message: string }
  /** What the fleet observer signalled, or what the run's own look saw. */
  | { kind: 'observed'; observation: ResourceObservation; via: 'observer' | 'look' }
  | { kind: 'notice'; name: string; reason?: string }
  /** The fleet observer was asked for (started if it was not running), or could not be. */
  | { kind: 'observer-asked' }
  /** A timer fired or a limit moved: re-evaluate. */
  | { kind: 'tick' }
  /** What the checks before the run found; undefined: this worker could not check (the run goes on). */
  | { kind: 'checked'; findings?: Finding[] }
  /** The team's answer to the run's admission request (workflows/teams). */
  | { kind: 'admission'; decision: AdmissionDecision }
  /** The admission request reached the team; `team`: the team its ledger charges (the run's namespace, with a namespace per team). */
  | { kind: 'admission-asked'; teamWebhooks?: boolean; team?: string }
  /** The ask for a final checkpoint before the flex-start cut reached the agent, or could not (`detail` says why). */
  | { kind: 'move-asked'; attempt: number; delivered: boolean; detail?: string }
  /** Accepted updates (run/validators.ts checked them first). */
  /** An accepted limit update; `by` is the caller's identity, when it gave one. */
  | { kind: 'budget-set'; usd: number; by?: string }
  | { kind: 'deadline-set'; deadline: string; by?: string }
  /** A notification a webhook refused, or that could not be delivered at all (`target` absent). */
  | { kind: 'notification-failed'; notification: string; target?: string; problem: string }
  /** The run is stopping (cancelled, or failed with `reason`): its live attempt is stopped, not running. */
  | { kind: 'stopped'; phase: typeof Phase.Cancelled | typeof Phase.Failed; reason: string }
  /** The run is ending and releases every attempt still held, in parallel. */
  | { kind: 'releasing-all' }
  /** Every resource is released; the run ended so. */
  | { kind: 'ended'; phase: typeof Phase.Completed | typeof Phase.Failed | typeof Phase.Cancelled; failure?: string; message?: string }
  /** Nothing came in while the execution settled: it continues as new now. */
  | { kind: 'continuing' }
  /**
   * What came of keeping a failed attempt for inspection (the `keep` action, run/keep.ts):
   * `kept` (labelled, `until` as labelled, `reach` how to get to it), `absent`, `not-ours`,
   * or `failed` (the keep could not be made; `message` says why): all but `kept` release it.
   */
  | { kind: 'kept'; attempt: number; outcome: 'kept' | 'absent' | 'not-ours' | 'failed'; until?: string; reach?: string[]; message?: string };

/** What to do next: exactly one per step, answered by an event (or ending the execution). */
export type Action =
  /** The checks before the run (credentials, quotas, buckets, image): answered by `checked`. */
  | { kind: 'check' }
  | { kind: 'find-capacity' }
  | { kind: 'provision'; attempt: number }
  /** `beside`: the run goes on while it runs, and hears `releasing` now and `released` when it is done. */
  | { kind: 'release'; attempt: number; createMayBeInFlight: boolean; beside?: boolean }
  /** One direct look at the live attempt: the fallback when nothing was heard for a while. */
  | { kind: 'look'; attempt: number }
  /** Ask for the fleet observer of this run's backend: it starts it if it is not running. */
  | { kind: 'ensure-observer' }
  /** Ask the run's team to admit it (workflows/teams); its answer comes as an `admission` event. */
  | { kind: 'ask-admission' }
  /** Ask a flex-start attempt's agent for its final checkpoint, to move before the cut (flex-cut.ts); answered by `move-asked`. */
  | { kind: 'ask-move'; attempt: number }
  /** Read the project's zone memory again (a `zone-memory` event): the live attempt's interval may move. */
  | { kind: 'read-zone-memory' }
  /** Hand the live attempt's agent a new checkpoint interval (a `checkpoint-interval-set` event). */
  | { kind: 'set-checkpoint-interval'; attempt: number; interval: AppliedInterval }
  /** Wait for the next message, or until `untilMs`. */
  | { kind: 'wait'; untilMs?: number }
  | { kind: 'continue-as-new' }
  | { kind: 'complete' }
  /**
   * A stopping run keeps this failed attempt for inspection rather than release it: label it
   * to be deleted after `untilMs` (run/keep.ts `finalKeep`); answered by `kept`.
   */
  | { kind: 'keep'; attempt: number; untilMs: number }
  /** `logTailOf`: the attempt whose log's last lines the failure carries (its agent or command failed). */
  | { kind: 'fail'; failure: FailureType; message: string; details?: unknown; logTailOf?: number };

/** What the run does to the world beside its next action; none is answered, and none holds the run up. */
export type Effect =
  /** The web UI's columns and current details, and the attempts being released (for the reaper). */
  | { kind: 'publish'; attributes: SearchAttributeUpdatePair[]; details: string; releasing: number[] }
  /** Notifications due, handed to delivery (their keys are remembered in the state already). */
  | { kind: 'notify'; events: NotifyEvent[] }
  /** The run's spend so far, for its team's ledger. */
  | { kind: 'report-spend'; team?: string; totalUsd: number }
  /** How released attempts ended and trained: the zone and throughput memories learn from them. */
  | { kind: 'tell-memories'; outcomes: ZoneOutcome[]; samples: ThroughputSample[] }
  /** The run is over: its team gets its GPUs back, with its final spend. */
  | { kind: 'team-ended'; team?: string; totalUsd: number }
  /** The run's cost summary, for `sterna cost`. */
  | { kind: 'cost-memo'; memo: CostMemo };

/** One step of the reducers: the new (frozen) state, its effects and, where the shell waits on one, the next action. */
export interface Absorbed<S> {
  state: S;
  effects: Effect[];
}
export interface Step<S> extends Absorbed<S> {
  action: Action;
}

export interface Context {
  nowMs: number;
  workflowId: string;
  /** The namespace the run executes in (the SDK's workflow info): its team. */
  namespace?: string;
  /** This execution chain's token (naming.ts). */
  execution: string;
  continueAsNewSuggested: boolean;
  /** A newer version of the worker deployment is current: continue as new onto it (workflows/versions.ts). */
  newVersionCurrent?: boolean;
  /** Events in this execution's history so far (the SDK's `historyLength`). */
  historyLength?: number;
  /** Attempts the state held when this execution began (continue-as-new bound). */
  attemptsAtStart: number;
}

/** Derived from the workflow's identity, never from its (continued) input. */
export function ownerOf(context: Pick<Context, 'workflowId' | 'execution'>, attempt: number): Owner {
  return { run: runKey(context.workflowId), execution: context.execution, attempt };
}
