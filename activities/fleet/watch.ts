/**
 * The watchFleet activity: every interval, one listing of the backend's Sterna
 * resources, the guest reads and preemption checks the planner asks for, and a signal to
 * each run with news. It heartbeats its memory after every look, so a retried attempt
 * (the worker died, the heartbeat timed out) resumes where the last one stopped instead
 * of reading the whole fleet again; it returns after `returnAfterSeconds` so the
 * workflow can continue as new.
 *
 * A failed look (the listing failed past its own retries) is skipped, not fatal: the
 * next one tries again. A signal to a run that no longer exists is dropped silently.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CancelledFailure, Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { DEFAULT_FLEET_SETTINGS, observationSignal, resourceKey, type ResourceObservation, type ResourceRef, type WatchFleetInput, type WatchFleetResult, type WatchStats, type ZoneOutcome } from '../../workflows/api';
import type { ComputeProvider } from '../providers/provider';
import { carry, resume, type FleetMemory } from './memory';
import { absorbLook, emptyMemory, hasDraining, markSent, observationsDue, planFollow, planLook, Tell, type LookResults } from './planner';
import { fleetPreemptions } from '../zones/from-fleet';
import { mapLimited } from '../map-limited';
import type { RunLocator } from '../namespaces';

/** Reads and signals in flight at once. */
const CONCURRENCY = 16;
/** Heartbeat at least this often even while one look is slow (well inside the heartbeat timeout). */
const HEARTBEAT_EVERY_MS = 3000;

/** Tells the zone memory of preemptions the observer saw (activities/zones). */
export type TellZones = (outcomes: ZoneOutcome[]) => Promise<void>;

/** Delivers an observation; 'closed' when the run no longer exists or has completed. */
export type SignalRun = (workflowId: string, observation: ResourceObservation) => Promise<'delivered' | 'closed'>;

export function signalWithClient(client: Client): SignalRun {
  return async (workflowId, observation) => {
    try {
      await client.workflow.getHandle(workflowId).signal(observationSignal, observation);
      return 'delivered';
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return 'closed';
      throw err;
    }
  };
}

/**
 * Signals a run in whichever team namespace it runs (activities/namespaces.ts RunLocator).
 * A workflow id two teams both run is not signalled in either (warned): each run then
 * looks at its own resource, as when the observer is silent.
 */
export function signalWithLocator(locator: RunLocator): SignalRun {
  return async (workflowId, observation) => {
    const located = await locator.locate(workflowId);
    if (located === 'not-found') return 'closed';
    if (located === 'ambiguous') {
      Context.current().log.warn('a resource names a workflow id running in several team namespaces; not signalled', { workflowId, resource: observation.name });
      return 'closed';
    }
    const outcome = await signalWithClient(located.client)(workflowId, observation);
    if (outcome === 'closed') locator.forget(workflowId);
    return outcome;
  };
}

export function zeroStats(): WatchStats {
  return { looks: 0, listings: 0, reads: 0, preemptionLookups: 0, signals: 0, signalsToClosedRuns: 0, failedLooks: 0, resources: 0 };
}

/** One look: listing, reads, preemption checks, signals. Returns the new memory. */
async function look(provider: ComputeProvider, signalRun: SignalRun, input: WatchFleetInput, memory: FleetMemory, stats: WatchStats, tellZones?: TellZones): Promise<FleetMemory> {
  const log = Context.current().log;
  const nowMs = Date.now();
  const listing = await provider.listFleet();
  stats.listings++;
  stats.resources = Math.max(stats.resources, listing.length);
  const plan = planLook(memory, listing, nowMs, input.settings, provider.rateLimitedSince?.(memory.tokensAtMs) ?? false);
  const results: LookResults = { reads: {}, checked: [], preempted: [] };
  await readAgents(provider, plan.reads, results, stats);
  if (plan.preemptionChecks.length > 0) {
    stats.preemptionLookups += preemptionLookups(provider, plan.preemptionChecks);
    try {
      const preempted = await provider.preemptedAmong(plan.preemptionChecks);
      results.checked = plan.preemptionChecks.map(resourceKey);
      results.preempted = preempted.map(resourceKey);
    } catch (err) {
      log.warn('preemption check failed; it stays due', { resources: plan.preemptionChecks.length, error: String(err) });
    }
  }
  const absorbed = absorbLook(plan.memory, results, nowMs);
  const preemptions = tellZones ? fleetPreemptions(memory, absorbed, listing, nowMs) : [];
  if (preemptions.length > 0) {
    // The zone memory is a prior, not the runs' news: a failure here costs only that.
    await tellZones!(preemptions).catch((err: unknown) => log.warn('could not tell the zone memory of preemptions', { preemptions: preemptions.length, error: String(err) }));
  }
  // While an attempt drains, its end (told by a follow-up within seconds) must not queue
  // behind this look's progress in the worker: that waits for the drain, or the next look.
  return tell(signalRun, input, absorbed, stats, nowMs, hasDraining(absorbed) ? Tell.Urgent : Tell.All);
}

