/**
 * The GKE test bed: a real control plane (etcd, kube-apiserver, controller-manager,
 * scheduler, built from source), fake GPU nodes played by kube/node-agent.ts, and a
 * Sterna worker whose GKE provider talks to it through @kubernetes/client-node.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BatchV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { ObserverOptions } from '../../activities/fleet';
import { GkeProvider } from '../../activities/providers/gke';
import { catalogPriceBook } from '../../config/price-book';
import { publishExampleLocally } from '../../examples/publish';
import { startCluster, type Cluster } from '../../kube/cluster';
import { NodeAgent, type FakeNode } from '../../kube/node-agent';
import { localBucketMapper } from '../../workers/providers';
import { sternaTestWorker, uniqueTaskQueue } from './temporal';

export interface KubeStack {
  cluster: Cluster;
  kc: KubeConfig;
  core: CoreV1Api;
  batch: BatchV1Api;
  agent: NodeAgent;
  provider: GkeProvider;
  taskQueue: string;
  bucketsDir: string;
  stop(): Promise<void>;
}

export const NODES: FakeNode[] = [
  { name: 'spot-l4-a', zone: 'us-central1-a', accelerator: 'nvidia-l4', gpus: 1, spot: true, machineType: 'g2-standard-8' },
  { name: 'spot-l4-b', zone: 'us-central1-b', accelerator: 'nvidia-l4', gpus: 1, spot: true, machineType: 'g2-standard-8' },
  { name: 'spot-l4-c', zone: 'us-central1-c', accelerator: 'nvidia-l4', gpus: 1, spot: true, machineType: 'g2-standard-8' },
  { name: 'standard-l4-f', zone: 'us-central1-f', accelerator: 'nvidia-l4', gpus: 1, spot: false },
];

/** `observer`: the worker's observer options, which also bound what an observer it serves may do. */
export async function startKubeStack(options: { observer?: ObserverOptions } = {}): Promise<KubeStack> {
  const dir = mkdtempSync(join(tmpdir(), 'sterna-kube-'));
  const bucketsDir = join(dir, 'buckets');
  publishExampleLocally(bucketsDir);
  const cluster = await startCluster(join(dir, 'cluster'));
  const cleanup: (() => Promise<void>)[] = [() => cluster.stop()];
  try {
    const kc = cluster.kubeConfig();
    const agent = new NodeAgent(kc, { workDir: join(dir, 'nodes'), apiHost: '127.0.0.1', apiPort: Number(new URL(cluster.server).port), token: cluster.token });
    await agent.start();
    cleanup.push(() => agent.stop());
    for (const node of NODES) await agent.addNode(node);
    const provider = new GkeProvider({
      kubeConfig: kc,
      namespace: 'default',
      prices: catalogPriceBook(),
      pendingTimeoutSeconds: 8,
      terminationGracePeriodSeconds: 3,
      pollIntervalMs: 200,
      storageUriForVm: localBucketMapper(bucketsDir),
    });
    cleanup.push(async () => provider.close());
    const taskQueue = uniqueTaskQueue('gke');
    const worker = await sternaTestWorker(taskQueue, { gke: provider }, options.observer ? { observer: options.observer } : {});
    const running = worker.run();
    cleanup.push(async () => {
      worker.shutdown();
      await running;
    });
    return {
      cluster,
      kc,
      core: kc.makeApiClient(CoreV1Api),
      batch: kc.makeApiClient(BatchV1Api),
      agent,
      provider,
      taskQueue,
      bucketsDir,
      async stop() {
        for (const fn of cleanup.reverse()) await fn().catch(() => undefined);
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    for (const fn of cleanup.reverse()) await fn().catch(() => undefined);
    throw err;
  }
}
