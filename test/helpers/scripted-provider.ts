/**
 * A provider whose cloud is a script: each zone says what happens to the next VM
 * created there. It drives the real activities and the real workflow through paths
 * that are slow or hard to provoke on the emulator (quota errors, user-code failures,
 * many preemptions, continue-as-new). Lifecycle tests use the emulator instead.
 */
import { failure, FailureType } from '../../workflows/failures';
import { isOwnedBy } from '../../workflows/naming';
import type { AgentValues } from '../../workflows/fleet/contract';
import type { AgentSnapshot, Offer, ResourceRef } from '../../workflows/types';
import { PRICES_AS_OF } from '../../config/catalog';
import {
  ReleaseOutcome,
  type CapacityFound,
  type CapacityRequest,
  type ComputeProvider,
  type FleetResource,
  type ProvisionRequest,
  type ProvisionResult,
  type ReleaseRequest,
  type ReleaseResult,
} from '../../activities/providers/provider';

/** What the next VM in a zone does. */
export type Script =
  | { kind: 'stockout' }
  | { kind: 'quota' }
  | { kind: 'exit'; code: number; afterPolls?: number; step?: number }
  /** Runs, checkpoints at `step`, then is preempted. */
  | { kind: 'preempt'; step: number; afterPolls?: number };

interface Vm {
  request: ProvisionRequest;
  script: Script;
  polls: number;
  startedAt: string;
  deleted: boolean;
}

export class ScriptedProvider implements ComputeProvider {
  readonly backend = 'gce' as const;
  readonly vms = new Map<string, Vm>();
  readonly created: string[] = [];
  /** How long a delete takes (ms): a real one takes seconds, and tests of what happens meanwhile need the window. */
  releaseDelayMs = 0;
  private readonly scripts = new Map<string, Script[]>();

  constructor(
    private readonly zones: { zone: string; spot: number; onDemand: number }[],
    private readonly fallback: Script = { kind: 'exit', code: 0, step: 100 },
  ) {}

  script(zone: string, ...steps: Script[]): this {
    this.scripts.set(zone, [...(this.scripts.get(zone) ?? []), ...steps]);
    return this;
  }

  async findOffers(request: CapacityRequest): Promise<Offer[]> {
    return this.zones.flatMap(({ zone, spot, onDemand }) =>
      request.provisioningModels.map((model) => ({
        backend: 'gce' as const,
        zone,
        region: zone.replace(/-[a-z]$/, ''),
        accelerator: request.accelerators[0].type,
        acceleratorCount: request.accelerators[0].count,
        machineType: 'g2-standard-4',
        provisioningModel: model,
        pricePerHour: model === 'SPOT' ? spot : onDemand,
        onDemandPricePerHour: onDemand,
        quotaAvailable: true,
      })),
    );
  }

  /** Scripted prices, stamped as the bundled catalog's. */
  async findCapacity(request: CapacityRequest): Promise<CapacityFound> {
    return { offers: await this.findOffers(request), unpriced: [], prices: { asOf: PRICES_AS_OF, source: 'catalog' } };
  }

  async provision(request: ProvisionRequest): Promise<ProvisionResult> {
    const ref: ResourceRef = { backend: 'gce', name: request.name, zone: request.offer.zone };
    const existing = this.vms.get(request.name);
    if (existing && !isOwnedBy(existing.request.labels, request.owner)) throw failure(FailureType.ResourceConflict, `${request.name} is not ours`);
    if (existing) return { ref, adopted: true, window: { startedAt: existing.startedAt } };
    const script = this.scripts.get(request.offer.zone)?.shift() ?? this.fallback;
    if (script.kind === 'stockout') throw failure(FailureType.Stockout, `no capacity in ${request.offer.zone}`);
    if (script.kind === 'quota') throw failure(FailureType.QuotaExceeded, `quota exceeded in ${request.offer.zone}`);
    this.created.push(request.name);
    this.vms.set(request.name, { request, script, polls: 0, startedAt: new Date().toISOString(), deleted: false });
    return { ref, adopted: false, window: { startedAt: new Date().toISOString() } };
  }

  async observe(ref: ResourceRef): Promise<AgentSnapshot> {
    const vm = this.vms.get(ref.name);
    if (!vm || vm.deleted) return { lifecycle: 'gone', preempted: false };
    vm.polls++;
    return this.snapshotOf(vm);
  }

  /** What the VM shows after the looks it has had so far (observe counts a look; the fleet methods do not). */
  private snapshotOf(vm: Vm): AgentSnapshot {
    const due = vm.polls > (vm.script.kind === 'exit' || vm.script.kind === 'preempt' ? (vm.script.afterPolls ?? 2) : 0);
    if (!due) return { lifecycle: 'running', preempted: false, phase: 'training', step: 1 };
    if (vm.script.kind === 'preempt') {
      const step = vm.script.step;
      return { lifecycle: 'terminated', preempted: true, phase: 'exited', step, exitCode: 143, checkpoint: { step, sha256: 'a'.repeat(64), uri: `file:///ckpt/step-${step}.json` } };
    }
    if (vm.script.kind === 'exit') {
      const step = vm.script.step ?? 100;
      return { lifecycle: 'running', preempted: false, phase: 'exited', step, exitCode: vm.script.code, checkpoint: { step, sha256: 'b'.repeat(64), uri: `file:///ckpt/step-${step}.json` } };
    }
    return { lifecycle: 'running', preempted: false, phase: 'training' };
  }

  fleetScope(): string {
    return 'scripted';
  }

  async listFleet(): Promise<FleetResource[]> {
    return [...this.vms.values()]
      .filter((vm) => !vm.deleted)
      .map((vm) => ({
        ref: { backend: 'gce' as const, name: vm.request.name, zone: vm.request.offer.zone },
        owner: vm.request.owner,
        workflowId: vm.request.agent.runId,
        lifecycle: this.snapshotOf(vm).lifecycle as FleetResource['lifecycle'],
        lastStartAt: vm.startedAt,
        createdAt: vm.startedAt,
      }));
  }

  async readAgent(ref: ResourceRef): Promise<AgentValues> {
    const vm = this.vms.get(ref.name);
    if (!vm || vm.deleted) return {};
    const { lifecycle: _lifecycle, preempted: _preempted, ...agent } = this.snapshotOf(vm);
    return agent;
  }

  async preemptedAmong(refs: ResourceRef[]): Promise<ResourceRef[]> {
    return refs.filter((ref) => {
      const vm = this.vms.get(ref.name);
      return vm !== undefined && this.snapshotOf(vm).preempted;
    });
  }

  async release({ ref, owner }: ReleaseRequest): Promise<ReleaseResult> {
    const vm = this.vms.get(ref.name);
    if (!vm || vm.deleted) return { outcome: ReleaseOutcome.Absent };
    if (!isOwnedBy(vm.request.labels, owner)) return { outcome: ReleaseOutcome.NotOurs };
    if (this.releaseDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.releaseDelayMs));
    vm.deleted = true;
    return { outcome: ReleaseOutcome.Deleted, startedAt: vm.startedAt, stoppedAt: new Date().toISOString() };
  }

  async listRunResources(runId: string): Promise<ResourceRef[]> {
    return [...this.vms.values()]
      .filter((vm) => !vm.deleted && vm.request.labels['sterna-run'] === runId)
      .map((vm) => ({ backend: 'gce' as const, name: vm.request.name, zone: vm.request.offer.zone }));
  }

  /** Resume checkpoints each VM was given, in creation order. */
  resumedFrom(): (number | undefined)[] {
    return this.created.map((name) => this.vms.get(name)!.request.agent.resumeFrom?.step);
  }
}
