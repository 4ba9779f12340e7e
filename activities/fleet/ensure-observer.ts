/**
 * Starting the fleet observer on demand. A run asks for it when it provisions (the
 * `ensureObserver` activity) and the worker when it starts; both signal-with-start
 * `observerWantedSignal`, which starts the observer if it is not running (first run,
 * terminated, ended after an idle spell) and otherwise only tells it it is wanted, so
 * it cannot end for idleness just as a new resource appears.
 */
import type { Client } from '@temporalio/client';
import { type Backend, DEFAULT_OBSERVER_OPTIONS, type EnsureObserverResult, type FleetObserverInput, type FleetSettings, type ObserverOptions, observerWantedSignal, observerWorkflowId } from '../../workflows/api';
import type { fleetObserver } from '../../workflows';

export type { ObserverOptions };

export { DEFAULT_OBSERVER_OPTIONS };

export function observerOptions(partial: { settings?: Partial<FleetSettings>; watchSeconds?: number; idleExitSeconds?: number } = {}): ObserverOptions {
  return {
    settings: { ...DEFAULT_OBSERVER_OPTIONS.settings, ...partial.settings },
    watchSeconds: partial.watchSeconds ?? DEFAULT_OBSERVER_OPTIONS.watchSeconds,
    idleExitSeconds: partial.idleExitSeconds ?? DEFAULT_OBSERVER_OPTIONS.idleExitSeconds,
  };
}

export interface StartObserverRequest {
  taskQueue: string;
  backend: Backend;
  /** The provider's fleetScope(): GCE project, GKE cluster and namespace. */
  scope: string;
  options: ObserverOptions;
  /** Who asks, for the observer's history: a run's workflow id or `worker`. */
  requester: string;
}

export async function startObserver(client: Client, request: StartObserverRequest): Promise<EnsureObserverResult> {
  const workflowId = observerWorkflowId(request.taskQueue, request.backend, request.scope);
  const input: FleetObserverInput = { backend: request.backend, ...request.options };
  const handle = await client.workflow.signalWithStart('fleetObserver', {
    workflowId,
    taskQueue: request.taskQueue,
    args: [input] as Parameters<typeof fleetObserver>,
    signal: observerWantedSignal,
    signalArgs: [{ requester: request.requester, options: request.options }],
  });
  return { workflowId, runId: handle.signaledRunId };
}
