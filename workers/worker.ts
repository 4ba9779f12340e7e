/**
 * Builds a Sterna worker: the trainingRun and fleetObserver workflows plus their
 * activities on one task queue. Production ships a prebuilt bundle (`workflowBundle`);
 * development and tests bundle from source (`workflowsPath`).
 *
 * With a namespace per team (`namespaces`, docs/tenancy.md), `createSternaWorkers` makes
 * one Temporal worker per namespace (the system one and each team's) in this process, all
 * sharing one set of activities: the same providers, placement caches and read budget.
 */
import { getHeapStatistics } from 'node:v8';
import { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { type NativeConnection, Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { createActivities, type Providers } from '../activities';
import { sharedModules, workflowsPath } from './bundle';
import type { WorkerVersion } from './deployment';
import { cachedRunsFor } from './process-tuning';
import { createFleetActivities, observerAsker, type ObserverOptions } from '../activities/fleet';
import { createPricingActivities, priceBookReader, type PricingOptions } from '../activities/pricing';
import type { PriceBookSettings } from '../workflows/api';
import { sternaDataConverter } from '../codec/data-converter';
import { DEFAULT_MAX_CONCURRENT_ACTIVITIES } from '../config/worker-config';
import { createReaperActivities } from '../activities/reaper';
import { createTeamActivities } from '../activities/teams';
import { createAdmissionGate } from '../activities/teams/admission-gate';
import { meteredProviders, type SternaMetrics } from '../activities/metrics';
import { createNotifyActivities, type NotifyOptions } from '../activities/notify';
import { createZoneActivities, zoneMemoryReader } from '../activities/zones';
import { createThroughputActivities } from '../activities/plan';
import { createMemoryActivities } from '../activities/memories';
import { createStorageActivities, type BucketLocator } from '../activities/storage';
import { createLogActivities } from '../activities/logs';
import type { LogStoreSettings } from '../logs';
import { createCheckActivities, type CheckTargets } from '../activities/check';
import type { DatasetChecker } from '../activities/storage';
import type { NamespaceClients } from '../activities/namespaces';

export interface SternaWorkerOptions {
  connection: NativeConnection;
  namespace?: string;
  taskQueue: string;
  providers: Providers;
  workflowBundle?: WorkflowBundleOption;
  maxConcurrentActivities?: number;
  /** Workflows kept in memory between their tasks (default: as many as the heap limit fits, process-tuning.ts). */
  maxCachedWorkflows?: number;
  /** Threads running workflow tasks (the SDK's `workflowThreadPoolSize`); default one. */
  workflowThreads?: number;
  /** The client the fleet observer signals runs with; by default one on `connection`. */
  client?: Client;
  /** What the fleet observer is started with (interval, read budget...). */
  observer?: ObserverOptions;
  /**
   * Keep a price book (the priceBook workflow, activities/pricing): runs price offers from
   * it. Without it, each provider prices from its own book (the bundled catalog).
   */
  prices?: PricingOptions & { settings: PriceBookSettings };
  /** Payload encryption; by default codec/data-converter.ts's, from the environment. */
  dataConverter?: DataConverter;
  /** Feed these Prometheus metrics from the activities (their providers are metered). */
  metrics?: SternaMetrics;
  /** Team webhooks and the web UI link for notifications (the client is this worker's). */
  notify?: Omit<NotifyOptions, 'client'>;
  /** Reads where datasets' buckets live (activities/storage); without it every bucket's location is unknown. */
  storage?: BucketLocator;
  /** Checks that each run's datasets exist before it creates a VM (activities/storage/datasets.ts); without it nothing is checked. */
  datasets?: DatasetChecker;
  /**
   * The Worker Deployment version this worker is (workers/deployment.ts): every workflow it
   * starts is pinned to it. Absent: unversioned (tests, and a fleet that deploys by hand).
   */
  version?: WorkerVersion;
  /** Where the runs' logs are read back (a failed run's last lines); without it none are. */
  logs?: LogStoreSettings;
  /** What the checks before each run read (workers/providers.ts buildCheckTargets); without them runs are not checked. */
  checks?: CheckTargets;
  /**
   * The system and team namespaces (activities/namespaces.ts): fleet workflows are reached
   * in the system one, runs in their team's. Absent: everything in `namespace`, as before.
   */
  namespaces?: NamespaceClients;
}

/**
 * The activities of every Sterna workflow, built once: workers of several namespaces in
 * one process share them (and so their providers, caches and read budget). Which
 * namespace each one acts in is the `namespaces`' and the calling workflow's.
 */
export function createSternaActivities(options: Omit<SternaWorkerOptions, 'taskQueue' | 'workflowBundle' | 'maxConcurrentActivities' | 'maxCachedWorkflows' | 'workflowThreads' | 'version'>): object {
  const namespace = options.namespace ?? 'default';
  const dataConverter = options.dataConverter ?? sternaDataConverter();
  const namespaces = options.namespaces;
  // The fleet workflows' client: the system namespace's, or the one namespace there is.
  const client = namespaces?.system ?? options.client ?? new Client({ connection: options.connection, namespace, dataConverter });
  const providers = options.metrics ? meteredProviders(options.providers, options.metrics) : options.providers;
  return {
    ...createActivities(providers, {
      ...(options.prices ? { priceBook: priceBookReader(client, options.prices.settings, options.prices.catalog) } : {}),
      askObserver: observerAsker({ providers, client, observer: options.observer }),
      readZoneMemory: zoneMemoryReader({ providers, client }),
      ...(namespaces?.tenancy.mode === 'namespaces' ? { admissionGate: createAdmissionGate(namespaces) } : {}),
    }),
    ...createFleetActivities({ providers, client, namespaces, observer: options.observer }),
    ...createPricingActivities(options.prices ?? {}),
    ...createReaperActivities({ providers, client, namespaces }),
    ...createTeamActivities({ client, namespaces, teamWebhooks: options.notify?.teams }),
    ...createNotifyActivities({ ...options.notify, client, namespaces }),
    ...createZoneActivities({ providers, client }),
    ...createThroughputActivities({ client }),
    ...createMemoryActivities({ providers, client }),
    ...createStorageActivities(options.storage, options.datasets),
    ...createLogActivities(options.logs),
    ...createCheckActivities(options.checks),
  };
}

/**
 * One worker per namespace the `namespaces` name (the system one first, then each team's),
 * on the same task queue name in each, sharing one set of activities.
 */
export async function createSternaWorkers(options: SternaWorkerOptions & { namespaces: NamespaceClients }): Promise<{ namespace: string; worker: Worker }[]> {
  const activities = createSternaActivities(options);
  const { system, teams } = options.namespaces.tenancy;
  const served = [...new Set([system, ...teams])];
  const workers: { namespace: string; worker: Worker }[] = [];
  for (const namespace of served) workers.push({ namespace, worker: await createSternaWorker({ ...options, namespace, client: options.namespaces.of(namespace) }, activities) });
  return workers;
}

/** One worker in `options.namespace`; `activities` when they are shared with other namespaces' workers (createSternaWorkers). */
export async function createSternaWorker(options: SternaWorkerOptions, activities: object = createSternaActivities(options)): Promise<Worker> {
  const namespace = options.namespace ?? 'default';
  const dataConverter = options.dataConverter ?? sternaDataConverter();
  return Worker.create({
    connection: options.connection,
    namespace,
    dataConverter,
    taskQueue: options.taskQueue,
    ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : { workflowsPath: workflowsPath(), bundlerOptions: { preloadModules: sharedModules() } }),
    activities,
    // Activities mostly wait on cloud APIs: many fit in one process.
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivities ?? DEFAULT_MAX_CONCURRENT_ACTIVITIES,
    // The SDK's own default assumes 1.7 MB a cached workflow; a Sterna run holds about 0.4.
    maxCachedWorkflows: options.maxCachedWorkflows ?? cachedRunsFor(getHeapStatistics().heap_size_limit / 2 ** 20),
    ...(options.workflowThreads !== undefined ? { workflowThreadPoolSize: options.workflowThreads } : {}),
    // Cancellation reaches an activity through its heartbeats; send them promptly.
    maxHeartbeatThrottleInterval: '2 seconds',
    defaultHeartbeatThrottleInterval: '1 second',
    // Let a release in flight finish when the worker is asked to stop.
    shutdownGraceTime: '10 seconds',
    ...(options.version ? { workerDeploymentOptions: { version: options.version, useWorkerVersioning: true, defaultVersioningBehavior: 'PINNED' as const } } : {}),
  });
}
