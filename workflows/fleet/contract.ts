/**
 * The fleet observer's contract: its settings, the memory it carries from look to look,
 * and the activities it (and the trainingRun workflow) call. Plain JSON throughout: the
 * memory crosses the activity boundary, rides in heartbeat details and is carried
 * through continue-as-new.
 */
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
  /**
   * A run hears about its resource at least this often while the observer is alive, news
   * or not (seconds): a run that heard nothing for longer should look for itself.
   */
  maxSilenceSeconds: number;
  /** Reads that may be spent at once after a quiet spell, out of the minute's budget (seconds' worth). */
  burstSeconds: number;
  /**
   * Between looks, a preempted resource that is still stopping is read this often until
   * its agent has exited (its final checkpoint is up), so its run places the replacement
   * then, not at the next look after the VM is down (seconds; observers started before
   * it existed use the default).
   */
  drainReadSeconds?: number;
}

/**
 * Defaults: a look every 5 s; progress read about once a minute; half of GCE's 1,500
 * reads per minute; every run hears at least every 5 minutes.
 */
export const DEFAULT_FLEET_SETTINGS: FleetSettings = {
  intervalSeconds: 5,
  readsPerMinute: 750,
  progressReadSeconds: 60,
  busyReadSeconds: 15,
  progressSignalSeconds: 180,
  maxSilenceSeconds: 300,
  burstSeconds: 10,
  drainReadSeconds: 1,
};

/**
 * The observer's memory as it travels between watchFleet calls (activity input and
 * result, heartbeat details, continue-as-new): one compact row per resource, so 2,000
 * resources stay well inside Temporal's 2 MB payload limit. Opaque to the workflow;
 * activities/fleet/memory.ts writes and reads it.
 */
export interface CarriedMemory {
  version: 1;
  tokens: number;
  tokensAtMs: number;
  /** Absent in memories carried before the budget could shrink (then 1). */
  budgetScale?: number;
  rows: unknown[][];
}

export interface WatchFleetInput {
  backend: Backend;
  settings: FleetSettings;
  /** The previous call's memory; absent on the first call (every resource is then new). */
  memory?: CarriedMemory;
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
  memory: CarriedMemory;
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
  /**
   * Starts this backend's fleet observer on the caller's task queue unless it is already
   * running; null when this worker runs without one (STERNA_OBSERVER=off, tests).
   */
  ensureObserver(input: EnsureObserverInput): Promise<EnsureObserverResult | null>;
}

/** How an observer runs; workers pass theirs when they start or ask for it. */
export interface ObserverOptions {
  settings: FleetSettings;
  /** Length of one watchFleet call (seconds); the observer continues as new every few calls. */
  watchSeconds: number;
  /** The observer ends after this long without resources or requests; the next run starts it again (seconds). */
  idleExitSeconds: number;
}

export interface FleetObserverInput extends ObserverOptions {
  backend: Backend;
  /** Carried through continue-as-new. */
  memory?: CarriedMemory;
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
