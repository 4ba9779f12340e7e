/**
 * Workflow histories kept as files for replay tests: the protobuf encoding of
 * `temporal.api.history.v1.History`, exactly as the server sent it. (The SDK's JSON
 * helpers need the protobuf runtime they were built with, and npm installs that package
 * twice here beside the Google clients' older one, so JSON files would not load.)
 *
 * Live runs' payloads are encrypted with the test run's own key (test/global.ts); a
 * history is saved decrypted, so the committed ones replay with no key at all.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { sternaPayloadCodec } from '../../codec/data-converter';
import { isEncrypted } from '../../codec/payload-codec';
import type { Client } from '@temporalio/client';
import { testEnv } from './temporal';

const { History } = temporal.api.history.v1;

export async function saveHistory(file: string, workflowId: string, runId?: string): Promise<void> {
  const history = await (await testEnv()).client.workflow.getHandle(workflowId, runId).fetchHistory();
  await decryptPayloads(history, sternaPayloadCodec());
  writeFileSync(file, History.encode(history).finish());
}

/** Replaces, in place, every encrypted payload anywhere in `node` by its plain original. */
async function decryptPayloads(node: unknown, codec: ReturnType<typeof sternaPayloadCodec>): Promise<void> {
  if (node === null || typeof node !== 'object' || node instanceof Uint8Array) return;
  const payload = node as Payload;
  if (payload.data instanceof Uint8Array && payload.metadata && isEncrypted(payload)) {
    const [plain] = await codec.decode([payload]);
    payload.metadata = plain.metadata;
    payload.data = plain.data;
    return;
  }
  for (const value of Object.values(node)) await decryptPayloads(value, codec);
}

export function loadHistory(file: string): temporal.api.history.v1.IHistory {
  return History.decode(readFileSync(file));
}

/** The value of a payload read from a raw history (encrypted by the test's codec, or plain). */
export async function payloadValue<T>(payload: Payload): Promise<T> {
  const [plain] = await sternaPayloadCodec().decode([payload]);
  return defaultPayloadConverter.fromPayload<T>(plain);
}

/**
 * The histories of every execution of a workflow, oldest first: a run that continued as
 * new has its earlier events in the executions before its latest. Walked back through
 * each execution's `continuedExecutionRunId`, so it needs no visibility query.
 */
export async function executionHistories(client: Client, workflowId: string): Promise<temporal.api.history.v1.IHistoryEvent[][]> {
  const executions: temporal.api.history.v1.IHistoryEvent[][] = [];
  for (let runId: string | undefined = undefined; ; ) {
    const { events } = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    executions.unshift(events ?? []);
    runId = events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId ?? undefined;
    if (!runId) return executions;
  }
}

/** Every event of a workflow across its executions, oldest first (event ids restart in each). */
export async function allEvents(client: Client, workflowId: string): Promise<temporal.api.history.v1.IHistoryEvent[]> {
  return (await executionHistories(client, workflowId)).flat();
}
