/**
 * The run's one activity for what its released attempts taught: zone outcomes to the
 * backend's zone memory, throughput samples to the task queue's throughput memory,
 * through the same calls as the two activities runs used before. Both only talk to
 * Temporal (signal-with-start); no cloud API call.
 *
 *   activities: { ...createMemoryActivities({ providers, client }) }
 */
import type { Client } from '@temporalio/client';
import type { Providers } from './index';
import type { MemoryActivities } from '../workflows/api';
import { createThroughputActivities } from './plan';
import { createZoneActivities } from './zones';

export function createMemoryActivities(options: { providers: Providers; client: Client }): MemoryActivities {
  const zones = createZoneActivities(options);
  const throughput = createThroughputActivities(options);
  return {
    async recordReleasedAttempts({ backend, outcomes, samples }) {
      // Zones first: a worker without the backend's provider fails before telling either memory.
      await zones.recordZoneOutcomes({ backend, outcomes });
      await throughput.recordThroughput({ samples });
      return true;
    },
  };
}
