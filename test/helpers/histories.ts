/**
 * Workflow histories kept as files for replay tests: the protobuf encoding of
 * `temporal.api.history.v1.History`, exactly as the server sent it. (The SDK's JSON
 * helpers need the protobuf runtime they were built with, and npm installs that package
 * twice here beside the Google clients' older one, so JSON files would not load.)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { temporal } from '@temporalio/proto';
import { testEnv } from './temporal';

const { History } = temporal.api.history.v1;

export async function saveHistory(file: string, workflowId: string, runId?: string): Promise<void> {
  const history = await (await testEnv()).client.workflow.getHandle(workflowId, runId).fetchHistory();
  writeFileSync(file, History.encode(history).finish());
}

export function loadHistory(file: string): temporal.api.history.v1.IHistory {
  return History.decode(readFileSync(file));
}
