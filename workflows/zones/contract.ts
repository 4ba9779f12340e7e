/**
 * The zone memory's contract: its workflow id, input, and the activities runs (and the
 * fleet observer) tell it and read it through. Plain types and JSON only, so activities
 * and the CLI import it without the workflow runtime.
 */
import type { Backend } from '../types';
import type { ZoneMemory, ZoneOutcome } from './memory';

/** One memory per task queue, backend and scope (GCE project, GKE cluster and namespace), like the fleet observer. */
export function zoneMemoryWorkflowId(taskQueue: string, backend: Backend, scope: string): string {
  return `sterna-zones/${taskQueue}/${backend}/${scope}`;
}

/** The inverse of zoneMemoryWorkflowId, for `sterna zones` (undefined for any other id). */
export function parseZoneMemoryWorkflowId(workflowId: string): { taskQueue: string; backend: Backend; scope: string } | undefined {
  const m = /^sterna-zones\/([^/]+)\/(gce|gke)\/(.+)$/.exec(workflowId);
  return m ? { taskQueue: m[1], backend: m[2] as Backend, scope: m[3] } : undefined;
}

export interface ZoneMemoryInput {
  /** Carried through continue-as-new; absent on a fresh start. */
  memory?: ZoneMemory;
}

export interface RecordZoneOutcomesInput {
  backend: Backend;
  outcomes: ZoneOutcome[];
}

export interface ReadZoneMemoryInput {
  backend: Backend;
  /** Only these accelerators' records are returned (a run's own). */
  accelerators: string[];
}

export interface ZoneActivities {
  /** Tells this backend's zone memory (started if it is not running); false when this worker keeps none. */
  recordZoneOutcomes(input: RecordZoneOutcomesInput): Promise<boolean>;
  /** The memory's records for these accelerators; an empty memory when none is running. No cloud API call. */
  readZoneMemory(input: ReadZoneMemoryInput): Promise<ZoneMemory>;
}
