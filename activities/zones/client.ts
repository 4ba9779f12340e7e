/**
 * The zone memory from outside its workflow: tell it (signal-with-start, so the first
 * outcome starts it), read it (a query, shared by concurrent readers; an empty memory when
 * it is not running), and
 * find every memory of a namespace (for `sterna zones`).
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { type Backend, emptyMemory, isZoneMemory, parseZoneMemoryWorkflowId, type ZoneMemory, zoneMemoryQuery, type ZoneOutcome, zoneOutcomesSignal } from '../../workflows/api';
import type { zoneMemory } from '../../workflows';

export async function tellZoneMemory(client: Client, request: { workflowId: string; taskQueue: string; outcomes: ZoneOutcome[] }): Promise<void> {
  await client.workflow.signalWithStart('zoneMemory', {
    workflowId: request.workflowId,
    taskQueue: request.taskQueue,
    args: [{}] as Parameters<typeof zoneMemory>,
    signal: zoneOutcomesSignal,
    signalArgs: [request.outcomes],
  });
}

/**
 * Reads in flight, per client and memory: one workflow answers its queries one at a time,
 * so a wave of placements (a preemption wave) asking at once would queue behind each
 * other. They share one query instead; its answer is as fresh as any of theirs.
 */
const inFlight = new WeakMap<Client, Map<string, Promise<ZoneMemory>>>();

export async function readZoneMemory(client: Client, workflowId: string): Promise<ZoneMemory> {
  let reads = inFlight.get(client);
  if (!reads) inFlight.set(client, (reads = new Map()));
  const joined = reads.get(workflowId);
  if (joined) return joined;
  const read = queryZoneMemory(client, workflowId).finally(() => reads.delete(workflowId));
  reads.set(workflowId, read);
  return read;
}

async function queryZoneMemory(client: Client, workflowId: string): Promise<ZoneMemory> {
  try {
    const memory = await client.workflow.getHandle(workflowId).query(zoneMemoryQuery);
    if (!isZoneMemory(memory)) throw new Error(`the zone memory ${workflowId} answered with something that is not a zone memory`);
    return memory;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return emptyMemory();
    throw err;
  }
}

export interface ZoneMemoryRef {
  workflowId: string;
  taskQueue: string;
  backend: Backend;
  scope: string;
}

/** The running zone memories of the client's namespace (from visibility). */
export async function listZoneMemories(client: Client): Promise<ZoneMemoryRef[]> {
  const refs: ZoneMemoryRef[] = [];
  for await (const execution of client.workflow.list({ query: `WorkflowType = 'zoneMemory' AND ExecutionStatus = 'Running'` })) {
    const parsed = parseZoneMemoryWorkflowId(execution.workflowId);
    if (parsed) refs.push({ workflowId: execution.workflowId, ...parsed });
  }
  return refs.sort((a, b) => a.workflowId.localeCompare(b.workflowId));
}
