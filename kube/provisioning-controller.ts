/**
 * A stand-in for GKE's queued provisioning (Dynamic Workload Scheduler flex-start through
 * the cluster autoscaler), beside the stand-in kubelet (node-agent.ts), so the GKE tests
 * run Sterna's production path against a real API server. For each ProvisioningRequest of
 * class `queued-provisioning.gke.io` it does what GKE does, by the conditions GKE sets:
 *
 *   Accepted=True at once
 *   grant   after `waitMs`: a flex-start node (zone and GPU from the PodTemplate's node
 *           selector) joins, then Provisioned=True
 *   fail    after `waitMs`: Failed=True (no capacity within the request's wait)
 *   expire  after `waitMs`: Provisioned=True with no node, then BookingExpired=True
 *           `expireAfterMs` later (the booking lapsed before the pods arrived)
 *
 * A granted node runs at most the request's `maxRunDurationSeconds` (GKE's default, 7 days,
 * without one): then, as GKE does, the flex-start VM under it stops, and the kubelet's
 * graceful node shutdown stops its pods (DisruptionTarget, SIGTERM, `cutGraceSeconds`)
 * before the node is gone. (GKE documents the node's end; the pods' disruption condition is
 * the kubelet's, an assumption about what a real cut shows.) When the request is deleted
 * its node is scaled away (its pods stopped). What a zone does is set per zone
 * (`setBehaviour`), `grant` by default.
 */
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { watchContinuously } from './continuous-watch';
import type { NodeAgent } from './node-agent';
import { PROVISIONING_REQUEST } from './provisioning-request-crd';

export const QUEUED_PROVISIONING_CLASS = 'queued-provisioning.gke.io';

/** GKE's run duration for a request that names none: 7 days. */
const DEFAULT_MAX_RUN_DURATION_SECONDS = 7 * 24 * 3600;

export type Behaviour = { kind: 'grant'; waitMs: number } | { kind: 'fail'; waitMs: number } | { kind: 'expire'; waitMs: number; expireAfterMs: number };

interface ProvisioningRequest {
  metadata: { name: string; namespace: string; uid?: string; deletionTimestamp?: string };
  spec: { provisioningClassName: string; podSets: { count: number; podTemplateRef: { name: string } }[]; parameters?: Record<string, string> };
  status?: { conditions?: { type: string; status: string; reason: string; message: string; lastTransitionTime: string }[] };
}

const ZONE_LABEL = 'topology.kubernetes.io/zone';
const ACCELERATOR_LABEL = 'cloud.google.com/gke-accelerator';

export class ProvisioningController {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly behaviour = new Map<string, Behaviour>();
  private readonly handled = new Set<string>();
  /** Request uid -> the node it brought. */
  /** The nodes each granted request brought (one per pod of its pod set). */
  private readonly nodes = new Map<string, string[]>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private watch?: { abort(): void };
  private readonly namespace: string;

