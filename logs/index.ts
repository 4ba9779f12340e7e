/**
 * A run's log as it lies in the run's bucket: where each attempt's (and node's) chunks
 * are (layout), how a bucket is read (store: the worker's local buckets or Cloud
 * Storage), and how the chunks read back as lines in order (reader). The agent on the VM
 * writes it; the worker's log activity and the client read it.
 */
export { AGENT_STREAM, attemptDir, LOGS_DIR, nodeDir, runStoragePrefix, type LogLine } from './layout';
export { lastLines, readRunLog, RunLogReader, type LogEvent, type ReadLogOptions } from './reader';
export { logStoreFor, LogStoreError, type LogStore, type LogStoreSettings, type StoredObject } from './store';
