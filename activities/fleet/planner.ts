/**
 * The fleet observer's decisions, as pure functions of (memory, listing, now, settings):
 * which guest attributes to read this look, which resources to check for a preemption,
 * and which runs to tell what. No I/O, no clock: a look is
 *
 *   planLook(memory, listing, now)      -> reads, preemption checks, memory with tokens spent
 *   absorbLook(memory, results, now)    -> memory with the agents' values and preemptions
 *   observationsDue(memory, now)        -> the signals to send
 *   markSent(memory, delivered, now)    -> memory that remembers what each run was told
 *
 * Reads are paid from a token bucket that refills at the read budget; its capacity (the
 * burst) is taken out of the refill rate, so no 60-second window ever spends more than
 * `readsPerMinute`, whatever the fleet size. Within the tokens, reads go in order of
 * need: an attempt that ended (its final checkpoint and exit code), a status change, an
 * agent in a busy phase or whose trainer should be finishing (at the pace between its
 * last two reads), then the slow progress cadence, oldest read first; the cadence
 * leaves a reserve of tokens for the first two. So a small fleet is read about once a
 * minute, a large one as often as the budget allows, and a wave of preemptions at once.
 */
import { DEFAULT_FLEET_SETTINGS, resourceKey, type AgentValues, type FleetSettings, type Lifecycle } from '../../workflows/fleet/contract';
import type { ResourceObservation } from '../../workflows/messages';
import type { ResourceRef } from '../../workflows/types';
import type { FleetResource } from '../providers/provider';
import { differsFromTold, ReadDue, stateDiffersFromTold, toldOf, type FleetMemory, type WatchedResource } from './memory';

/** Listings in a row that must miss a resource before it counts as gone. */
const ABSENT_LOOKS_FOR_GONE = 2;
/** Agent phases after which news comes soon (staging or setup done, exit published). */
const BUSY_PHASES = new Set(['starting', 'staging', 'setup', 'uploading']);

export interface TokenBucket {
  capacity: number;
  /** Tokens added per millisecond. */
  refillPerMs: number;
  /**
   * Tokens that regular (cadence) reads leave for changes and ended attempts: a wave of
   * preemptions is read in one look even while a large fleet uses the whole budget.
   * It is the capacity less one look's refill, so the refill is never lost to the cap.
   */
  reserve: number;
}

/** The smallest share of its budget the observer shrinks to while the project refuses calls. */
export const MIN_BUDGET_SCALE = 1 / 16;
/** Without refusals the budget grows back by this share per minute (a halving is undone in under 5 minutes). */
const BUDGET_REGAIN_PER_MINUTE = 0.125;

/**
 * The budget's share after a look: halved when the project refused any of the worker's
 * calls for its rate quota since the last look, otherwise regained linearly (additive
 * increase, multiplicative decrease). The observer's reads are the only ones that can
 * wait, so it is what gives way when creates, deletes and other workers share the quota.
 */
export function nextBudgetScale(scale: number, rateLimited: boolean, elapsedMs: number): number {
  if (rateLimited) return Math.max(MIN_BUDGET_SCALE, scale / 2);
  return Math.min(1, scale + (Math.max(0, elapsedMs) / 60_000) * BUDGET_REGAIN_PER_MINUTE);
}

/** The burst is part of the minute's budget, so any 60 s holds at most `readsPerMinute` (times `scale`) reads. */
export function readBucket(settings: FleetSettings, scale = 1): TokenBucket {
  const perMinute = settings.readsPerMinute * scale;
  const capacity = Math.max(1, Math.floor((perMinute * settings.burstSeconds) / 60));
  const refillPerMs = Math.max(0, perMinute - capacity) / 60_000;
  const reserve = Math.max(0, Math.floor(capacity - refillPerMs * settings.intervalSeconds * 1000));
  return { capacity, refillPerMs, reserve };
}

