/**
 * The throughput memory's contract: its workflow id and the activities runs tell it and
 * plans read it through. Plain types only, so activities and the CLI import it without
 * the workflow runtime.
 */
import type { ThroughputMemory, ThroughputSample } from './measured';

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
