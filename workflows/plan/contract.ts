/**
 * The plan's and the throughput memory's contracts: what a plan answers, the memory's
 * workflow id and the activities runs tell it and plans read it through. Plain types only,
 * so activities, the CLI and the client package import it without the workflow runtime
 * or the planner's code.
 */
import type { UnpricedZone } from '../activity-contract';
import type { GpuSlice } from '../gpu-slices';
import type { PriceStamp } from '../pricing-book/contract';
import type { Offer } from '../types';
import type { ThroughputMemory, ThroughputSample } from './measured';

/**
 * Where a row's speed came from: runs of this spec (`measured`), the expected duration as
 * stated (`expected`: the accelerator it is stated on), or relative throughput from the
 * spec's figures (`spec`) or the datasheet table (`datasheet`).
 */
export type ThroughputSource = 'measured' | 'expected' | 'spec' | 'datasheet';

/** What the work was taken from: the spec's expected duration, or total steps over a measured rate. */
export interface PlanWork extends GpuSlice {
  basis: 'expected-duration' | 'measured-steps';
  /** The accelerator (and count per node) the work is stated on. */
  accelerator: string;
  acceleratorCount: number;
  hours: number;
  totalSteps?: number;
  /** With measured-steps: the anchor's measured steps per second per GPU and the training seconds behind it. */
  stepsPerGpuSecond?: number;
  measuredSeconds?: number;
}

export interface PlanRow {
  accelerator: string;
  /** The slice of each GPU, when the offer is one (GKE: MIG partition, time-sharing); e.g. `MIG 1g.10gb`. */
  slice?: string;
  acceleratorCount: number;
  zone: string;
  region: string;
  provisioningModel: Offer['provisioningModel'];
  /** Per VM (one node). */
  pricePerHour: number;
  /** VMs the run takes (resources.nodes): the cost is price x nodes x hours. */
  nodes: number;
  /** Hours of work on this choice without interruption. */
  workHours: number;
  /** What the work alone costs here, uninterrupted (price x nodes x work hours): what placement's price-per-hour ranking does not see. */
  workCostUsd: number;
  /** Expected hours including the work lost to preemptions and the restarts. */
  expectedHours: number;
  expectedCostUsd: number;
  expectedPreemptions: number;
  /** When it would finish if started now (ISO); absent when it never would. */
  finishAt?: string;
  /** Chance of missing the deadline, 0..1; absent without a deadline. */
  missRisk?: number;
  /** Preemptions per hour used, and whether from what the project saw or the prior. */
  preemptionsPerHour: number;
  preemptionSource: 'observed' | 'prior' | 'none';
  /** Seconds one preemption costs (restart and lost work), and whether runs of this spec measured it or it is the prior. */
  lossSeconds: number;
  lossSource: 'measured' | 'prior';
  throughputSource: ThroughputSource;
  /** Steps per second on this choice, when measured by runs of this spec. */
  stepsPerSecond?: number;
  /** The choice the run would try first. */
  pick: boolean;
}

export interface Plan {
  rows: PlanRow[];
  /** Offers the plan could not predict (no throughput figure for the accelerator), as accelerator names. */
  unpredictable: string[];
  /** Why no row is marked as the pick, when none is. */
  noPick?: string;
  deadline?: string;
  /** What the work was taken from; absent when nothing could be predicted. */
  work?: PlanWork;
}

/** What `planRun` answers: the plan, when it was made and from which prices. */
export interface PlanResult extends Plan {
  /** When the plan was made (ISO): its finish times count from then. */
  at: string;
  prices: PriceStamp;
  unpriced: UnpricedZone[];
}

/** One memory per task queue: a trainer's speed on a GPU is the same in every project and backend. */
export function throughputMemoryWorkflowId(taskQueue: string): string {
  return `sterna-throughput/${taskQueue}`;
}

export interface ThroughputMemoryInput {
  /** Carried through continue-as-new; absent on a fresh start. */
  memory?: ThroughputMemory;
}

export interface RecordThroughputInput {
  samples: ThroughputSample[];
}

export interface ReadThroughputInput {
  specName: string;
  accelerators: string[];
}

export interface ThroughputActivities {
  /** Tells this task queue's throughput memory (started if it is not running). */
  recordThroughput(input: RecordThroughputInput): Promise<boolean>;
  /** The memory's records for one spec name and these accelerators; an empty memory when none is running. */
  readThroughput(input: ReadThroughputInput): Promise<ThroughputMemory>;
}
