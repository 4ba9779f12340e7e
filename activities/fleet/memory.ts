/**
 * What the observer remembers of each resource between looks, and how that memory is
 * carried between watchFleet calls: as compact rows (`CarriedMemory`), because it rides
 * in heartbeat details, activity payloads and continue-as-new, each capped by Temporal
 * at 2 MB. A carried row keeps everything but the agent's values (their bulk is the
 * checkpoint's URI and digest); what was told to the run stays, so nothing is told
 * twice, and a resource whose news was not yet delivered is marked for a fresh read.
 */
import { type AgentValues, type Backend, type CarriedMemory, type Lifecycle, type Owner, resourceKey, type ResourceRef } from '../../workflows/api';

/** Why the agent must be read before its next regular turn. */
export const ReadDue = {
  /** The attempt ended (terminated): read once so its newest checkpoint and exit code are not missed. */
  Ended: 'ended',
  /** New, or its status changed. */
  Changed: 'changed',
} as const;
export type ReadDue = (typeof ReadDue)[keyof typeof ReadDue];

/** What the run was last told about a resource: the fields whose change is news. */
export interface Told {
  lifecycle: Lifecycle;
  preempted: boolean;
  phase?: string;
  checkpointStep?: number;
  exitCode?: number;
  step?: number;
  atMs: number;
}

export interface WatchedResource {
  ref: ResourceRef;
  owner: Owner;
  /** The run to signal (the `sterna-run-id` the agent reads); none for a resource that does not say. */
  workflowId?: string;
  lifecycle: Lifecycle;
  /** Sticky: once the capacity was reclaimed it stays reclaimed. */
  preempted: boolean;
  agent: AgentValues;
  /**
   * The agent's values beyond its phase were dropped when the memory was carried: until
   * the next read its step and checkpoint are unknown, not changed (the run was told them).
   */
  agentCarried?: true;
  /** Epoch ms of the last read of the agent's values. */
  readAtMs?: number;
  readDue?: ReadDue;
  /** It stopped and the provider has not yet said whether it was preempted. */
  preemptionCheckDue?: boolean;
  /** Listings in a row that did not show it; two make it gone (one may race a watch restart). */
  absentLooks: number;
  told?: Told;
  /**
   * Epoch ms its trainer should reach its last step, at the pace between its last two
   * reads (planner.ts `expectedEndAt`): it is read then, so its run hears of the exit then
   * rather than at the next turn of the progress cadence.
   */
  endAtMs?: number;
}

export interface FleetMemory {
  /** By `resourceKey(ref)`. */
  resources: Record<string, WatchedResource>;
  /** The read budget's token bucket: tokens left, as of `tokensAtMs`. */
  tokens: number;
  tokensAtMs: number;
  /**
   * The share of `readsPerMinute` the budget stands at (1/16 to 1): halved when the
   * project refuses a call for its rate quota, regained over minutes without a refusal.
   */
  budgetScale: number;
}

export function toldOf(entry: WatchedResource, atMs: number): Told {
  // Values not carried are still what the run was last told: keep them.
  const known = entry.agentCarried ? { checkpointStep: entry.told?.checkpointStep, step: entry.told?.step } : { checkpointStep: entry.agent.checkpoint?.step, step: entry.agent.step };
  return {
    lifecycle: entry.lifecycle,
    preempted: entry.preempted,
    phase: entry.agent.phase,
    checkpointStep: known.checkpointStep,
    exitCode: entry.agent.exitCode,
    step: known.step,
    atMs,
  };
}

/** True when a decisive field differs from what the run was told (a new step alone is not). */
export function differsFromTold(entry: WatchedResource): boolean {
  return stateDiffersFromTold(entry) || (!entry.agentCarried && entry.agent.checkpoint?.step !== entry.told!.checkpointStep);
}

/** True when what the run acts on at once differs from what it was told: lifecycle, preemption, phase, exit (not a checkpoint). */
export function stateDiffersFromTold(entry: WatchedResource): boolean {
  const told = entry.told;
  if (!told) return true;
  const now = toldOf(entry, 0);
  return now.lifecycle !== told.lifecycle || now.preempted !== told.preempted || now.phase !== told.phase || now.exitCode !== told.exitCode;
}

const LIFECYCLES: Lifecycle[] = ['pending', 'running', 'stopping', 'terminated', 'gone'];
const Flag = { Preempted: 1, PreemptionCheckDue: 2, ReadChanged: 4, ReadEnded: 8 } as const;

type Cell = string | number | null | Cell[];
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);

