/**
 * throughputMemory: steps per second that runs of each spec (by name) trained at on each
 * accelerator (plan/measured.ts), one per task queue. No side database: the memory lives
 * in this workflow and is carried through continue-as-new.
 *
 *   run releases an attempt --recordThroughput: signalWithStart throughputSamples--> throughputMemory
 *   sterna plan (planRun)   --readThroughput: query throughputMemory--------------> (records)
 *
 * It waits for signals with no timer (nothing decays), and continues as new every few
 * hundred signals to keep its history short.
 */
import { allHandlersFinished, condition, setHandler, workflowInfo } from '@temporalio/workflow';
import { continueOnCurrentVersion, newVersionCurrent } from '../versions';
import type { ThroughputMemoryInput } from './contract';
import { emptyThroughputMemory, isThroughputMemory, isThroughputSample, recordSample, type ThroughputMemory } from './measured';
import { throughputMemoryQuery, throughputSamplesSignal } from './messages';

/** Signals per workflow run: a few hundred small events keep each history well under its limits. */
const SIGNALS_PER_RUN = 500;

export async function throughputMemory(input: ThroughputMemoryInput = {}): Promise<void> {
  let memory: ThroughputMemory = isThroughputMemory(input.memory) ? input.memory : emptyThroughputMemory();
  let signals = 0;
  setHandler(throughputSamplesSignal, (samples) => {
    signals++;
    // Anything malformed is dropped rather than let into the memory (signals come from outside).
    for (const sample of Array.isArray(samples) ? samples.filter(isThroughputSample) : []) memory = recordSample(memory, sample);
  });
  setHandler(throughputMemoryQuery, () => memory);
  await condition(() => signals >= SIGNALS_PER_RUN || workflowInfo().continueAsNewSuggested || newVersionCurrent());
  await condition(allHandlersFinished);
  await continueOnCurrentVersion<typeof throughputMemory>({ memory });
}
