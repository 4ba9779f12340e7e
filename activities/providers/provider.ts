/**
 * The one contract every compute backend implements (GCE VMs, GKE Jobs). Activities
 * are written against it; each implementation translates its API's errors into
 * Sterna's failure types (workflows/failures.ts) at this boundary.
 */
import type { CapacityRequest, ProvisionRequest, ProvisionResult, ReleaseRequest, ReleaseResult } from '../../workflows/activity-contract';
import type { AgentSnapshot, Offer, ResourceRef } from '../../workflows/types';

export { ReleaseOutcome } from '../../workflows/activity-contract';
export type { CapacityRequest, ProvisionRequest, ProvisionResult, ReleaseRequest, ReleaseResult };

export interface ComputeProvider {
  readonly backend: 'gce' | 'gke';
  /** Zones x accelerators x pricing model x price x quota that fit the request. */
  findOffers(request: CapacityRequest): Promise<Offer[]>;
  /**
   * Creates the resource under its idempotent name and waits until it runs. Adopts an
   * existing resource only if it carries exactly this owner's labels (a retried create);
   * throws Stockout, QuotaExceeded, Preempted or ResourceConflict as ApplicationFailures.
   * `onProgress` is called while waiting. Once `signal` aborts, no new create is sent;
   * a create already in flight is awaited (it is bounded by its own timeout) so the
   * caller knows nothing of this call can still land.
   */
  provision(request: ProvisionRequest, onProgress: (status: string) => void, signal?: AbortSignal): Promise<ProvisionResult>;
  /** One look at the resource and its agent. */
  observe(ref: ResourceRef): Promise<AgentSnapshot>;
  /** Deletes the resource if it is the owner's; never touches a resource that is not. */
  release(request: ReleaseRequest, onProgress?: (status: string) => void): Promise<ReleaseResult>;
  /** Every resource labelled with this run, to prove nothing is left behind. */
  listRunResources(runId: string): Promise<ResourceRef[]>;
  /** Ends long-lived connections (e.g. GKE's pod watch) when the worker stops. */
  close?(): void;
}
