/** The activity a run tells the project's memories through (run/memory-link.ts). */
import type { ThroughputSample } from '../plan/measured';
import type { Backend } from '../types';
import type { ZoneOutcome } from '../zones/memory';

export interface RecordReleasedAttemptsInput {
  backend: Backend;
  /** For the backend's zone memory (workflows/zones). */
  outcomes: ZoneOutcome[];
  /** For the task queue's throughput memory (workflows/plan). */
  samples: ThroughputSample[];
}

export interface MemoryActivities {
  /** Tells each memory that has something to hear (started if it is not running). */
  recordReleasedAttempts(input: RecordReleasedAttemptsInput): Promise<boolean>;
}
