/**
 * Builds a Sterna worker: the trainingRun and fleetObserver workflows plus their
 * activities on one task queue. Production ships a prebuilt bundle (`workflowBundle`);
 * development and tests bundle from source (`workflowsPath`).
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
import type { PriceBookSettings } from '../workflows/pricing-book/contract';
import { sternaDataConverter } from '../config/data-converter';
import { DEFAULT_MAX_CONCURRENT_ACTIVITIES } from '../config/worker-config';
import { createReaperActivities } from '../activities/reaper';
import { createTeamActivities } from '../activities/teams';
import { meteredProviders } from '../activities/metrics/metered-provider';
import type { SternaMetrics } from '../activities/metrics/registry';
import { createNotifyActivities, type NotifyOptions } from '../activities/notify';
import { createZoneActivities, zoneMemoryReader } from '../activities/zones';
import { createThroughputActivities } from '../activities/plan';
import { createMemoryActivities } from '../activities/memories';
import { createStorageActivities, type BucketLocator } from '../activities/storage';
import { createLogActivities, type LogStoreSettings } from '../activities/logs';
import { createCheckActivities, type CheckTargets } from '../activities/check';
import type { DatasetChecker } from '../activities/storage/datasets';

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
  /** Payload encryption; by default config/data-converter.ts's, from the environment. */
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
}

export async function createSternaWorker(options: SternaWorkerOptions): Promise<Worker> {
  const namespace = options.namespace ?? 'default';
  const dataConverter = options.dataConverter ?? sternaDataConverter();
  const client = options.client ?? new Client({ connection: options.connection, namespace, dataConverter });
  const providers = options.metrics ? meteredProviders(options.providers, options.metrics) : options.providers;
  return Worker.create({
    connection: options.connection,
    namespace,
    dataConverter,
    taskQueue: options.taskQueue,
    ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : { workflowsPath: workflowsPath(), bundlerOptions: { preloadModules: sharedModules() } }),
    activities: {
      ...createActivities(providers, {
        ...(options.prices ? { priceBook: priceBookReader(client, options.prices.settings, options.prices.catalog) } : {}),
        askObserver: observerAsker({ providers, client, observer: options.observer }),
        readZoneMemory: zoneMemoryReader({ providers, client }),
      }),
      ...createFleetActivities({ providers, client, observer: options.observer }),
      ...createPricingActivities(options.prices ?? {}),
      ...createReaperActivities({ providers, client }),
      ...createTeamActivities({ client, teamWebhooks: options.notify?.teams }),
      ...createNotifyActivities({ ...options.notify, client }),
      ...createZoneActivities({ providers, client }),
      ...createThroughputActivities({ client }),
      ...createMemoryActivities({ providers, client }),
      ...createStorageActivities(options.storage, options.datasets),
      ...createLogActivities(options.logs),
      ...createCheckActivities(options.checks),
    },
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