export function emptyMemory(nowMs: number, settings: FleetSettings): FleetMemory {
  return { resources: {}, tokens: readBucket(settings).capacity, tokensAtMs: nowMs, budgetScale: 1 };
}

export interface LookPlan {
  memory: FleetMemory;
  /** Read these agents now (the tokens are already spent in `memory`). */
  reads: ResourceRef[];
  /** Ask the provider which of these stopped resources were preempted. */
  preemptionChecks: ResourceRef[];
}

function isStopped(lifecycle: Lifecycle): boolean {
  return lifecycle === 'stopping' || lifecycle === 'terminated' || lifecycle === 'gone';
}

/** Merges one listing into the memory: new, changed and vanished resources. */
function reconcile(memory: FleetMemory, listing: FleetResource[]): Record<string, WatchedResource> {
  const resources: Record<string, WatchedResource> = {};
  for (const listed of listing) {
    const key = resourceKey(listed.ref);
    const known = memory.resources[key];
    const changed = !known || known.lifecycle !== listed.lifecycle;
    const entry: WatchedResource = known
      ? { ...known, absentLooks: 0, lifecycle: listed.lifecycle, workflowId: listed.workflowId ?? known.workflowId }
      : { ref: listed.ref, owner: listed.owner, workflowId: listed.workflowId, lifecycle: listed.lifecycle, preempted: false, agent: {}, absentLooks: 0 };
    if (listed.preempted) entry.preempted = true;
    if (changed) {
      // A terminated attempt is read once more, first of all. A pending one has nothing to
      // read, and a stopping one nothing its read once terminated will not have (a wave of
      // preemptions would otherwise cost two reads each).
      if (listed.lifecycle === 'terminated') entry.readDue = ReadDue.Ended;
      else if (listed.lifecycle === 'pending' || listed.lifecycle === 'stopping') entry.readDue = undefined;
      else if (entry.readDue !== ReadDue.Ended) entry.readDue = ReadDue.Changed;
      if (isStopped(listed.lifecycle) && !entry.preempted) entry.preemptionCheckDue = true;
    }
    if (listed.agent) {
      entry.agent = listed.agent;
      entry.agentCarried = undefined;
      entry.readDue = undefined;
    }
    resources[key] = entry;
  }
  for (const [key, known] of Object.entries(memory.resources)) {
    if (resources[key]) continue;
    // Told runs forget their gone resources in markSent; until then they are kept as they are.
    if (known.lifecycle === 'gone') {
      resources[key] = known;
      continue;
    }
    const absentLooks = known.absentLooks + 1;
    if (absentLooks < ABSENT_LOOKS_FOR_GONE) {
      resources[key] = { ...known, absentLooks };
      continue;
    }
    // Gone: nothing left to read. It may have been preempted on its way out (a DELETE
    // termination action) only if it vanished while it still ran.
    const vanishedRunning = known.lifecycle === 'running' && !known.preempted;
    resources[key] = { ...known, absentLooks, lifecycle: 'gone', readDue: undefined, preemptionCheckDue: vanishedRunning || undefined };
  }
  return resources;
}

/** Read classes, in order of need. */
const Priority = { Ended: 0, Changed: 1, Busy: 2, Progress: 3 } as const;

/**
 * When the trainer should take its last step, at the pace between two reads that both
 * show a step and the total: the moment its exit is worth a read. Undefined while the
 * pace is unknown or nil (a stalled trainer is left to the regular cadence, so it is
 * never read at every look).
 */
export function expectedEndAt(before: WatchedResource, after: AgentValues, nowMs: number): number | undefined {
  const { step, totalSteps } = after;
  const previous = before.agent.step;
  const previousAt = before.readAtMs;
  if (after.phase !== 'training' || step === undefined || totalSteps === undefined || previous === undefined || previousAt === undefined) return undefined;
  if (step <= previous || nowMs <= previousAt || step >= totalSteps) return undefined;
  return nowMs + ((totalSteps - step) * (nowMs - previousAt)) / (step - previous);
}

