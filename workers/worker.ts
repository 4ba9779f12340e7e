/**
 * Builds a Sterna worker: the trainingRun workflow plus its activities on one task
 * queue. Production ships a prebuilt bundle (`workflowBundle`); development and tests
 * bundle from source (`workflowsPath`).
 */
import { type NativeConnection, Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { createActivities, type Providers } from '../activities';

export interface SternaWorkerOptions {
  connection: NativeConnection;
  namespace?: string;
  taskQueue: string;
  providers: Providers;
  workflowBundle?: WorkflowBundleOption;
  maxConcurrentActivities?: number;
}

export function workflowsPath(): string {
  return require.resolve('../workflows');
}

export async function createSternaWorker(options: SternaWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace ?? 'default',
    taskQueue: options.taskQueue,
    ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : { workflowsPath: workflowsPath() }),
    activities: createActivities(options.providers),
    // Activities mostly wait on cloud APIs: many fit in one process.
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivities ?? 200,
    // Cancellation reaches an activity through its heartbeats; send them promptly.
    maxHeartbeatThrottleInterval: '2 seconds',
    defaultHeartbeatThrottleInterval: '1 second',
    // Let a release in flight finish when the worker is asked to stop.
    shutdownGraceTime: '10 seconds',
  });
}
