/**
 * The one contract every compute backend implements (GCE VMs, GKE Jobs). Activities
 * are written against it; each implementation translates its API's errors into
 * Sterna's failure types (workflows/failures.ts) at this boundary.
 */
import { type AgentSnapshot, type AgentValues, type CapacityFound, type CapacityRequest, type Lifecycle, type MoveAnswer, type Offer, type Owner, OwnerLabel, type ProvisioningModel, type ProvisionRequest, type ProvisionResult, type ReleaseRequest, type ReleaseResult, type ResourceRef, type SetAgentInputOutcome, type UnpricedZone } from '../../workflows/api';
import type { PriceBook } from '../../config/price-book';

export { ReleaseOutcome } from '../../workflows/api';
export type { CapacityFound, CapacityRequest, MoveAnswer, ProvisionRequest, ProvisionResult, ReleaseRequest, ReleaseResult, UnpricedZone };

/** One Sterna resource as one fleet listing shows it. */
export interface FleetResource {
  ref: ResourceRef;
  owner: Owner;
  /** The run's workflow id (the `sterna-run-id` input the agent reads); absent if the resource does not carry it. */
  workflowId?: string;
  /**
   * The listing could not tell yet whether it carries a run: its workflow id is read apart
   * (GCE: an instance older than the description that names it) and that read is pending.
   * Nothing may be decided from the absent id: the reaper keeps it.
   */
  runUnread?: true;
  lifecycle: Exclude<Lifecycle, 'gone'>;
  /** Known from the listing itself (GKE's DisruptionTarget); GCE tells it only through `preemptedAmong`. */
  preempted?: boolean;
  /** The agent's values when the listing carries them at no extra cost (GKE's watch cache). */
  agent?: AgentValues;
  lastStartAt?: string;
  lastStopAt?: string;
  /** When the resource was created (the reaper's grace period counts from it). */
  createdAt?: string;
  /** What it runs on, when the listing says (the zone memory files preemptions by it). */
  accelerator?: string;
  provisioningModel?: ProvisioningModel;
}

export interface ComputeProvider {
  readonly backend: 'gce' | 'gke';
  /** Zones x accelerators x pricing model x price x quota that fit the request (priced from the provider's own book). */
  findOffers(request: CapacityRequest): Promise<Offer[]>;
  /**
   * The same, priced from `prices` (the price book's, when the worker keeps one; the
   * provider's own otherwise), with the zones that offer the accelerator but cannot be
   * priced, and the prices' stamp.
   */
  findCapacity(request: CapacityRequest, prices?: PriceBook): Promise<CapacityFound>;
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
  /**
   * Asks the resource's agent for a final checkpoint and a stop, ahead of a flex-start cut
   * (GCE: the `sterna-move` instance attribute). Absent where the backend cannot yet:
   * the cut's own stop grace is then the fallback.
   */
  askMove?(ref: ResourceRef): Promise<MoveAnswer>;
  /** Deletes the resource if it is the owner's; never touches a resource that is not. */
  release(request: ReleaseRequest, onProgress?: (status: string) => void): Promise<ReleaseResult>;
  /** Every resource labelled with this run, to prove nothing is left behind. */
  listRunResources(runId: string): Promise<ResourceRef[]>;
  /** What one fleet observer covers: the GCE project, the GKE cluster and namespace (safe in a workflow id). */
  fleetScope(): string;
  /**
   * Every Sterna-labelled resource of the scope, with a constant number of API requests
   * however many there are (GCE: one aggregatedList page per 500 instances; GKE: none,
   * from the pod watch). Resources without complete owner labels are left out.
   */
  listFleet(): Promise<FleetResource[]>;
  /** What the agent last published (GCE: one getGuestAttributes; GKE: the watch cache); {} if nothing yet. */
  readAgent(ref: ResourceRef): Promise<AgentValues>;
  /**
   * Which of these stopped resources were preempted rather than stopped or deleted by
   * someone. GCE: one `compute.instances.preempted` operations list per zone among `refs`
   * (GCE has `globalOperations.aggregatedList` for one call; the emulator does not yet).
   */
  preemptedAmong(refs: ResourceRef[]): Promise<ResourceRef[]>;
  /** True when the API refused any of this worker's calls for its rate quota since `sinceMs` (GCE). */
  rateLimitedSince?(sinceMs: number): boolean;
  /** Ends long-lived connections (e.g. GKE's pod watch) when the worker stops. */
  close?(): void;
  /**
   * Sets one input the agent re-reads while it runs (GCE: a metadata attribute, by
   * setMetadata with the metadata's fingerprint), on the owner's resource only. A backend
   * without it cannot change a running agent's inputs (GKE: environment variables).
   */
  setAgentInput?(ref: ResourceRef, owner: Owner, key: string, value: string): Promise<SetAgentInputOutcome>;
}

/** The owner a resource's labels name, or undefined unless all three owner labels are there and well formed. */
export function ownerFromLabels(labels: Record<string, string> | null | undefined): Owner | undefined {
  const run = labels?.[OwnerLabel.Run];
  const execution = labels?.[OwnerLabel.Execution];
  const attempt = labels?.[OwnerLabel.Attempt];
  if (!run || !execution || !attempt || !/^[1-9]\d{0,8}$/.test(attempt)) return undefined;
  return { run, execution, attempt: Number(attempt) };
}
