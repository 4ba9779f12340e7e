/** The fleet observer's messages. */
import { defineSignal } from '@temporalio/workflow';
import type { ObserverOptions } from './contract';

/**
 * Someone needs the observer (a run provisioning, a worker starting): sent with
 * signal-with-start, it starts the observer if needed and keeps it from ending idle.
 * `options`, when given, apply from the observer's next watchFleet call.
 */
export const observerWantedSignal = defineSignal<[request: { requester: string; options?: ObserverOptions }]>('observerWanted');
