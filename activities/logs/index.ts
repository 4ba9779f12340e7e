/**
 * A run's log, as the worker reads it: the last lines of an attempt, for a failed run's
 * failure (the `attemptLogTail` activity). The worker reads the
 * buckets as its VMs write them: its local buckets in front of the emulator
 * (STERNA_LOCAL_BUCKETS), Cloud Storage with its Application Default Credentials otherwise.
 *
 *   const tail = await attemptLogTail({ checkpointUri: spec.checkpoint.uri, workflowId, attempt: 3, lines: 20 }, logStoreSettingsFor(config));
 */
import type { WorkerConfig } from '../../config/worker-config';
import type { LogActivities } from '../../workflows/activity-contract';
import { runStoragePrefix, type LogLine } from './layout';
import { lastLines } from './reader';
import { logStoreFor, type LogStoreSettings } from './store';

export { AGENT_STREAM, runStoragePrefix, type LogLine } from './layout';
export { lastLines, readRunLog, RunLogReader, type LogEvent, type ReadLogOptions } from './reader';
export { logStoreFor, LogStoreError, type LogStore, type LogStoreSettings } from './store';

/** Where this worker's VMs' buckets are, for reading them back. */
export function logStoreSettingsFor(config: Pick<WorkerConfig, 'gce' | 'storage'>): LogStoreSettings {
  if (config.gce?.localBucketsDir) return { localBucketsDir: config.gce.localBucketsDir };
  return { storageEndpoint: config.storage?.endpoint };
}

export interface AttemptLogTailRequest {
  /** The spec's `checkpoint.uri` (the run adds its own key to it). */
  checkpointUri: string;
  workflowId: string;
  attempt: number;
  lines: number;
}

/** The attempt's last `lines` lines (every stream, every node merged by time); none when it shipped none. */
export async function attemptLogTail(request: AttemptLogTailRequest, settings: LogStoreSettings): Promise<LogLine[]> {
  const store = logStoreFor(runStoragePrefix(request.checkpointUri, request.workflowId), settings);
  return lastLines(store, request.attempt, request.lines);
}

/** The run's log activities; a worker that knows no buckets (`settings` absent) reads none. */
export function createLogActivities(settings: LogStoreSettings | undefined): LogActivities {
  return {
    async attemptLogTail(request) {
      if (!settings) return [];
      const lines = await attemptLogTail(request, settings).catch(() => []);
      return lines.map((l) => `${l.stream} ${l.text}`);
    },
  };
}