/**
 * One row: [name, zone, namespace, workflowId, run, execution, attempt, lifecycle, flags,
 * readAtMs, absentLooks, phase, told: [lifecycle, preempted, phase, checkpointStep,
 * exitCode, step, atMs] | null, endAtMs]. Empty strings and nulls stand for absent
 * values; rows carried before endAtMs end at `told`.
 */
function encodeRow(entry: WatchedResource): Cell[] {
  // News not yet delivered needs the values this row drops: read them again first.
  const readable = entry.lifecycle === 'running' || entry.lifecycle === 'stopping' || entry.lifecycle === 'terminated';
  const readDue = entry.readDue ?? (readable && entry.workflowId && differsFromTold(entry) ? (entry.lifecycle === 'terminated' ? ReadDue.Ended : ReadDue.Changed) : undefined);
  const flags =
    (entry.preempted ? Flag.Preempted : 0) |
    (entry.preemptionCheckDue ? Flag.PreemptionCheckDue : 0) |
    (readDue === ReadDue.Changed ? Flag.ReadChanged : 0) |
    (readDue === ReadDue.Ended ? Flag.ReadEnded : 0);
  const { ref, owner, told } = entry;
  const toldRow: Cell[] | null = told
    ? [LIFECYCLES.indexOf(told.lifecycle), told.preempted ? 1 : 0, told.phase ?? '', told.checkpointStep ?? null, told.exitCode ?? null, told.step ?? null, told.atMs]
    : null;
  return [ref.name, ref.zone, ref.namespace ?? '', entry.workflowId ?? '', owner.run, owner.execution, owner.attempt, LIFECYCLES.indexOf(entry.lifecycle), flags, entry.readAtMs ?? null, entry.absentLooks, entry.agent.phase ?? '', toldRow, entry.endAtMs ?? null];
}

function decodeRow(row: unknown[], backend: Backend): WatchedResource | undefined {
  const [name, zone, namespace, workflowId, run, execution, attempt, lifecycle, flags, readAtMs, absentLooks, phase, toldRow, endAtMs] = row;
  const lc = LIFECYCLES[num(lifecycle) ?? -1];
  if (!str(name) || typeof zone !== 'string' || !str(run) || !str(execution) || num(attempt) === undefined || !lc) return undefined;
  const f = num(flags) ?? 0;
  const t = Array.isArray(toldRow) ? toldRow : undefined;
  const toldLifecycle = t && LIFECYCLES[num(t[0]) ?? -1];
  return {
    ref: { backend, name: name as string, zone, ...(str(namespace) ? { namespace: namespace as string } : {}) },
    owner: { run: run as string, execution: execution as string, attempt: attempt as number },
    workflowId: str(workflowId),
    lifecycle: lc,
    preempted: (f & Flag.Preempted) !== 0,
    agent: str(phase) ? { phase: phase as string } : {},
    agentCarried: true,
    readAtMs: num(readAtMs),
    readDue: f & Flag.ReadEnded ? ReadDue.Ended : f & Flag.ReadChanged ? ReadDue.Changed : undefined,
    preemptionCheckDue: (f & Flag.PreemptionCheckDue) !== 0 || undefined,
    absentLooks: num(absentLooks) ?? 0,
    told:
      t && toldLifecycle
        ? { lifecycle: toldLifecycle, preempted: t[1] === 1, phase: str(t[2]), checkpointStep: num(t[3]), exitCode: num(t[4]), step: num(t[5]), atMs: num(t[6]) ?? 0 }
        : undefined,
    ...(num(endAtMs) !== undefined ? { endAtMs: num(endAtMs) } : {}),
  };
}

export function carry(memory: FleetMemory): CarriedMemory {
  return { version: 1, tokens: memory.tokens, tokensAtMs: memory.tokensAtMs, budgetScale: memory.budgetScale, rows: Object.values(memory.resources).map(encodeRow) };
}

/** The memory a carried one describes; a row it cannot read is dropped (that resource is then new). */
export function resume(carried: CarriedMemory, backend: Backend): FleetMemory {
  const resources: Record<string, WatchedResource> = {};
  for (const row of carried.rows) {
    const entry = Array.isArray(row) ? decodeRow(row, backend) : undefined;
    if (entry) resources[resourceKey(entry.ref)] = entry;
  }
  // Memories carried before the budget could shrink stand at the full budget.
  return { resources, tokens: carried.tokens, tokensAtMs: carried.tokensAtMs, budgetScale: carried.budgetScale ?? 1 };
}
