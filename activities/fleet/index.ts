/**
 * The fleet observer's activities, built like the run's: by a factory that takes its
 * providers, plus the Temporal client they signal runs and start the observer with.
 *
 *   activities: { ...createActivities(providers), ...createFleetActivities({ providers, client }) }
 */
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { FleetActivities } from '../../workflows/fleet/contract';
import type { Providers } from '../index';
import type { ComputeProvider } from '../providers/provider';
import { boundSettings } from './bounds';
import { startObserver, type ObserverOptions } from './ensure-observer';
import { signalWithClient, watchFleet, type SignalRun } from './watch';
import { tellZoneMemory } from '../zones/client';
import { zoneMemoryWorkflowId } from '../../workflows/zones/contract';
import { DEFAULT_FLEET_SETTINGS } from '../../workflows/fleet/contract';
import type { Backend } from '../../workflows/types';

export { DEFAULT_OBSERVER_OPTIONS, observerOptions, startObserver, type ObserverOptions } from './ensure-observer';

export interface FleetActivityOptions {
  providers: Providers;
  client: Client;
  /**
   * What ensureObserver starts the observer with; without it, this worker starts none.
   * Its settings also bound what this worker's watchFleet does, whatever the observer asks
   * (without it, the defaults do).
   */
  observer?: ObserverOptions;
  /** How runs are signalled; the client's signal by default. */
  signalRun?: SignalRun;
}

/** How often one worker asks again, per backend, when it creates resources back to back. */
const ASK_AGAIN_MS = 30_000;

/**
 * The provision activity's ask for the observer (activities/index.ts `askObserver`): at
 * most once per backend every ASK_AGAIN_MS from this worker, so a burst of creates adds
 * one signal to the observer's history, not one each. A run that hears nothing still asks
 * for itself once the observer has been silent too long.
 */
export function observerAsker(options: Pick<FleetActivityOptions, 'providers' | 'client' | 'observer'>): ((backend: Backend) => Promise<boolean>) | undefined {
  const observer = options.observer;
  if (!observer) return undefined;
  const askedAt = new Map<Backend, number>();
  return async (backend) => {
    const provider = options.providers[backend];
    if (!provider) return false;
    if (Date.now() - (askedAt.get(backend) ?? -Infinity) < ASK_AGAIN_MS) return true;
    const { taskQueue, workflowExecution } = Context.current().info;
    await startObserver(options.client, { taskQueue, backend, scope: provider.fleetScope(), options: observer, requester: workflowExecution?.workflowId ?? 'an activity' });
    askedAt.set(backend, Date.now());
    return true;
  };
}

export function createFleetActivities(options: FleetActivityOptions): FleetActivities {
  const providerFor = (backend: string): ComputeProvider => {
    const provider = options.providers[backend as keyof Providers];
    if (!provider) throw new Error(`this worker has no ${backend} provider configured; see docs/workers.md`);
    return provider;
  };
  const signalRun = options.signalRun ?? signalWithClient(options.client);

  return {
    async watchFleet(input) {
      const provider = providerFor(input.backend);
      const { taskQueue } = Context.current().info;
      const workflowId = zoneMemoryWorkflowId(taskQueue, input.backend, provider.fleetScope());
      const settings = boundSettings(input.settings, options.observer?.settings ?? DEFAULT_FLEET_SETTINGS);
      return watchFleet(provider, signalRun, { ...input, settings }, (outcomes) => tellZoneMemory(options.client, { workflowId, taskQueue, outcomes }));
    },

    async ensureObserver({ backend }) {
      const observer = options.observer;
      if (!observer) return null;
      const { taskQueue, workflowExecution } = Context.current().info;
      const scope = providerFor(backend).fleetScope();
      return startObserver(options.client, { taskQueue, backend, scope, options: observer, requester: workflowExecution?.workflowId ?? 'an activity' });
    },
  };
}
