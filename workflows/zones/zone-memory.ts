/**
 * zoneMemory: the project's durable zone memory (memory.ts), one per task queue, backend
 * and scope, like the fleet observer. No side database: the memory lives in this
 * workflow and is carried through continue-as-new.
 *
 *   run releases an attempt --recordZoneOutcomes: signalWithStart zoneOutcomes--> zoneMemory
 *   run finds capacity      --readZoneMemory: query zoneMemory------------------> (records)
 *   sterna zones            --query zoneMemory
 *
 * It waits for signals (no timers while busy), forgets what has decayed away once a day,
 * ends when nothing is left to remember (the next outcome starts it again), and
 * continues as new every few hundred signals to keep its history short.
 */
import { allHandlersFinished, condition, setHandler, workflowInfo } from '@temporalio/workflow';
import { continueOnCurrentVersion, newVersionCurrent } from '../versions';
import type { ZoneMemoryInput } from './contract';
import { emptyMemory, isZoneMemory, isZoneOutcome, prune, record, type ZoneMemory } from './memory';
import { zoneMemoryQuery, zoneOutcomesSignal } from './messages';

/** Signals per workflow run: a few hundred small events keep each history well under its limits. */
const SIGNALS_PER_RUN = 500;
/** How often an idle memory prunes itself (and ends once empty). */
const PRUNE_EVERY = '24 hours';

export async function zoneMemory(input: ZoneMemoryInput = {}): Promise<void> {
  let memory: ZoneMemory = isZoneMemory(input.memory) ? input.memory : emptyMemory();
  let signals = 0;
  setHandler(zoneOutcomesSignal, (outcomes) => {
    signals++;
    const now = Date.now();
    // Anything malformed is dropped rather than let into the memory (signals come from outside).
    for (const outcome of Array.isArray(outcomes) ? outcomes.filter(isZoneOutcome) : []) memory = record(memory, outcome, now);
  });
  setHandler(zoneMemoryQuery, () => memory);
  for (;;) {
    const full = await condition(() => signals >= SIGNALS_PER_RUN || workflowInfo().continueAsNewSuggested || newVersionCurrent(), PRUNE_EVERY);
    memory = prune(memory, Date.now());
    if (full) break;
    // A quiet day: end once everything is forgotten, else drop this run's history.
    if (memory.records.length === 0) return;
    if (signals > 0) break;
  }
  await condition(allHandlersFinished);
  await continueOnCurrentVersion<typeof zoneMemory>({ memory });
}
