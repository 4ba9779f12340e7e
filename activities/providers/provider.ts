/**
 * The one contract every compute backend implements (GCE VMs, GKE Jobs). Activities
 * are written against it; each implementation translates its API's errors into
 * Sterna's failure types (workflows/failures.ts) at this boundary.
 */
import type { AgentSnapshot, Offer, ResourceRef, RunningWindow } from '../../workflows/types';
import type { AgentInputs } from '../agent/script';

/** What a run needs, from its spec: used to list offers. */
export interface CapacityRequest {
  accelerators: { type: string; count: number }[];
  machineType?: string;
  regions?: { allow?: string[]; deny?: string[] };
  zones?: { allow?: string[]; deny?: string[] };
  provisioningModels: ('SPOT' | 'STANDARD')[];
}

export interface ProvisionRequest {
  name: string;
  offer: Offer;
  /** `sterna-run`, `sterna-attempt`, and the spec's cost-attribution labels. */
  labels: Record<string, string>;
  agent: AgentInputs;
  diskSizeGb: number;
  /** Container image for GKE (and container-optimised VMs); absent means run on the host. */
  image?: string;
}

export interface ProvisionResult {
  ref: ResourceRef;
  /** True when a resource with this name already existed and was ours (a retried create). */
  adopted: boolean;
  window: RunningWindow;
}

export interface ComputeProvider {
  readonly backend: 'gce' | 'gke';
  /** Zones x accelerators x pricing model x price x quota that fit the request. */
  findOffers(request: CapacityRequest): Promise<Offer[]>;
  /**
   * Creates the resource under its idempotent name and waits until it runs. Adopts an
   * existing resource carrying the same run and attempt labels; throws Stockout,
   * QuotaExceeded or Preempted as ApplicationFailures.
   * `onProgress` is called while waiting, so the activity can heartbeat.
   */
  provision(request: ProvisionRequest, onProgress: (status: string) => void): Promise<ProvisionResult>;
  /** One look at the resource and its agent. */
  observe(ref: ResourceRef): Promise<AgentSnapshot>;
  /** Deletes the resource; a resource that is already gone counts as released. */
  release(ref: ResourceRef): Promise<RunningWindow>;
  /** Every resource labelled with this run, to prove nothing is left behind. */
  listRunResources(runId: string): Promise<ResourceRef[]>;
  /** Ends long-lived connections (e.g. GKE's pod watch) when the worker stops. */
  close?(): void;
}