/** In a phase after which news comes soon, or training past its last step (its exit is near). */
function isNewsNear(agent: AgentValues): boolean {
  if (BUSY_PHASES.has(agent.phase ?? '')) return true;
  return agent.phase === 'training' && agent.step !== undefined && agent.totalSteps !== undefined && agent.step >= agent.totalSteps;
}

/** Its trainer should be finishing now (a look lands within half an interval of it). */
function isEndDue(entry: WatchedResource, nowMs: number, settings: FleetSettings): boolean {
  return entry.endAtMs !== undefined && nowMs >= entry.endAtMs - (settings.intervalSeconds * 1000) / 2;
}

/** Busy: news is near, or its trainer should be finishing now. */
function isBusy(entry: WatchedResource, nowMs: number, settings: FleetSettings): boolean {
  return isNewsNear(entry.agent) || isEndDue(entry, nowMs, settings);
}

/** Read priority (lower first), or undefined when no read is due. */
function readPriority(entry: WatchedResource, nowMs: number, settings: FleetSettings, read: boolean): number | undefined {
  if (read || !entry.workflowId) return undefined;
  if (entry.readDue === ReadDue.Ended) return Priority.Ended;
  if (entry.lifecycle === 'pending' || entry.lifecycle === 'gone' || entry.lifecycle === 'terminated') return undefined;
  if (entry.readDue === ReadDue.Changed) return Priority.Changed;
  // A look lands within half an interval of when a read falls due: count it as due.
  const age = nowMs - (entry.readAtMs ?? Number.NEGATIVE_INFINITY);
  const slack = (settings.intervalSeconds * 1000) / 2;
  if (isNewsNear(entry.agent) && age >= settings.busyReadSeconds * 1000 - slack) return Priority.Busy;
  if (isEndDue(entry, nowMs, settings)) return Priority.Busy;
  if (age >= settings.progressReadSeconds * 1000 - slack) return Priority.Progress;
  return undefined;
}

/**
 * Regular reads are paced as well as budgeted: a look takes at most its share of the
 * class (its size times interval over cadence), so reads spread over the cadence
 * instead of coming due together after a burst.
 */
function paceLimits(resources: WatchedResource[], nowMs: number, settings: FleetSettings): Record<number, number> {
  const watched = resources.filter((e) => e.workflowId && (e.lifecycle === 'running' || e.lifecycle === 'stopping'));
  const busy = watched.filter((e) => isBusy(e, nowMs, settings)).length;
  const share = (count: number, cadenceSeconds: number) => Math.ceil((count * settings.intervalSeconds) / cadenceSeconds);
  return { [Priority.Ended]: Infinity, [Priority.Changed]: Infinity, [Priority.Busy]: share(busy, settings.busyReadSeconds), [Priority.Progress]: share(watched.length, settings.progressReadSeconds) };
}

/**
 * What to read and check in this look, given the new listing. `rateLimited`: the project
 * refused a call for its rate quota since the last look; the budget halves and no token
 * is left to spend until it refills.
 */
