/**
 * A stand-in kubelet for fake GPU nodes, so the GKE tests run on a real control plane
 * without machines: it registers Nodes the way GKE labels and taints its spot and
 * on-demand GPU pools, watches the pods the real scheduler binds to them, runs each
 * pod's container command as a local process group (the image is ignored), reports
 * Running / Succeeded / Failed with exit codes, and can shut a spot node down the way
 * GKE does:
 *
 *   DisruptionTarget (TerminationByKubelet) -> SIGTERM -> grace period -> SIGKILL
 *   -> pod Failed -> Node deleted
 *
 * What a real kubelet does that this does not: images, volumes, probes, cgroups,
 * networking. The service-account token volume is replaced by a token file whose path
 * is given to the pod as STERNA_K8S_TOKEN_FILE; cluster DNS by `resolveServiceName`
 * (a headless Service's pod name in the environment becomes that pod's loopback address).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CoreV1Api, type KubeConfig, type V1EnvVar, type V1Pod } from '@kubernetes/client-node';
import { guardProcessGroup, stopGuard } from '../processes/process-guard';
import { watchContinuously } from './continuous-watch';
import { devicesPerGpu, SharingStrategy, SliceLabel } from '../workflows/api';

/** Status writes a pod gets before the stand-in kubelet gives up on it (about a minute of conflicts). */
const STATUS_WRITE_ATTEMPTS = 150;

export interface FakeNode {
  name: string;
  zone: string;
  accelerator: string;
  gpus: number;
  spot: boolean;
  /** GCE machine type, labelled `node.kubernetes.io/instance-type` as on GKE. */
  machineType?: string;
  /**
   * A node of a flex-start (queued provisioning) pool, added by the stand-in provisioning
   * controller: labelled `cloud.google.com/gke-flex-start` and tainted
   * `cloud.google.com/gke-queued`, as GKE does.
   */
  flexStart?: boolean;
  /** A multi-instance GPU node pool's partition size (e.g. `1g.10gb`): each GPU is advertised as its partitions. */
  partition?: string;
  /** A time-sharing node pool: each GPU (or partition) is advertised as this many shares. */
  maxSharedClients?: number;
}

/** A container's `valueFrom.fieldRef` as the kubelet resolves it (the downward API's pod fields). */
export function fieldValue(pod: V1Pod, fieldPath: string): string | undefined {
  const keyed = /^metadata\.(annotations|labels)\['([^']+)'\]$/.exec(fieldPath);
  if (keyed) return pod.metadata?.[keyed[1] as 'annotations' | 'labels']?.[keyed[2]];
  if (fieldPath === 'metadata.name') return pod.metadata?.name;
  if (fieldPath === 'metadata.namespace') return pod.metadata?.namespace;
  if (fieldPath === 'spec.nodeName') return pod.spec?.nodeName;
  return undefined;
}

/**
 * A pod's address here. A pod named through a headless Service (`hostname` and
 * `subdomain`, as an Indexed Job's pods are) gets a loopback address of its own, derived
 * from its DNS name so that any pod can know it before it starts (Linux routes all of
 * 127.0.0.0/8 to loopback); every other pod shares 127.0.0.1.
 */
export function podAddress(hostname: string | undefined, subdomain: string | undefined, namespace: string): string {
  if (!hostname || !subdomain) return '127.0.0.1';
  let h = 0x811c9dc5;
  for (const c of `${hostname}.${subdomain}.${namespace}`) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
  // 127.16.0.1 .. 127.31.255.254: clear of 127.0.0.x, which other test beds use.
  return `127.${16 + ((h >>> 16) & 0x0f)}.${(h >>> 8) & 0xff}.${1 + ((h & 0xff) % 254)}`;
}

/**
 * Cluster DNS, as far as the environment goes: a value that is a headless Service's pod
 * name (`<hostname>.<service>.<namespace>.svc`, optionally `.cluster.local`) becomes that
 * pod's address, which is what a lookup of the name returns on a cluster.
 */
export function resolveServiceName(value: string): string {
  const name = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?$/.exec(value);
  return name ? podAddress(name[1], name[3], name[5]) : value;
}

interface RunningPod {
  key: string;
  child: ChildProcess;
  exited: Promise<number>;
  startedAt: string;
  stopping: boolean;
}

export interface NodeAgentOptions {
  workDir: string;
  /** The API server as pods reach it (KUBERNETES_SERVICE_HOST / _PORT). */
  apiHost: string;
  apiPort: number;
  token: string;
  namespace?: string;
}

export class NodeAgent {
  private readonly core: CoreV1Api;
  private readonly nodes = new Map<string, FakeNode>();
  private readonly pods = new Map<string, RunningPod>();
  /** Pods whose secrets are being read (or could not be): not started twice. */
  private readonly resolving = new Set<string>();
  private watch?: { abort(): void };
  private readonly namespace: string;

