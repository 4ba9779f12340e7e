/** The zone memory's messages. */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { ZoneMemory, ZoneOutcome } from './memory';

/** Outcomes of attempts (a run's, or the fleet observer's); sent with signal-with-start. */
export const zoneOutcomesSignal = defineSignal<[outcomes: ZoneOutcome[]]>('zoneOutcomes');

/** The whole memory, raw: readers decay it to their own `now` with memory.ts's zonePrior. */
export const zoneMemoryQuery = defineQuery<ZoneMemory>('zoneMemory');
