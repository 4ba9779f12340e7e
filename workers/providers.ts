/**
 * The composition root for providers: the only place that builds cloud clients.
 * Real GCE uses Application Default Credentials; the emulator gets plain HTTP on
 * loopback and a pass-through auth client, so no credential lookup leaves the machine.
 */
import { GoogleAuth, PassThroughClient } from 'google-auth-library';
import { GceProvider } from '../activities/providers/gce';
import type { PriceBook } from '../config/price-book';
import type { Providers } from '../activities';
import type { GceConfig, StorageConfig, WorkerConfig } from '../config/worker-config';
import { BucketLocator } from '../activities/storage';
import { DatasetChecker } from '../activities/storage/datasets';
import { computeClients } from '../activities/providers/gce-clients';
import type { CheckTargets } from '../activities/check';

export function gceClientOptions(gce: GceConfig): ConstructorParameters<typeof GceProvider>[0]['clientOptions'] {
  if (!gce.emulatorEndpoint) return { fallback: true };
  process.env.METADATA_SERVER_DETECTION = 'none';
  return {
    apiEndpoint: gce.emulatorEndpoint.host,
    port: gce.emulatorEndpoint.port,
    protocol: gce.emulatorEndpoint.protocol,
    authClient: new PassThroughClient(),
    fallback: true,
  };
}

/** gs://bucket/path -> file://<dir>/bucket/path, for VMs of the emulator. */
export function localBucketMapper(dir: string): (uri: string) => string {
  return (uri) => (uri.startsWith('gs://') ? `file://${dir.replace(/\/+$/, '')}/${uri.slice('gs://'.length)}` : uri);
}

export function buildGceProvider(gce: GceConfig, prices: PriceBook, pollIntervalMs?: number): GceProvider {
  return new GceProvider({
    project: gce.project,
    prices,
    clientOptions: gceClientOptions(gce),
    sourceImage: gce.sourceImage,
    serviceAccountEmail: gce.serviceAccountEmail,
    vmAccess: gce.vmAccess,
    storageUriForVm: gce.localBucketsDir ? localBucketMapper(gce.localBucketsDir) : undefined,
    pollIntervalMs,
    powerOffAfterSeconds: gce.powerOffAfterSeconds,
  });
}

/** The storage API client: no credentials over plain HTTP (the emulator), Application Default Credentials otherwise. */
export function buildBucketLocator(storage: StorageConfig | undefined): BucketLocator | undefined {
  if (!storage) return undefined;
  return storage.endpoint.startsWith('http://') ? BucketLocator.forEmulator(storage.endpoint) : BucketLocator.forGcs(storage.endpoint);
}

/**
 * The dataset check, through the path the VMs stage from: the emulator's local buckets
 * (gs:// mapped to file://) when the worker has them, the storage API otherwise.
 */
export function buildDatasetChecker(storage: StorageConfig | undefined, localBucketsDir?: string): DatasetChecker | undefined {
  if (!storage) return undefined;
  const mapper = localBucketsDir ? localBucketMapper(localBucketsDir) : undefined;
  return storage.endpoint.startsWith('http://') ? DatasetChecker.forEmulator(storage.endpoint, mapper) : DatasetChecker.forGcs(storage.endpoint);
}

export async function buildProviders(config: WorkerConfig, prices: PriceBook): Promise<Providers> {
  const providers: Providers = {};
  if (config.gce) providers.gce = buildGceProvider(config.gce, prices);
  // Loaded only when configured: the Kubernetes client costs a GCE-only worker about 37 MB.
  if (config.gke) providers.gke = await (await import('../activities/providers/gke')).createGkeProviderFromConfig(config.gke, prices);
  return providers;
}

/** testIamPermissions needs no more than reading. */
const STORAGE_CHECK_SCOPE = 'https://www.googleapis.com/auth/devstorage.read_only';

/**
 * What the checks before a run (activities/check) talk to, from the worker configuration:
 * the same Compute clients, kubeconfig and storage API the worker's providers use. `close`
 * ends the Compute clients' connections.
 */
export async function buildCheckTargets(config: Pick<WorkerConfig, 'gce' | 'gke' | 'storage'>, temporal: CheckTargets['temporal'], env: NodeJS.ProcessEnv = process.env): Promise<{ targets: CheckTargets; close(): Promise<void> }> {
  const targets: CheckTargets = { env, temporal };
  const closers: (() => Promise<void>)[] = [];
  if (config.gce) {
    const clients = computeClients(gceClientOptions(config.gce));
    closers.push(() => Promise.all(Object.values(clients).map((c: { close(): Promise<void> }) => c.close())).then(() => undefined));
    const e = config.gce.emulatorEndpoint;
    targets.gce = { project: config.gce.project, clients, emulatorEndpoint: e ? `${e.protocol}://${e.host}:${e.port}` : undefined };
  }
  if (config.gke) {
    const gke = config.gke;
    // Loaded only when configured: the Kubernetes client costs a GCE-only process about 37 MB.
    const { KubeConfig } = await import('@kubernetes/client-node');
    targets.gke = {
      namespace: gke.namespace,
      source: gke.kubeconfig,
      kubeConfig: () => {
        const kc = new KubeConfig();
        if (gke.kubeconfig) kc.loadFromFile(gke.kubeconfig);
        else kc.loadFromDefault();
        return kc;
      },
    };
  }
  if (config.storage) {
    const { endpoint } = config.storage;
    targets.storage = {
      endpoint,
      requester: endpoint.startsWith('http://') ? new PassThroughClient() : new GoogleAuth({ scopes: [STORAGE_CHECK_SCOPE] }),
      vmServiceAccount: config.gce?.vmAccess?.serviceAccountEmail ?? config.gce?.serviceAccountEmail,
    };
  }
  return { targets, close: async () => void (await Promise.all(closers.map((c) => c()))) };
}
