/**
 * The online decision problem shared by the trainingRun workflow and the trace-replay
 * benchmark. Everything is JSON-plain so it can cross Temporal payloads and be carried
 * through continue-as-new.
 */

export const ActionKind = { Idle: 'idle', Spot: 'spot', OnDemand: 'on-demand', FlexStart: 'flex-start' } as const;
export type ActionKind = (typeof ActionKind)[keyof typeof ActionKind];

/** What to run until the next decision point. */
export type Action =
  | { kind: typeof ActionKind.Idle }
  | { kind: typeof ActionKind.Spot; zone: string }
  | { kind: typeof ActionKind.OnDemand; zone: string }
  /** A flex-start (DWS) request: waits unpaid for capacity (at most the run's wait window), then runs unpreempted. */
  | { kind: typeof ActionKind.FlexStart; zone: string };

/** `unknown` when the zone was not probed since the last decision (the real system learns by trying). */
export type SpotAvailability = boolean | 'unknown';

export interface ZoneObservation {
  zone: string;
  spotAvailable: SpotAvailability;
  /**
   * The availability was seen by another run (the fleet), not by this one. Such looks come
   * by chance, not because this run watched the zone: how long the zone's state lasts must
   * not be measured along them (zone-stats.ts).
   */
  seenByOthers?: boolean;
  /** USD per hour for the whole instance, now. */
  spotPrice: number;
  /** USD per hour for the whole instance; on-demand capacity is assumed always launchable. */
  onDemandPrice: number;
  /** Flex-start (DWS) here, when the run offers that tier: USD per hour for the whole instance. */
  flexPrice?: number;
  /** Hours a flex-start request here is expected to wait for capacity (the offer's estimate). */
  flexWaitHours?: number;
  /** USD paid once per start here to bring the run's data (inter-region egress; data-cost.ts). */
  startUsd?: number;
  /** Hours each start here spends staging the run's data: paid at the instance's price, no progress (added to the changeover). */
  startHours?: number;
}

/** The flex-start tier's terms, when the run offers it. */
export interface FlexTerms {
  /** The longest a request waits for capacity before it fails (the run's wait window). */
  maxWaitHours: number;
  /** The longest a flex-start VM runs before it is stopped (GCE: 7 days). */
  maxRunHours: number;
}

/** What the caller knows at a decision point. Times are hours. */
export interface Observation {
  /** Hours since the run started; only differences matter. */
  nowHours: number;
  remainingWorkHours: number;
  hoursUntilDeadline: number;
  /** Paid time without progress after every start or switch. */
  changeoverHours: number;
  /** Hours until the caller will ask again (a trace tick, or the workflow's polling interval). */
  stepHours: number;
  /** What is running right now; `idle` after a preemption. */
  current: Action;
  /** Changeover still to pay on the current instance before it makes progress. */
  changeoverRemainingHours: number;
  zones: ZoneObservation[];
  /** Present when flex-start is a tier of this run (zones with `flexPrice` offer it). */
  flexStart?: FlexTerms;
}

export interface Decision<S> {
  action: Action;
  state: S;
}

/** An online policy: a pure function of its own JSON-plain state and what it can see now. */
export interface OnlinePolicy<S> {
  name: string;
  /** `memory`: zone statistics from before the run (the project's earlier observations), for policies that use them. */
  initialState(memory?: StatsTable): S;
  decide(state: S, obs: Observation): Decision<S>;
}

export const idle: Action = { kind: ActionKind.Idle };

export function sameAction(a: Action, b: Action): boolean {
  if (a.kind === ActionKind.Idle || b.kind === ActionKind.Idle) return a.kind === b.kind;
  return a.kind === b.kind && a.zone === b.zone;
}

export interface ZoneStats {
  upHours: number;
  downHours: number;
  /** Transitions available -> unavailable (a running spot instance would be preempted). */
  preemptions: number;
  /** Transitions unavailable -> available. */
  recoveries: number;
  /** Last known availability and when it was seen. */
  last: boolean | null;
  lastSeenHours: number;
  /** When the current run of `last` began (first seen). */
  runStartHours: number;
  /** False for the first run: it began before we looked, so its length is only a lower bound. */
  sawRunStart: boolean;
  /**
   * The current run was followed, at some look, only by another run's sighting. Such
   * looks come by chance, so a run followed along them to its end was kept because it was
   * short (each look it needed had to happen): its length is not recorded.
   */
  sampled?: true;
  /**
   * When the looks since this hour all found the state seen now, with gaps between
   * them that others' looks bridged. The run may have held since then (see restarted).
   */
  streakStartHours?: number;
  /**
   * Sightings across a gap: this run's launches (a failed one, or capacity found) and other
   * runs' looks. Each samples the zone's state at a moment not chosen by watching it, where
   * the hours watched (upHours) are mostly those of the run's own instance, which a live run
   * watches only while it has capacity. `hits`: those that found capacity. Absent in states
   * written before they existed (none).
   */
  looks?: number;
  hits?: number;
}

export interface StatsTable {
  zones: Record<string, ZoneStats>;
  /**
   * Hours during which no zone had spot capacity, and hours in which that could be told:
   * some zone seen and none with capacity (a live run's dry spells: all it could tell of
   * the market).
   */
  allDownHours: number;
  observedHours: number;
  /** Whether the previous decision saw no capacity anywhere it looked (see allDownHours). */
  allDownBefore: boolean;
  /** Whether the previous decision could tell (see allDownHours): the time since counts as observed. */
  allSeenBefore?: boolean;
  lastNowHours: number | null;
  /** Lengths (hours) of completed runs of capacity and of its absence, pooled over zones, most recent last. */
  upRuns: number[];
  downRuns: number[];
  /**
   * Hours capacity lasted from when it was first seen (not its start) to its end: what a
   * launch into capacity found at an arbitrary moment - a probe - gets. A live run learns
   * most of its uptime this way. Absent in states written before it existed.
   */
  upResiduals?: number[];
}
