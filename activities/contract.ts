/**
 * The activities the trainingRun workflow calls, as types: the workflow imports this
 * file with `import type` only, so no side-effect code can enter its bundle.
 */
import type { AgentSnapshot, Backend, CheckpointRef, Offer, ResourceRef } from '../workflows/types';
import type { CapacityRequest, ProvisionRequest, ProvisionResult, ReleaseRequest, ReleaseResult } from './providers/provider';

export type { CapacityRequest, ProvisionRequest, ProvisionResult, ReleaseRequest, ReleaseResult };

export type StageResult =
  | { kind: 'staged'; stagedBytes: number }
  | { kind: 'preempted' }
  /** The agent could not stage or resume (bad URI, checksum mismatch): exit code 64-67. */
  | { kind: 'failed'; exitCode: number; reason: string };

export type MonitorResult =
  /** Still training; returned on each new verified checkpoint or after `returnAfterSeconds`. */
  | { kind: 'progress'; step?: number; checkpoint?: CheckpointRef }
  | { kind: 'exited'; exitCode: number; step?: number; checkpoint?: CheckpointRef }
  /** The capacity was reclaimed; the agent's final checkpoint, if it made one, is included. */
  | { kind: 'preempted'; step?: number; checkpoint?: CheckpointRef };

export interface MonitorInput {
  ref: ResourceRef;
  /** The newest checkpoint step the workflow has recorded; a newer one ends the call. */
  knownCheckpointStep: number;
  returnAfterSeconds: number;
  pollSeconds: number;
}

export interface SternaActivities {
  findCapacity(input: { backend: Backend; request: CapacityRequest }): Promise<Offer[]>;
  provision(input: ProvisionRequest): Promise<ProvisionResult>;
  stageData(input: { ref: ResourceRef; pollSeconds: number }): Promise<StageResult>;
  monitorTraining(input: MonitorInput): Promise<MonitorResult>;
  release(input: ReleaseRequest): Promise<ReleaseResult>;
  /** One look at a resource, for tools and tests. */
  observe(input: { ref: ResourceRef }): Promise<AgentSnapshot>;
}
