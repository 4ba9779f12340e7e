/**
 * The reaper's activities: list what a backend holds, ask Temporal about owners, delete
 * one resource through the provider's owner-checked release. The workflow imports types only.
 */
import type { Owner } from '../naming';
import type { Backend, ResourceRef } from '../types';
import type { OwnerRun, ReapCandidate } from './decide';

export interface ReaperActivities {
  /** Every Sterna-labelled resource of a backend (one listing); `configured: false` when the worker has no such provider. */
  reaperList(input: { backend: Backend }): Promise<{ configured: boolean; candidates: ReapCandidate[] }>;
  /** What Temporal says of each workflow id (its latest execution), read with describe. */
  reaperOwners(input: { workflowIds: string[] }): Promise<Record<string, OwnerRun>>;
  /** Deletes the resource only if its labels name exactly `owner` (the provider's release). */
  reaperDelete(input: { ref: ResourceRef; owner: Owner }): Promise<{ outcome: 'deleted' | 'absent' | 'not-ours' }>;
}
