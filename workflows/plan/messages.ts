/** The throughput memory's messages. */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { ThroughputMemory, ThroughputSample } from './measured';

/** Samples of released attempts; sent with signal-with-start. */
export const throughputSamplesSignal = defineSignal<[samples: ThroughputSample[]]>('throughputSamples');

/** The whole memory. */
export const throughputMemoryQuery = defineQuery<ThroughputMemory>('throughputMemory');
