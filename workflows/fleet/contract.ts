/**
 * The fleet observer's contract: its settings, the memory it carries from look to look,
 * and the activities it (and the trainingRun workflow) call. Plain JSON throughout: the
 * memory crosses the activity boundary, rides in heartbeat details and is carried
 * through continue-as-new.
 */
import type { Owner } from '../naming';
import type { AgentSnapshot, Backend, ResourceRef } from '../types';

export type Lifecycle = AgentSnapshot['lifecycle'];

/** What the agent publishes (guest attributes on GCE, pod annotations on GKE). */
export type AgentValues = Omit<AgentSnapshot, 'lifecycle' | 'preempted'>;

export interface FleetSettings {
  /** Seconds between two looks at the fleet (one listing each). */
  intervalSeconds: number;
  /**
   * Guest-attribute reads per minute the observer may spend: a share of the project's
   * read quota (GCE's default is 1,500 per minute; the default share is half, 750).
   */
  readsPerMinute: number;
  /** A resource whose status did not change is read this often while the budget allows (seconds). */
  progressReadSeconds: number;
  /** ...and this often while its agent is starting, staging or uploading, when news is near (seconds). */
  busyReadSeconds: number;
  /** A change of step alone is signalled at most this often per resource (seconds). */
  progressSignalSeconds: number;
  /** Reads that may be spent at once after a quiet spell, out of the minute's budget (seconds' worth). */
  burstSeconds: number;
}

/** Defaults: a look every 5 s; progress read about once a minute; half of GCE's 1,500 reads per minute. */
export const DEFAULT_FLEET_SETTINGS: FleetSettings = {
  intervalSeconds: 5,
  readsPerMinute: 750,
  progressReadSeconds: 60,
  busyReadSeconds: 15,
  progressSignalSeconds: 180,
  burstSeconds: 10,
};

/** What was last sent to the run about a resource: the fields whose change is news. */
export interface SentObservation {
  lifecycle: Lifecycle;
  preempted: boolean;
  phase?: string;
  checkpointStep?: number;
  exitCode?: number;
  step?: number;
  atMs: number;
}

/** Why the guest attributes must be read before the next regular turn. */
export const ReadDue = {
  /** The attempt ended (terminated): read once so its newest checkpoint and exit code are not missed. */
  Ended: 'ended',
  /** New, or its status changed. */
  Changed: 'changed',
} as const;
export type ReadDue = (typeof ReadDue)[keyof typeof ReadDue];

/** One watched resource. */
export interface WatchedResource {
  ref: ResourceRef;
  owner: Owner;
  /** The run to signal (the `sterna-run-id` the agent reads); none for a resource that does not say. */
  workflowId?: string;
  lifecycle: Lifecycle;
  /** Sticky: once the capacity was reclaimed it stays reclaimed. */
  preempted: boolean;
  agent: AgentValues;
  /** Epoch ms of the last read of the agent's values. */
  readAtMs?: number;
  readDue?: ReadDue;
  /** It stopped and GCE has not yet said whether it was preempted. */
  preemptionCheckDue?: boolean;
  /** Complete listings in a row that did not show it; two make it gone (one may race a watch restart). */
  absentLooks: number;
  sent?: SentObservation;
}

export interface FleetMemory {
  /** By `resourceKey(ref)`. */
  resources: Record<string, WatchedResource>;
  /** The read budget's token bucket: tokens left, as of `tokensAtMs`. */
  tokens: number;
  tokensAtMs: number;
}

export interface WatchFleetInput {
  backend: Backend;
  settings: FleetSettings;
  /** The previous call's memory; absent on the first call (every resource is then new). */
  memory?: FleetMemory;
  /** Return after about this long, so the workflow can continue as new (seconds). */
  returnAfterSeconds: number;
}

/** Counted per call: provider method calls, zones checked for preemptions, signals delivered. */
export interface WatchStats {
  looks: number;
  listings: number;
  reads: number;
  /** One zone operations list each (GCE); readNode calls (GKE). */
  preemptionLookups: number;
  signals: number;
  /** Signals to runs that no longer exist (skipped). */
  signalsToClosedRuns: number;
  failedLooks: number;
  /** The most resources one listing showed. */
  resources: number;
}

export interface WatchFleetResult {
  memory: FleetMemory;
  stats: WatchStats;
}

export interface EnsureObserverInput {
  backend: Backend;
}

export interface EnsureObserverResult {
  workflowId: string;
  /** The observer run that got the request (a new one when it was not running). */
  runId: string;
}

export interface FleetActivities {
  /** Watches the whole fleet of one backend, signalling the runs concerned, for `returnAfterSeconds`. */
  watchFleet(input: WatchFleetInput): Promise<WatchFleetResult>;
  /** Starts this backend's fleet observer on the caller's task queue unless it is already running. */
  ensureObserver(input: EnsureObserverInput): Promise<EnsureObserverResult>;
}

export interface FleetObserverInput {
  backend: Backend;
  settings: FleetSettings;
  /** Length of one watchFleet call (seconds). */
  watchSeconds: number;
  /** The observer ends after the fleet was empty this long; the next run starts it again (seconds). */
  idleExitSeconds: number;
  /** Carried through continue-as-new. */
  memory?: FleetMemory;
  /** Since when (epoch ms) the observer has had no resources and no request. */
  idleSinceMs?: number;
}

/** The key of a resource in the memory: zone and name (a Sterna name is unique per attempt). */
export function resourceKey(ref: ResourceRef): string {
  return `${ref.namespace ?? ref.zone}/${ref.name}`;
}

/** The observer's workflow id: one per task queue, backend and scope (GCE project, GKE namespace). */
export function observerWorkflowId(taskQueue: string, backend: Backend, scope: string): string {
  return `sterna-observer/${taskQueue}/${backend}/${scope}`;
}