/** Between looks: the draining resources' reads (planner.ts `planFollow`), and the signals they make due. */
async function follow(provider: ComputeProvider, signalRun: SignalRun, input: WatchFleetInput, memory: FleetMemory, stats: WatchStats): Promise<FleetMemory> {
  const nowMs = Date.now();
  const plan = planFollow(memory, nowMs, input.settings);
  const results: LookResults = { reads: {}, checked: [], preempted: [] };
  await readAgents(provider, plan.reads, results, stats);
  const absorbed = absorbLook(plan.memory, results, nowMs);
  return tell(signalRun, input, absorbed, stats, nowMs, hasDraining(absorbed) ? Tell.Urgent : Tell.All);
}

async function readAgents(provider: ComputeProvider, refs: ResourceRef[], results: LookResults, stats: WatchStats): Promise<void> {
  await mapLimited(refs, CONCURRENCY, async (ref) => {
    stats.reads++;
    try {
      results.reads[resourceKey(ref)] = await provider.readAgent(ref);
    } catch (err) {
      Context.current().log.warn('guest read failed; it stays due', { resource: ref.name, error: String(err) });
    }
  });
}

/** Signals each run with news (urgent first; `which` Urgent leaves progress for a later tell), and remembers what it was told. */
async function tell(signalRun: SignalRun, input: WatchFleetInput, absorbed: FleetMemory, stats: WatchStats, nowMs: number, which: Tell = Tell.All): Promise<FleetMemory> {
  const due = observationsDue(absorbed, nowMs, input.settings, which);
  const delivered: string[] = [];
  await mapLimited(due, CONCURRENCY, async ({ key, workflowId, observation }) => {
    try {
      const outcome = await signalRun(workflowId, { ...observation, quietSeconds: input.settings.maxSilenceSeconds });
      if (outcome === 'closed') stats.signalsToClosedRuns++;
      else stats.signals++;
      delivered.push(key);
    } catch (err) {
      Context.current().log.warn('signal failed; it is sent again next look', { workflowId, resource: observation.name, error: String(err) });
    }
  });
  return markSent(absorbed, delivered, nowMs);
}

/** GCE lists operations once per zone; GKE reads each stopped pod's node. */
function preemptionLookups(provider: ComputeProvider, refs: ResourceRef[]): number {
  return provider.backend === 'gce' ? new Set(refs.map((r) => r.zone)).size : refs.length;
}

export async function watchFleet(provider: ComputeProvider, signalRun: SignalRun, input: WatchFleetInput, tellZones?: TellZones): Promise<WatchFleetResult> {
  const context = Context.current();
  // A retry resumes from the last heartbeat; a new call from the previous call's result.
  const resumed = context.info.heartbeatDetails as WatchFleetResult | undefined;
  const from = resumed?.memory ?? input.memory;
  let memory = from ? resume(from, input.backend) : emptyMemory(Date.now(), input.settings);
  const stats = resumed?.stats ?? zeroStats();
  const intervalMs = input.settings.intervalSeconds * 1000;
  const returnAt = Date.now() + input.returnAfterSeconds * 1000;
  let carried = carry(memory);
  const beat = () => context.heartbeat({ memory: carried, stats } satisfies WatchFleetResult);
  const drainMs = (input.settings.drainReadSeconds ?? DEFAULT_FLEET_SETTINGS.drainReadSeconds!) * 1000;
  const pause = (ms: number) =>
    sleep(Math.max(0, ms), undefined, { signal: context.cancellationSignal }).catch(() => {
      throw new CancelledFailure('watchFleet cancelled');
    });
  const timer = setInterval(beat, HEARTBEAT_EVERY_MS);
  try {
    for (let next = Date.now(); ; ) {
      stats.looks++;
      try {
        memory = await look(provider, signalRun, input, memory, stats, tellZones);
        carried = carry(memory);
      } catch (err) {
        stats.failedLooks++;
        context.log.warn('fleet look failed; the next one tries again', { error: String(err) });
      }
      beat();
      next = Math.max(next + intervalMs, Date.now());
      if (next >= returnAt) {
        // The next call looks as soon as it starts: held to the interval here, so that
        // calls asked to return sooner than it cannot look faster than it.
        await pause(next - Date.now());
        return { memory: carried, stats };
      }
      // A preempted VM's final checkpoint is waited for closely, not at the next look.
      const wasDraining = hasDraining(memory);
      while (hasDraining(memory) && Date.now() + drainMs < next) {
        await pause(drainMs);
        try {
          memory = await follow(provider, signalRun, input, memory, stats);
          carried = carry(memory);
        } catch (err) {
          context.log.warn('fleet follow-up failed; the next look covers it', { error: String(err) });
        }
      }
      // Progress held back while something drained goes out now, not a look later (a
      // follow-up that saw the drain end has sent it already).
      if (wasDraining && hasDraining(memory)) {
        memory = await tell(signalRun, input, memory, stats, Date.now());
        carried = carry(memory);
      }
      await pause(next - Date.now());
    }
  } finally {
    clearInterval(timer);
  }
}
