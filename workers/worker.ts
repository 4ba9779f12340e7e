/**
 * Builds a Sterna worker: the trainingRun and fleetObserver workflows plus their
 * activities on one task queue. Production ships a prebuilt bundle (`workflowBundle`);
 * development and tests bundle from source (`workflowsPath`).
 */
import { Client } from '@temporalio/client';
import { type NativeConnection, Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { createActivities, type Providers } from '../activities';
import { createFleetActivities, type ObserverOptions } from '../activities/fleet';
import { createReaperActivities } from '../activities/reaper';

export interface SternaWorkerOptions {
  connection: NativeConnection;
  namespace?: string;
  taskQueue: string;
  providers: Providers;
  workflowBundle?: WorkflowBundleOption;
  maxConcurrentActivities?: number;
  /** The client the fleet observer signals runs with; by default one on `connection`. */
  client?: Client;
  /** What the fleet observer is started with (interval, read budget...). */
  observer?: ObserverOptions;
}

export function workflowsPath(): string {
  return require.resolve('../workflows');
}

export async function createSternaWorker(options: SternaWorkerOptions): Promise<Worker> {
  const namespace = options.namespace ?? 'default';
  const client = options.client ?? new Client({ connection: options.connection, namespace });
  return Worker.create({
    connection: options.connection,
    namespace,
    taskQueue: options.taskQueue,
    ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : { workflowsPath: workflowsPath() }),
    activities: {
      ...createActivities(options.providers),
      ...createFleetActivities({ providers: options.providers, client, observer: options.observer }),
      ...createReaperActivities({ providers: options.providers, client }),
    },
    // Activities mostly wait on cloud APIs: many fit in one process.
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivities ?? 200,
    // Cancellation reaches an activity through its heartbeats; send them promptly.
    maxHeartbeatThrottleInterval: '2 seconds',
    defaultHeartbeatThrottleInterval: '1 second',
    // Let a release in flight finish when the worker is asked to stop.
    shutdownGraceTime: '10 seconds',
  });
}
