/**
 * The throughput memory's activities: runs tell it how fast each released attempt
 * trained; plans read what runs of the same spec measured. Both only talk to Temporal
 * (signal-with-start, query): no cloud API call.
 *
 *   activities: { ...createThroughputActivities({ client }) }
 */
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { emptyThroughputMemory, isThroughputMemory, type ThroughputActivities, type ThroughputMemory, throughputMemoryQuery, throughputMemoryWorkflowId, type ThroughputSample, throughputSamplesSignal, throughputSlice } from '../../workflows/api';
import type { throughputMemory } from '../../workflows';

export async function tellThroughputMemory(client: Client, request: { workflowId: string; taskQueue: string; samples: ThroughputSample[] }): Promise<void> {
  await client.workflow.signalWithStart('throughputMemory', {
    workflowId: request.workflowId,
    taskQueue: request.taskQueue,
    args: [{}] as Parameters<typeof throughputMemory>,
    signal: throughputSamplesSignal,
    signalArgs: [request.samples],
  });
}

export async function readThroughputMemory(client: Client, workflowId: string): Promise<ThroughputMemory> {
  try {
    const memory = await client.workflow.getHandle(workflowId).query(throughputMemoryQuery);
    if (!isThroughputMemory(memory)) throw new Error(`the throughput memory ${workflowId} answered with something that is not a throughput memory`);
    return memory;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return emptyThroughputMemory();
    throw err;
  }
}

export function createThroughputActivities(options: { client: Client }): ThroughputActivities {
  const taskQueue = () => Context.current().info.taskQueue;
  return {
    async recordThroughput({ samples }) {
      if (samples.length === 0) return true;
      await tellThroughputMemory(options.client, { workflowId: throughputMemoryWorkflowId(taskQueue()), taskQueue: taskQueue(), samples });
      return true;
    },

    async readThroughput({ specName, accelerators }) {
      return throughputSlice(await readThroughputMemory(options.client, throughputMemoryWorkflowId(taskQueue())), specName, accelerators);
    },
  };
}
