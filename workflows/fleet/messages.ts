/** The fleet observer's messages. */
import { defineSignal } from '@temporalio/workflow';

/**
 * Someone needs the observer (a run provisioning, a worker starting): sent with
 * signal-with-start, it starts the observer if needed and keeps it from ending idle.
 */
export const observerWantedSignal = defineSignal<[request: { requester: string }]>('observerWanted');
