/**
 * The run's one activity for what its released attempts taught: zone outcomes to the
 * backend's zone memory, throughput samples to the task queue's throughput memory. Both
 * only talk to Temporal (signal-with-start); no cloud API call.
 *
 *   activities: { ...createMemoryActivities({ providers, client }) }
 */
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Providers } from './index';
import { throughputMemoryWorkflowId } from '../workflows/plan/contract';
import type { MemoryActivities } from '../workflows/run/memory-contract';
import { zoneMemoryWorkflowId } from '../workflows/zones/contract';
import { tellThroughputMemory } from './plan';
import { tellZoneMemory } from './zones';

export function createMemoryActivities(options: { providers: Providers; client: Client }): MemoryActivities {
  return {
    async recordReleasedAttempts({ backend, outcomes, samples }) {
      const { taskQueue } = Context.current().info;
      const provider = options.providers[backend];
      if (outcomes.length > 0 && !provider) throw new Error(`this worker has no ${backend} provider configured; see the README's "Workers" section`);
      await Promise.all([
        outcomes.length > 0 ? tellZoneMemory(options.client, { workflowId: zoneMemoryWorkflowId(taskQueue, backend, provider!.fleetScope()), taskQueue, outcomes }) : undefined,
        samples.length > 0 ? tellThroughputMemory(options.client, { workflowId: throughputMemoryWorkflowId(taskQueue), taskQueue, samples }) : undefined,
      ]);
      return true;
    },
  };
}