export function planLook(memory: FleetMemory, listing: FleetResource[], nowMs: number, settings: FleetSettings, rateLimited = false): LookPlan {
  const elapsedMs = Math.max(0, nowMs - memory.tokensAtMs);
  const budgetScale = nextBudgetScale(memory.budgetScale, rateLimited, elapsedMs);
  const bucket = readBucket(settings, budgetScale);
  const readInListing = new Set(listing.filter((l) => l.agent).map((l) => resourceKey(l.ref)));
  const resources = reconcile(memory, listing);
  const refilled = Math.min(bucket.capacity, memory.tokens + elapsedMs * bucket.refillPerMs);
  const tokens = rateLimited ? Math.min(refilled, 0) : refilled;
  const limits = paceLimits(Object.values(resources), nowMs, settings);
  const due = Object.entries(resources)
    .map(([key, entry]) => ({ entry, priority: readPriority(entry, nowMs, settings, readInListing.has(key)) }))
    .filter((d): d is { entry: WatchedResource; priority: number } => d.priority !== undefined)
    .sort((a, b) => a.priority - b.priority || (a.entry.readAtMs ?? -1) - (b.entry.readAtMs ?? -1));
  const reads: ResourceRef[] = [];
  const taken: Record<number, number> = {};
  for (const { entry, priority } of due) {
    const floor = priority <= Priority.Changed ? 0 : bucket.reserve;
    if (reads.length >= Math.floor(tokens - floor)) continue;
    if ((taken[priority] ?? 0) >= limits[priority]) continue;
    taken[priority] = (taken[priority] ?? 0) + 1;
    reads.push(entry.ref);
  }
  const preemptionChecks = Object.values(resources)
    .filter((e) => e.preemptionCheckDue)
    .map((e) => e.ref);
  return { memory: { resources, tokens: tokens - reads.length, tokensAtMs: nowMs, budgetScale }, reads, preemptionChecks };
}

/** A preempted resource still stopping whose agent has not yet said it exited: its run waits for that word. */
function isDraining(entry: WatchedResource): boolean {
  return entry.workflowId !== undefined && entry.lifecycle === 'stopping' && entry.preempted && entry.agent.phase !== 'exited' && entry.agent.phase !== 'failed';
}

export function hasDraining(memory: FleetMemory): boolean {
  return Object.values(memory.resources).some(isDraining);
}

/**
 * A read between looks of each draining resource not read in the last
 * `drainReadSeconds`, paid from the same tokens as a look's changes (no listing, no
 * preemption check): the agent's exit, with its final checkpoint, reaches the run about
 * a second after it is published rather than at the next look after the VM is down.
 */
export function planFollow(memory: FleetMemory, nowMs: number, settings: FleetSettings): { memory: FleetMemory; reads: ResourceRef[] } {
  const elapsedMs = Math.max(0, nowMs - memory.tokensAtMs);
  const bucket = readBucket(settings, memory.budgetScale);
  const tokens = Math.min(bucket.capacity, memory.tokens + elapsedMs * bucket.refillPerMs);
  const everyMs = (settings.drainReadSeconds ?? DEFAULT_FLEET_SETTINGS.drainReadSeconds!) * 1000;
  const due = Object.values(memory.resources)
    .filter((e) => isDraining(e) && nowMs - (e.readAtMs ?? Number.NEGATIVE_INFINITY) >= everyMs / 2)
    .sort((a, b) => (a.readAtMs ?? -1) - (b.readAtMs ?? -1));
  const reads = due.slice(0, Math.max(0, Math.floor(tokens))).map((e) => e.ref);
  return { memory: { ...memory, tokens: tokens - reads.length, tokensAtMs: nowMs }, reads };
}

export interface LookResults {
  /** Agent values read, by resource key; a failed read is simply absent (it stays due). */
  reads: Record<string, AgentValues>;
  /** Resource keys whose preemption check was answered (absent when the check failed). */
  checked: string[];
  /** Of those, the keys that were preempted. */
  preempted: string[];
}

export function absorbLook(memory: FleetMemory, results: LookResults, nowMs: number): FleetMemory {
  const resources = { ...memory.resources };
  for (const [key, agent] of Object.entries(results.reads)) {
    const entry = resources[key];
    if (entry) resources[key] = { ...entry, agent, agentCarried: undefined, readAtMs: nowMs, readDue: undefined, endAtMs: expectedEndAt(entry, agent, nowMs) };
  }
  const preempted = new Set(results.preempted);
  for (const key of results.checked) {
    const entry = resources[key];
    if (entry) resources[key] = { ...entry, preempted: entry.preempted || preempted.has(key), preemptionCheckDue: undefined };
  }
  return { ...memory, resources };
}