  constructor(
    private readonly kc: KubeConfig,
    private readonly options: NodeAgentOptions,
  ) {
    this.core = kc.makeApiClient(CoreV1Api);
    this.namespace = options.namespace ?? 'default';
  }

  async addNode(node: FakeNode): Promise<void> {
    this.nodes.set(node.name, node);
    const labels: Record<string, string> = {
      'kubernetes.io/hostname': node.name,
      'topology.kubernetes.io/zone': node.zone,
      'topology.kubernetes.io/region': node.zone.replace(/-[a-z]$/, ''),
      'cloud.google.com/gke-accelerator': node.accelerator,
      'cloud.google.com/gke-nodepool': `${node.flexStart ? 'flex' : node.spot ? 'spot' : 'standard'}-${node.accelerator}`,
    };
    if (node.spot) labels['cloud.google.com/gke-spot'] = 'true';
    if (node.flexStart) labels['cloud.google.com/gke-flex-start'] = 'true';
    if (node.machineType) labels['node.kubernetes.io/instance-type'] = node.machineType;
    // GKE's labels on MIG and time-sharing pools; the device plugin then advertises every
    // partition or share as one nvidia.com/gpu (its default "single" strategy).
    if (node.partition) labels[SliceLabel.Partition] = node.partition;
    if (node.maxSharedClients !== undefined) {
      labels[SliceLabel.SharingStrategy] = SharingStrategy.TimeSharing;
      labels[SliceLabel.MaxSharedClients] = String(node.maxSharedClients);
    }
    const devices = node.gpus * devicesPerGpu(node.accelerator, node);
    // GKE taints GPU nodes (and, on request, spot nodes) so only pods that ask land there.
    const taints = [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' }];
    if (node.spot) taints.push({ key: 'cloud.google.com/gke-spot', value: 'true', effect: 'NoSchedule' });
    if (node.flexStart) taints.push({ key: 'cloud.google.com/gke-queued', value: 'true', effect: 'NoSchedule' });
    const resources = { cpu: '8', memory: '32Gi', pods: '110', 'nvidia.com/gpu': String(devices), 'ephemeral-storage': '100Gi' };
    const created = await this.core.createNode({ body: { metadata: { name: node.name, labels }, spec: { taints } } });
    const now = new Date();
    created.status = {
      capacity: resources,
      allocatable: resources,
      conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'sterna node agent', lastHeartbeatTime: now, lastTransitionTime: now }],
      addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
      nodeInfo: {
        architecture: 'amd64',
        operatingSystem: 'linux',
        kubeletVersion: 'v1.34.4',
        kubeProxyVersion: '',
        containerRuntimeVersion: 'sterna-local://0',
        kernelVersion: '',
        osImage: 'local processes',
        bootID: node.name,
        machineID: node.name,
        systemUUID: node.name,
      },
    };
    await this.core.replaceNodeStatus({ name: node.name, body: created });
    // The API server taints a new node not-ready; the node lifecycle controller lifts it
    // once the kubelet reports Ready. We run no such controller, so we lift it here.
    const ready = await this.core.readNode({ name: node.name });
    ready.spec = { ...ready.spec, taints: (ready.spec?.taints ?? []).filter((t) => t.key !== 'node.kubernetes.io/not-ready') };
    await this.core.replaceNode({ name: node.name, body: ready });
  }

  async start(): Promise<void> {
    this.watch = await watchContinuously(
      this.kc,
      `/api/v1/namespaces/${this.namespace}/pods`,
      (type: string, pod: V1Pod) => void this.onPod(type, pod).catch((err: Error) => console.error(`node agent: ${err.message}`)),
      (line) => console.error(`node agent: ${line}`),
    );
  }

  private async onPod(type: string, pod: V1Pod): Promise<void> {
    if (type === 'ERROR' || type === 'BOOKMARK' || !pod.metadata || !pod.spec) return;
    const key = `${pod.metadata!.namespace}/${pod.metadata!.name}`;
    const node = pod.spec?.nodeName;
    if (!node || !this.nodes.has(node)) return;
    const running = this.pods.get(key);
    if (type === 'DELETED' || pod.metadata?.deletionTimestamp) {
      this.resolving.delete(key);
      if (running) await this.terminate(running, pod.spec?.terminationGracePeriodSeconds ?? 30);
      if (type !== 'DELETED') await this.core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, gracePeriodSeconds: 0 }).catch(() => undefined);
      this.pods.delete(key);
      return;
    }
    if (!running && !this.resolving.has(key) && pod.status?.phase === 'Pending') this.run(pod, key);
  }

  private run(pod: V1Pod, key: string): void {
    const container = pod.spec!.containers[0];
    const argv = [...(container.command ?? []), ...(container.args ?? [])];
    const dir = join(this.options.workDir, 'pods', pod.metadata!.namespace!, pod.metadata!.name!);
    mkdirSync(dir, { recursive: true });
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, this.options.token);
    const env: Record<string, string> = {
      // The pod's `node` is the one running this kubelet (a supported one, whatever PATH
      // the test run was started with), as an emulator VM's is.
      PATH: `${dirname(process.execPath)}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      HOME: dir,
      HOSTNAME: pod.metadata!.name!,
      KUBERNETES_SERVICE_HOST: this.options.apiHost,
      KUBERNETES_SERVICE_PORT: String(this.options.apiPort),
      STERNA_K8S_TOKEN_FILE: tokenFile,
    };
    for (const e of container.env ?? []) {
      const field = e.valueFrom?.fieldRef?.fieldPath;
      const value = field ? fieldValue(pod, field) : e.value;
      if (value !== undefined) env[e.name] = resolveServiceName(value);
    }
    // secretKeyRef, as the kubelet resolves it: read the Secret, or the container cannot start.
    const secretRefs = (container.env ?? []).filter((e) => e.valueFrom?.secretKeyRef);
    if (secretRefs.length > 0) {
      // Until the pod is deleted, its events do not start it again (nor report it again).
      this.resolving.add(key);
      void this.secretValues(pod.metadata!.namespace!, secretRefs).then(
        (values) => {
          this.resolving.delete(key);
          this.launch(pod, key, argv, dir, { ...env, ...values });
        },
        (err: Error) => this.reportWaiting(pod, 'CreateContainerConfigError', err.message),
      );
      return;
    }
    this.launch(pod, key, argv, dir, env);
  }

  private async secretValues(namespace: string, refs: V1EnvVar[]): Promise<Record<string, string>> {
    const values: Record<string, string> = {};
    for (const e of refs) {
      const { name, key, optional } = e.valueFrom!.secretKeyRef!;
      const secret = await this.core.readNamespacedSecret({ name: name!, namespace }).catch(() => undefined);
      const data = secret?.data?.[key];
      if (data === undefined) {
        if (optional) continue;
        throw new Error(secret ? `couldn't find key ${key} in Secret ${namespace}/${name}` : `secret "${name}" not found`);
      }
      values[e.name] = Buffer.from(data, 'base64').toString('utf8');
    }
    return values;
  }

  private async reportWaiting(pod: V1Pod, reason: string, message: string): Promise<void> {
    await this.updateStatus(pod.metadata!.name!, pod.metadata!.namespace!, (p) => {
      p.status = { ...p.status, containerStatuses: [{ name: pod.spec!.containers[0].name, image: pod.spec!.containers[0].image ?? '', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason, message } } }] };
    });
  }

  private launch(pod: V1Pod, key: string, argv: string[], dir: string, env: Record<string, string>): void {
    const fd = openSync(join(dir, 'container.log'), 'a');
    const child = spawn(argv[0], argv.slice(1), { cwd: dir, env, stdio: ['ignore', fd, fd], detached: true });
    closeSync(fd);
    // Pod processes die with the test run even when it is killed (no kubelet outlives it).
    const guard = child.pid === undefined ? undefined : guardProcessGroup(child.pid);
    child.once('exit', () => stopGuard(guard));
    const exited = new Promise<number>((resolve) => {
      child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 + (signal === 'SIGKILL' ? 9 : 15) : 1)));
      child.once('error', () => resolve(127));
    });
    const record: RunningPod = { key, child, exited, startedAt: new Date().toISOString(), stopping: false };
    this.pods.set(key, record);
    void this.reportRunning(pod, record).then(async () => {
      const code = await exited;
      if (!record.stopping) await this.reportExit(pod.metadata!.name!, pod.metadata!.namespace!, record, code);
    });
  }

  /**
   * Writes a pod's status as a kubelet does: until it lands or the pod is gone. A busy
   * agent patches its annotations several times a second, so a loaded machine sees many
   * conflicts in a row; giving up after a few left a pod that ran with no start time.
   */
  private async updateStatus(name: string, namespace: string, change: (pod: V1Pod) => void): Promise<void> {
    for (let attempt = 0; attempt < STATUS_WRITE_ATTEMPTS; attempt++) {
      const pod = await this.core.readNamespacedPodStatus({ name, namespace }).catch(() => undefined);
      if (!pod) return;
      change(pod);
      try {
        await this.core.replaceNamespacedPodStatus({ name, namespace, body: pod });
        return;
      } catch {
        // A conflict with the agent's own annotation patches: read again and retry.
        await new Promise((resolve) => setTimeout(resolve, Math.min(500, 20 * (attempt + 1))));
      }
    }
  }

  private async reportRunning(pod: V1Pod, record: RunningPod): Promise<void> {
    const container = pod.spec!.containers[0];
    const now = new Date(record.startedAt);
    await this.updateStatus(pod.metadata!.name!, pod.metadata!.namespace!, (p) => {
      p.status = {
        ...p.status,
        phase: 'Running',
        hostIP: '127.0.0.1',
        podIP: podAddress(pod.spec?.hostname, pod.spec?.subdomain, pod.metadata!.namespace!),
        startTime: now,
        conditions: [
          { type: 'PodScheduled', status: 'True', lastTransitionTime: now },
          { type: 'Initialized', status: 'True', lastTransitionTime: now },
          { type: 'ContainersReady', status: 'True', lastTransitionTime: now },
          { type: 'Ready', status: 'True', lastTransitionTime: now },
        ],
        containerStatuses: [{ name: container.name, image: container.image ?? '', imageID: '', ready: true, started: true, restartCount: 0, state: { running: { startedAt: now } } }],
      };
    });
  }

  private async reportExit(name: string, namespace: string, record: RunningPod, code: number, disruption?: { reason: string; message: string }): Promise<void> {
    const finishedAt = new Date();
    await this.updateStatus(name, namespace, (p) => {
      const container = p.spec!.containers[0];
      const conditions = (p.status?.conditions ?? []).map((c) => (c.type === 'Ready' || c.type === 'ContainersReady' ? { ...c, status: 'False', lastTransitionTime: finishedAt } : c));
      p.status = {
        ...p.status,
        phase: code === 0 && !disruption ? 'Succeeded' : 'Failed',
        ...(disruption ? { reason: 'Terminated', message: disruption.message } : {}),
        conditions,
        containerStatuses: [
          {
            name: container.name,
            image: container.image ?? '',
            imageID: '',
            ready: false,
            started: false,
            restartCount: 0,
            state: { terminated: { exitCode: code, reason: code === 0 ? 'Completed' : 'Error', startedAt: new Date(record.startedAt), finishedAt } },
          },
        ],
      };
    });
  }

  private async terminate(pod: RunningPod, graceSeconds: number): Promise<number> {
    pod.stopping = true;
    const signal = (s: NodeJS.Signals) => {
      try {
        process.kill(-pod.child.pid!, s);
      } catch {
        /* already gone */
      }
    };
    signal('SIGTERM');
    const killer = setTimeout(() => signal('SIGKILL'), graceSeconds * 1000);
    const code = await pod.exited;
    clearTimeout(killer);
    return code;
  }

  /** GKE's graceful node shutdown of a reclaimed spot VM. */
  async shutdownNode(name: string, graceSeconds = 3): Promise<void> {
    const message = 'Pod was terminated in response to imminent node shutdown.';
    const { items } = await this.core.listNamespacedPod({ namespace: this.namespace, fieldSelector: `spec.nodeName=${name}` });
    await Promise.all(
      items.map(async (pod) => {
        const key = `${pod.metadata!.namespace}/${pod.metadata!.name}`;
        const now = new Date();
        await this.updateStatus(pod.metadata!.name!, pod.metadata!.namespace!, (p) => {
          p.status = { ...p.status, conditions: [...(p.status?.conditions ?? []), { type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet', message, lastTransitionTime: now }] };
        });
        const running = this.pods.get(key);
        if (!running) return;
        const code = await this.terminate(running, graceSeconds);
        await this.reportExit(pod.metadata!.name!, pod.metadata!.namespace!, running, code, { reason: 'TerminationByKubelet', message });
      }),
    );
    await this.core.deleteNode({ name });
    this.nodes.delete(name);
  }

  /** A node the autoscaler scaled away: its pods are stopped, the Node deleted. */
  async removeNode(name: string, graceSeconds = 3): Promise<void> {
    for (const [key, running] of this.pods) {
      if (!key.startsWith(`${this.namespace}/`)) continue;
      const pod = await this.core.readNamespacedPod({ name: key.slice(this.namespace.length + 1), namespace: this.namespace }).catch(() => undefined);
      if (pod?.spec?.nodeName === name) {
        await this.terminate(running, graceSeconds);
        this.pods.delete(key);
      }
    }
    await this.core.deleteNode({ name }).catch(() => undefined);
    this.nodes.delete(name);
  }

  async stop(): Promise<void> {
    const watch = this.watch;
    this.watch = undefined;
    watch?.abort();
    await Promise.all([...this.pods.values()].map((p) => this.terminate(p, 1)));
    this.pods.clear();
  }
}
