/**
 * The fleet observer: one per task queue, backend and scope (GCE project, GKE
 * namespace), watching every Sterna resource there with a constant number of API calls
 * per look and signalling the runs concerned (`observationSignal`). Runs hold no
 * activity slot while they train; they wait for these signals.
 *
 *   provision (the worker, at most every 30 s) or ensureObserver (a run that heard nothing)
 *     --signalWithStart--> fleetObserver
 *     loop: watchFleet (5 min of looks, memory in its heartbeats) -> memory -> next call
 *     continue-as-new every few calls, carrying the memory; no side database
 *     ends after a long idle spell; the next ensureObserver starts it again
 *
 * A dead worker costs a heartbeat timeout: the activity is retried (on any worker of the
 * queue) from its last heartbeat. A terminated observer is started again by the next
 * ensureObserver. Either way runs keep their own slow fallback look, so an observer
 * that is down delays a run but never loses it.
 */
import { CancellationScope, condition, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import { continueOnCurrentVersion, newVersionCurrent } from '../versions';
import type { CarriedMemory, FleetActivities, FleetObserverInput, ObserverOptions, WatchFleetInput, WatchFleetResult } from './contract';
import { observerWantedSignal } from './messages';
import { acceptedOptions, DEFAULT_OBSERVER_OPTIONS } from './options';

/** watchFleet calls per workflow run: at 5 minutes each, a new run every 15 minutes keeps histories small. */
const CALLS_PER_RUN = 3;

function watcher(options: ObserverOptions) {
  return proxyActivities<FleetActivities>({
    startToCloseTimeout: `${options.watchSeconds + 120} seconds`,
    // A look heartbeats as it ends and every 3 s besides; a silent worker is presumed dead.
    heartbeatTimeout: `${Math.max(15, 3 * options.settings.intervalSeconds)} seconds`,
    // Never give up: the observer is what runs rely on to hear about their resources.
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
  }).watchFleet;
}

/**
 * One watch, unless a newer version of the deployment becomes current meanwhile (a new
 * worker's start signals the observer): then the watch is cancelled and undefined is
 * returned, so the observer continues onto the new version now rather than after its
 * 5-minute call, and the old version drains. The memory since the last call is given up.
 */
async function watchUnlessMoved(options: ObserverOptions, request: WatchFleetInput): Promise<WatchFleetResult | undefined> {
  return CancellationScope.cancellable(async () => {
    const watch = watcher(options)(request);
    const moved = condition(newVersionCurrent).then(() => undefined);
    // The loser is cancelled below: its rejection is expected.
    watch.catch(() => undefined);
    moved.catch(() => undefined);
    const first = await Promise.race([watch, moved]);
    CancellationScope.current().cancel();
    return first;
  });
}

export async function fleetObserver(input: FleetObserverInput): Promise<void> {
  let idleSinceMs = input.idleSinceMs;
  // The latest requester's options apply from the next call: workers restarted with a new
  // configuration change a running observer without stopping it.
  // Anyone who may signal the observer can send options: only a well-formed set is taken.
  let options: ObserverOptions = acceptedOptions({ settings: input.settings, watchSeconds: input.watchSeconds, idleExitSeconds: input.idleExitSeconds }, DEFAULT_OBSERVER_OPTIONS);
  setHandler(observerWantedSignal, (request) => {
    idleSinceMs = undefined;
    if (request?.options) options = acceptedOptions(request.options, options);
  });
  let memory: CarriedMemory | undefined = input.memory;
  for (let call = 0; call < CALLS_PER_RUN && !workflowInfo().continueAsNewSuggested && !newVersionCurrent(); call++) {
    const result = await watchUnlessMoved(options, { backend: input.backend, settings: options.settings, memory, returnAfterSeconds: options.watchSeconds });
    if (!result) break;
    memory = result.memory;
    if (result.stats.resources > 0) idleSinceMs = undefined;
    else idleSinceMs ??= Date.now();
    if (idleSinceMs !== undefined && Date.now() - idleSinceMs >= options.idleExitSeconds * 1000) return;
  }
  await continueOnCurrentVersion<typeof fleetObserver>({ backend: input.backend, ...options, memory, idleSinceMs });
}