export interface DueObservation {
  key: string;
  workflowId: string;
  observation: ResourceObservation;
  /** News the run acts on at once (isUrgent); otherwise progress. */
  urgent: boolean;
}

/** Which signals a tell sends: all news, or only the urgent (while an attempt drains, see watch.ts). */
export const Tell = { All: 'all', Urgent: 'urgent' } as const;
export type Tell = (typeof Tell)[keyof typeof Tell];

/**
 * News a run acts on at once: its attempt's lifecycle, a preemption, the agent's phase or
 * exit, or a silence long enough that the run would look itself. A new checkpoint or step
 * alone is progress: the run records it, and an ending attempt's newest checkpoint is
 * read before its end is told anyway.
 */
function isUrgent(entry: WatchedResource, nowMs: number, settings: FleetSettings): boolean {
  return stateDiffersFromTold(entry) || nowMs - entry.told!.atMs >= settings.maxSilenceSeconds * 1000;
}

/**
 * Worth a signal: a decisive field changed, the step moved and the last word is old
 * enough, or the run has heard nothing for `maxSilenceSeconds` (so silence longer than
 * that means the observer is down, and the run looks for itself).
 */
function isNews(entry: WatchedResource, nowMs: number, settings: FleetSettings): boolean {
  if (!entry.told || differsFromTold(entry)) return true;
  const silentMs = nowMs - entry.told.atMs;
  if (silentMs >= settings.maxSilenceSeconds * 1000) return true;
  return !entry.agentCarried && entry.agent.step !== entry.told.step && silentMs >= settings.progressSignalSeconds * 1000;
}

/**
 * Held back until the facts are in: an ended attempt until its final read (so the run
 * never replaces it without its newest checkpoint), any stop until the preemption check
 * has answered, and a change until its read, unless the resource is stopping: a
 * preemption notice goes out at once with what is known.
 */
function isHeld(entry: WatchedResource): boolean {
  if (entry.preemptionCheckDue) return true;
  if (entry.readDue === ReadDue.Ended) return true;
  return entry.readDue === ReadDue.Changed && entry.lifecycle !== 'stopping';
}

/**
 * The signals to send, urgent first: each becomes a workflow task of its run, and the
 * worker takes them in about the order they were sent, so a preemption must not queue
 * behind a look's worth of checkpoints. `tell` Urgent leaves the progress for later.
 */
export function observationsDue(memory: FleetMemory, nowMs: number, settings: FleetSettings, tell: Tell = Tell.All): DueObservation[] {
  const at = new Date(nowMs).toISOString();
  const due: DueObservation[] = [];
  for (const [key, entry] of Object.entries(memory.resources)) {
    if (!entry.workflowId || isHeld(entry) || !isNews(entry, nowMs, settings)) continue;
    const urgent = isUrgent(entry, nowMs, settings);
    if (!urgent && tell === Tell.Urgent) continue;
    due.push({
      key,
      workflowId: entry.workflowId,
      observation: { name: entry.ref.name, owner: entry.owner, at, snapshot: { lifecycle: entry.lifecycle, preempted: entry.preempted, ...entry.agent } },
      urgent,
    });
  }
  return [...due.filter((d) => d.urgent), ...due.filter((d) => !d.urgent)];
}

/** Records what each run was told; a gone resource is forgotten once told (or when there is no one to tell). */
export function markSent(memory: FleetMemory, delivered: string[], nowMs: number): FleetMemory {
  const resources = { ...memory.resources };
  for (const key of delivered) {
    const entry = resources[key];
    if (entry) resources[key] = { ...entry, told: toldOf(entry, nowMs) };
  }
  for (const [key, entry] of Object.entries(resources)) {
    if (entry.lifecycle === 'gone' && (!entry.workflowId || entry.told?.lifecycle === 'gone')) delete resources[key];
  }
  return { ...memory, resources };
}
