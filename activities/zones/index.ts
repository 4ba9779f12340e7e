/**
 * The zone memory's activities: runs tell it how their attempts ended and read it when
 * they place; the fleet observer tells it of preemptions. Both only talk to Temporal
 * (signal-with-start, query): reading the memory costs no cloud API call.
 *
 *   activities: { ...createZoneActivities({ providers, client }) }
 */
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Providers } from '../index';
import type { Backend } from '../../workflows/types';
import { zoneMemoryWorkflowId, type ZoneActivities } from '../../workflows/zones/contract';
import { sliceFor, type ZoneMemory } from '../../workflows/zones/memory';
import { readZoneMemory, tellZoneMemory } from './client';

export { readZoneMemory, tellZoneMemory, listZoneMemories } from './client';

export interface ZoneActivityOptions {
  providers: Providers;
  client: Client;
}

function memoryWorkflowId(options: ZoneActivityOptions, backend: Backend): string {
  const provider = options.providers[backend];
  if (!provider) throw new Error(`this worker has no ${backend} provider configured; see docs/workers.md`);
  return zoneMemoryWorkflowId(Context.current().info.taskQueue, backend, provider.fleetScope());
}

/** Reads the project's zone memory for some accelerators, from inside any activity of the run's task queue. */
export function zoneMemoryReader(options: ZoneActivityOptions): (backend: Backend, accelerators: readonly string[]) => Promise<ZoneMemory> {
  return async (backend, accelerators) => sliceFor(await readZoneMemory(options.client, memoryWorkflowId(options, backend)), accelerators);
}

export function createZoneActivities(options: ZoneActivityOptions): ZoneActivities {
  const read = zoneMemoryReader(options);
  return {
    async recordZoneOutcomes({ backend, outcomes }) {
      if (outcomes.length === 0) return true;
      await tellZoneMemory(options.client, { workflowId: memoryWorkflowId(options, backend), taskQueue: Context.current().info.taskQueue, outcomes });
      return true;
    },

    async readZoneMemory({ backend, accelerators }) {
      return read(backend, accelerators);
    },
  };
}