  constructor(
    private readonly kc: KubeConfig,
    private readonly agent: NodeAgent,
    options: { namespace?: string; defaultBehaviour?: Behaviour; cutGraceSeconds?: number } = {},
  ) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.core = kc.makeApiClient(CoreV1Api);
    this.namespace = options.namespace ?? 'default';
    this.defaultBehaviour = options.defaultBehaviour ?? { kind: 'grant', waitMs: 1000 };
    this.cutGraceSeconds = options.cutGraceSeconds ?? 30;
  }

  /** The graceful node shutdown's time for the pods of a node cut at its run duration. */
  private readonly cutGraceSeconds: number;

  private readonly defaultBehaviour: Behaviour;

  /** What requests for a zone meet from now on. */
  setBehaviour(zone: string, behaviour: Behaviour | undefined): void {
    if (behaviour) this.behaviour.set(zone, behaviour);
    else this.behaviour.delete(zone);
  }

  async start(): Promise<void> {
    const { group, version, plural } = PROVISIONING_REQUEST;
    this.watch = await watchContinuously(
      this.kc,
      `/apis/${group}/${version}/namespaces/${this.namespace}/${plural}`,
      (type: string, request: ProvisioningRequest) => void this.onRequest(type, request).catch((err: Error) => console.error(`provisioning controller: ${err.message}`)),
      (line) => console.error(`provisioning controller: ${line}`),
    );
  }

  private async onRequest(type: string, request: ProvisioningRequest): Promise<void> {
    if (type === 'ERROR' || type === 'BOOKMARK' || request.spec?.provisioningClassName !== QUEUED_PROVISIONING_CLASS) return;
    const uid = request.metadata.uid ?? request.metadata.name;
    if (type === 'DELETED') {
      const nodes = this.nodes.get(uid) ?? [];
      this.nodes.delete(uid);
      for (const node of nodes) await this.agent.removeNode(node);
      return;
    }
    if (this.handled.has(uid)) return;
    this.handled.add(uid);
    const template = await this.core.readNamespacedPodTemplate({ name: request.spec.podSets[0].podTemplateRef.name, namespace: request.metadata.namespace });
    const selector = template.template?.spec?.nodeSelector ?? {};
    const zone = selector[ZONE_LABEL];
    const accelerator = selector[ACCELERATOR_LABEL];
    const gpus = Number(template.template?.spec?.containers?.[0]?.resources?.limits?.['nvidia.com/gpu'] ?? 1);
    await this.setCondition(request, 'Accepted', 'True', 'Accepted', 'The ProvisioningRequest was accepted.');
    const behaviour = (zone && this.behaviour.get(zone)) || this.defaultBehaviour;
    this.after(behaviour.waitMs, async () => {
      if (behaviour.kind === 'fail') {
        await this.setCondition(request, 'Failed', 'True', 'FailedToProvision', `No capacity for ${gpus} x ${accelerator} in ${zone} within the request's wait.`);
        return;
      }
      if (behaviour.kind === 'grant' && zone && accelerator) {
        // One node per pod of the set: a gang's request brings all of its nodes at once.
        const count = Math.max(1, request.spec.podSets[0].count);
        const base = `flex-${request.metadata.name}`;
        const names = count === 1 ? [base.slice(0, 63)] : Array.from({ length: count }, (_, i) => `${base.slice(0, 59)}-${i}`);
        for (const name of names) await this.agent.addNode({ name, zone, accelerator, gpus, spot: false, flexStart: true });
        this.nodes.set(uid, names);
        const runSeconds = Number(request.spec.parameters?.maxRunDurationSeconds ?? DEFAULT_MAX_RUN_DURATION_SECONDS);
        this.after((Number.isFinite(runSeconds) && runSeconds > 0 ? runSeconds : DEFAULT_MAX_RUN_DURATION_SECONDS) * 1000, () => this.cut(uid, names));
      }
      await this.setCondition(request, 'Provisioned', 'True', 'Provisioned', 'The capacity was provisioned; pods may consume it.');
      if (behaviour.kind === 'expire') {
        this.after(behaviour.expireAfterMs, () => this.setCondition(request, 'BookingExpired', 'True', 'BookingExpired', 'The booking expired before the pods consumed it.'));
      }
    });
  }

  /** The request's run duration is over: its nodes shut down, stopping their pods, and are gone. */
  private async cut(uid: string, names: string[]): Promise<void> {
    if (this.nodes.get(uid) !== names) return;
    this.nodes.delete(uid);
    for (const node of names) await this.agent.shutdownNode(node, this.cutGraceSeconds);
  }

  private after(ms: number, fn: () => Promise<void>): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void fn().catch((err: Error) => console.error(`provisioning controller: ${err.message}`));
    }, ms);
    this.timers.add(timer);
  }

  private async setCondition(request: ProvisioningRequest, type: string, status: string, reason: string, message: string): Promise<void> {
    const { group, version, plural } = PROVISIONING_REQUEST;
    const where = { group, version, plural, namespace: request.metadata.namespace, name: request.metadata.name };
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = (await this.custom.getNamespacedCustomObject(where).catch(() => undefined)) as ProvisioningRequest | undefined;
      if (!current || current.metadata.uid !== request.metadata.uid) return;
      const conditions = (current.status?.conditions ?? []).filter((c) => c.type !== type);
      conditions.push({ type, status, reason, message, lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') });
      try {
        await this.custom.replaceNamespacedCustomObjectStatus({ ...where, body: { ...current, status: { ...current.status, conditions } } });
        return;
      } catch {
        // A conflicting write: read again.
      }
    }
  }

  stop(): void {
    const watch = this.watch;
    this.watch = undefined;
    watch?.abort();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }
}
