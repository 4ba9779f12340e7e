/**
 * A team's admission rules, as pure functions of its JSON-plain state: who runs, who
 * waits, who is refused, and what the team has spent this period. The team workflow
 * (workflow.ts) only wires messages to these; server-less tests call them directly.
 *
 *   request -> queue (ordered by priority, then age)
 *   settle:  for each waiter in order: refused (can never fit) | admitted (fits now) | stays queued
 *            the first waiter that cannot start blocks those behind it, so a big urgent run
 *            is never starved by small later ones
 *   spend / ended -> the running total this period; period roll-over starts it at zero
 *
 * Money: a run reserves its own `pricing.budgetUsd` (the most it can spend; 0 without one).
 * A run is refused with BudgetExceeded when the period's spend plus its reservation exceeds
 * the team budget even if every running run stopped now; it waits when only the running
 * runs' unspent reservations stand in the way (they may finish under budget, or the budget
 * may be raised).
 */
import { FailureType } from '../failures';
import type { RunSpec } from '../spec';
import { Period, periodEnd, periodStart } from './period';

/** Temporal's priority keys: 1 is the most urgent, 5 the least; 3 when a spec gives none. */
export const PRIORITY_HIGHEST = 1;
export const PRIORITY_LOWEST = 5;
export const DEFAULT_PRIORITY = 3;
/** The team of a run whose spec has no `labels.team`. */
export const DEFAULT_TEAM = 'default';
/** Ended runs listed one by one in the period; older ones are folded into one sum. */
export const ENDED_RUNS_KEPT = 1000;
/** Closed periods kept for `sterna team show`. */
export const PERIODS_KEPT = 12;

export interface TeamBudget {
  usd: number;
  period: Period;
}

export interface TeamLimits {
  budget?: TeamBudget;
  /** GPUs the team's runs may hold at once (accelerator count of each admitted run). */
  maxGpus?: number;
}

/** What a run asks for: sent once before it provisions (again if it heard nothing). */
export interface AdmissionRequest {
  runId: string;
  gpus: number;
  /** The most the run can spend: its own budget, or 0 when it has none. */
  reserveUsd: number;
  priority: number;
  /** Epoch ms the run asked first; the queue's second key. */
  askedAt: number;
  /**
   * The namespace the run executes in, set by the askAdmission activity from the server's
   * record of the caller (never by the run): the ledger then answers through the tellRun
   * activity. Absent when runs and ledger share one namespace.
   */
  namespace?: string;
}

export interface Waiter extends AdmissionRequest {
  /** The run has been told it is queued (once). */
  told?: boolean;
}

export interface Holder {
  runId: string;
  gpus: number;
  reserveUsd: number;
  priority: number;
  admittedAt: number;
  /** The run's ledger total as it last reported it (all periods). */
  spentUsd: number;
  /** The part of `spentUsd` counted in earlier periods. */
  countedBeforeUsd: number;
}

export interface EndedRun {
  runId: string;
  spentUsd: number;
  countedBeforeUsd: number;
}

export interface ClosedPeriod {
  period: Period;
  start: string;
  spentUsd: number;
}

export interface TeamState {
  team: string;
  limits: TeamLimits;
  /** Epoch ms the current period began. */
  periodStartMs: number;
  running: Holder[];
  queue: Waiter[];
  ended: EndedRun[];
  /** Spend of ended runs of this period beyond ENDED_RUNS_KEPT. */
  foldedUsd: number;
  history: ClosedPeriod[];
  /** The latest refusals (at most ENDED_RUNS_KEPT), so a refused run that asks is told the same (absent in ledgers from before). */
  refused?: Extract<AdmissionDecision, { outcome: 'refused' }>[];
  /** The namespace this team's runs execute in when it is not the ledger's own (the first request that said so); absent before tenancy. */
  runsNamespace?: string;
}

/** What the team tells one run. */
export type AdmissionDecision =
  /** `gpus`: what it was admitted with (the ledger's standing answer says; the signal to the run need not). */
  | { runId: string; outcome: 'admitted'; team: string; gpus?: number }
  | { runId: string; outcome: 'queued'; team: string; position: number; reason: string }
  | { runId: string; outcome: 'refused'; team: string; failure: FailureType; message: string; details: Record<string, unknown> };

/** The period spend is counted in: the budget's, or calendar months when there is no budget. */
export function periodOf(limits: TeamLimits): Period {
  return limits.budget?.period ?? Period.Month;
}

export function newTeamState(team: string, nowMs: number): TeamState {
  return { team, limits: {}, periodStartMs: periodStart(Period.Month, nowMs), running: [], queue: [], ended: [], foldedUsd: 0, history: [] };
}

/** What the team has spent in the current period: each run's spend since the period began. */
export function spentThisPeriod(state: TeamState): number {
  let sum = state.foldedUsd;
  for (const e of state.ended) sum += e.spentUsd - e.countedBeforeUsd;
  for (const h of state.running) sum += h.spentUsd - h.countedBeforeUsd;
  return sum;
}

/** What the running runs may still spend, by their reservations. */
export function outstandingUsd(state: TeamState): number {
  return state.running.reduce((sum, h) => sum + Math.max(0, h.reserveUsd - h.spentUsd), 0);
}

export function runningGpus(state: TeamState): number {
  return state.running.reduce((sum, h) => sum + h.gpus, 0);
}

/** Priority first (1 before 5), then who asked first; the run id settles exact ties. */
export function queueOrder(a: AdmissionRequest, b: AdmissionRequest): number {
  return a.priority - b.priority || a.askedAt - b.askedAt || (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0);
}

/** Starts a new period when `nowMs` has left the current one; the closed one is kept in history. */
export function rollOver(state: TeamState, nowMs: number): boolean {
  const period = periodOf(state.limits);
  const start = periodStart(period, nowMs);
  if (start <= state.periodStartMs) return false;
  const spent = spentThisPeriod(state);
  // A period in which nothing ran (a team just set up) is not worth a line.
  if (spent > 0 || state.ended.length > 0 || state.running.length > 0) state.history.push({ period, start: new Date(state.periodStartMs).toISOString(), spentUsd: spent });
  if (state.history.length > PERIODS_KEPT) state.history.splice(0, state.history.length - PERIODS_KEPT);
  for (const h of state.running) h.countedBeforeUsd = h.spentUsd;
  state.ended = [];
  state.foldedUsd = 0;
  state.periodStartMs = start;
  return true;
}

/** When the current period ends (the team workflow wakes then to roll over). */
export function periodEndsAt(state: TeamState): number {
  return periodEnd(periodOf(state.limits), state.periodStartMs);
}

/**
 * A run asks to be admitted. Asking again (a retried activity, a re-ask after silence)
 * changes nothing; a run already admitted is simply told again.
 */
export function enqueue(state: TeamState, request: AdmissionRequest): AdmissionDecision | undefined {
  if (state.running.some((h) => h.runId === request.runId)) return { runId: request.runId, outcome: 'admitted', team: state.team };
  const waiting = state.queue.find((w) => w.runId === request.runId);
  if (waiting) {
    waiting.told = false;
    return undefined;
  }
  state.queue.push({ ...request });
  return undefined;
}

/**
 * The run reports its ledger total so far. The latest report stands: a live attempt is
 * priced to the moment of the report, and its final line (to the provider's stop time)
 * can be a little less.
 */
export function recordSpend(state: TeamState, runId: string, totalUsd: number): void {
  const holder = state.running.find((h) => h.runId === runId);
  if (holder) holder.spentUsd = totalUsd;
}

/**
 * The run ended (any way): its GPUs return to the team and its final ledger total stays
 * in the period's spend (its last report, when it could not say: a run that is gone).
 * A run that ends while queued just leaves the queue.
 */
export function release(state: TeamState, runId: string, totalUsd?: number): void {
  state.queue = state.queue.filter((w) => w.runId !== runId);
  const i = state.running.findIndex((h) => h.runId === runId);
  if (i < 0) return;
  const [holder] = state.running.splice(i, 1);
  state.ended.push({ runId, spentUsd: totalUsd ?? holder.spentUsd, countedBeforeUsd: holder.countedBeforeUsd });
  if (state.ended.length > ENDED_RUNS_KEPT) {
    for (const old of state.ended.splice(0, state.ended.length - ENDED_RUNS_KEPT)) state.foldedUsd += old.spentUsd - old.countedBeforeUsd;
  }
}

/** Changes to the limits, as `sterna team set` and the update send them: null removes one. */
export interface LimitsChange {
  budgetUsd?: number | null;
  period?: Period;
  maxGpus?: number | null;
}

/** Ten million USD, as a run's budget (spec.ts MAX_BUDGET_USD). */
const MAX_TEAM_BUDGET_USD = 10_000_000;
const MAX_TEAM_GPUS = 100_000;

/** Why a change cannot apply, naming the field and what it accepts; undefined when it can. */
export function limitsProblem(change: unknown, current: TeamLimits): string | undefined {
  if (typeof change !== 'object' || change === null || Array.isArray(change)) return 'expected { budgetUsd?, period?, maxGpus? }';
  const c = change as Record<string, unknown>;
  const unknown = Object.keys(c).filter((k) => !['budgetUsd', 'period', 'maxGpus'].includes(k));
  if (unknown.length > 0) return `unknown field ${unknown[0]}; a team has budgetUsd, period and maxGpus`;
  if (c.budgetUsd !== undefined && c.budgetUsd !== null && !(typeof c.budgetUsd === 'number' && Number.isFinite(c.budgetUsd) && c.budgetUsd > 0 && c.budgetUsd <= MAX_TEAM_BUDGET_USD)) {
    return `budgetUsd must be a number of USD above 0 and at most ${MAX_TEAM_BUDGET_USD} (or null to remove the budget), got ${JSON.stringify(c.budgetUsd)}`;
  }
  if (c.period !== undefined && !(Object.values(Period) as unknown[]).includes(c.period)) return `period must be one of ${Object.values(Period).join(', ')}, got ${JSON.stringify(c.period)}`;
  if (c.period !== undefined && c.budgetUsd === undefined && !current.budget) return 'period applies to a budget; give budgetUsd with it';
  if (c.maxGpus !== undefined && c.maxGpus !== null && !(Number.isInteger(c.maxGpus) && (c.maxGpus as number) >= 0 && (c.maxGpus as number) <= MAX_TEAM_GPUS)) {
    return `maxGpus must be a whole number from 0 to ${MAX_TEAM_GPUS} (or null to remove the quota), got ${JSON.stringify(c.maxGpus)}`;
  }
  return undefined;
}

/** Applies a change that limitsProblem accepted. A new period kind starts counting from its own start. */
export function applyLimits(state: TeamState, change: LimitsChange, nowMs: number): void {
  const limits = state.limits;
  if (change.budgetUsd === null) limits.budget = undefined;
  else if (change.budgetUsd !== undefined || change.period !== undefined) {
    limits.budget = { usd: change.budgetUsd ?? limits.budget!.usd, period: change.period ?? limits.budget?.period ?? Period.Month };
  }
  if (change.maxGpus === null) limits.maxGpus = undefined;
  else if (change.maxGpus !== undefined) limits.maxGpus = change.maxGpus;
  // Spend so far stays counted; only the boundary moves to the new kind's current period.
  state.periodStartMs = Math.min(state.periodStartMs, periodStart(periodOf(limits), nowMs));
  if (limits.budget === undefined) delete limits.budget;
  if (limits.maxGpus === undefined) delete limits.maxGpus;
}

const money = (usd: number) => `$${usd.toFixed(2)}`;

type Verdict = { fits: true } | { fits: false; reason: string } | { refused: FailureType; message: string; details: Record<string, unknown> };

/** Whether `waiter` can start now, must wait, or can never start under the current limits. */
export function verdict(state: TeamState, waiter: AdmissionRequest): Verdict {
  const { budget, maxGpus } = state.limits;
  if (maxGpus !== undefined && waiter.gpus > maxGpus) {
    return {
      refused: FailureType.QuotaExceeded,
      message: `team ${state.team}: the run needs ${waiter.gpus} GPUs and the team may hold at most ${maxGpus} at once; raise it with \`sterna team set ${state.team} --max-gpus ${waiter.gpus}\``,
      details: { team: state.team, gpus: waiter.gpus, maxGpus },
    };
  }
  if (budget) {
    const spent = spentThisPeriod(state);
    const need = waiter.reserveUsd;
    const start = new Date(state.periodStartMs).toISOString();
    if (spent + need > budget.usd || (need === 0 && spent >= budget.usd)) {
      return {
        refused: FailureType.BudgetExceeded,
        message:
          `team ${state.team}: ${budget.period} budget ${money(budget.usd)} (period from ${start}) would be exceeded: spent ${money(spent)}` +
          `${need > 0 ? `, this run may spend ${money(need)}` : ', nothing left for a run without its own budget'}; raise it with \`sterna team set ${state.team} --budget <usd>\``,
        details: { team: state.team, period: budget.period, periodStart: start, budgetUsd: budget.usd, spentUsd: spent, runBudgetUsd: need },
      };
    }
    const committed = spent + outstandingUsd(state);
    if (committed + need > budget.usd || (need === 0 && committed >= budget.usd)) {
      return { fits: false, reason: `running runs may still spend ${money(committed - spent)} of the ${money(budget.usd - spent)} left this ${budget.period}` };
    }
  }
  const held = runningGpus(state);
  if (maxGpus !== undefined && held + waiter.gpus > maxGpus) return { fits: false, reason: `the team holds ${held} of its ${maxGpus} GPUs` };
  return { fits: true };
}

/**
 * Goes through the queue in order and says what changed for each run: admitted, refused,
 * or (told once) queued. The first waiter that cannot start blocks the ones behind it.
 */
export function settle(state: TeamState, nowMs: number): AdmissionDecision[] {
  rollOver(state, nowMs);
  state.queue.sort(queueOrder);
  const decisions: AdmissionDecision[] = [];
  const stay: Waiter[] = [];
  let blockedBy: string | undefined;
  for (const waiter of state.queue) {
    const v = verdict(state, waiter);
    if ('refused' in v) {
      const refusal = { runId: waiter.runId, outcome: 'refused' as const, team: state.team, failure: v.refused, message: v.message, details: v.details };
      decisions.push(refusal);
      state.refused = [...(state.refused ?? []), refusal].slice(-ENDED_RUNS_KEPT);
      continue;
    }
    if (v.fits && blockedBy === undefined) {
      state.running.push({ runId: waiter.runId, gpus: waiter.gpus, reserveUsd: waiter.reserveUsd, priority: waiter.priority, admittedAt: nowMs, spentUsd: 0, countedBeforeUsd: 0 });
      decisions.push({ runId: waiter.runId, outcome: 'admitted', team: state.team });
      continue;
    }
    blockedBy ??= v.fits ? undefined : v.reason;
    stay.push(waiter);
    if (!waiter.told) {
      waiter.told = true;
      decisions.push({ runId: waiter.runId, outcome: 'queued', team: state.team, position: stay.length, reason: blockedBy ?? 'runs ahead of it are waiting' });
    }
  }
  state.queue = stay;
  return decisions;
}

/**
 * The ledger's answer about one run, as it stands: the only admission a run acts on. A
 * run treats an `admission` signal as news to check here, since anyone who may signal
 * the run could have sent it. Undefined when the ledger has never heard of the run.
 */
export function admissionOf(state: TeamState, runId: string): AdmissionDecision | undefined {
  const holder = state.running.find((h) => h.runId === runId);
  if (holder) return { runId, outcome: 'admitted', team: state.team, gpus: holder.gpus };
  const queue = [...state.queue].sort(queueOrder);
  const at = queue.findIndex((w) => w.runId === runId);
  if (at >= 0) {
    const v = verdict(state, queue[at]);
    const reason = 'reason' in v ? v.reason : 'runs ahead of it are waiting';
    return { runId, outcome: 'queued', team: state.team, position: at + 1, reason };
  }
  return state.refused?.find((r) => r.runId === runId);
}

/** What `sterna team show` and the query answer. */
export interface TeamView {
  team: string;
  limits: TeamLimits;
  period: { kind: Period; start: string; end: string };
  spentUsd: number;
  /** Spend plus what running runs may still spend by their reservations. */
  committedUsd: number;
  runningGpus: number;
  running: { runId: string; gpus: number; priority: number; spentUsd: number; admittedAt: string }[];
  queue: { runId: string; gpus: number; priority: number; askedAt: string; position: number }[];
  /** Each run's spend in this period (ended runs beyond the kept ones are in `foldedUsd`). */
  runs: { runId: string; spentUsd: number; running: boolean }[];
  foldedUsd: number;
  history: ClosedPeriod[];
}

export function teamView(state: TeamState): TeamView {
  const spent = spentThisPeriod(state);
  const kind = periodOf(state.limits);
  return {
    team: state.team,
    limits: state.limits,
    period: { kind, start: new Date(state.periodStartMs).toISOString(), end: new Date(periodEndsAt(state)).toISOString() },
    spentUsd: spent,
    committedUsd: spent + outstandingUsd(state),
    runningGpus: runningGpus(state),
    running: state.running.map((h) => ({ runId: h.runId, gpus: h.gpus, priority: h.priority, spentUsd: h.spentUsd, admittedAt: new Date(h.admittedAt).toISOString() })),
    queue: [...state.queue].sort(queueOrder).map((w, i) => ({ runId: w.runId, gpus: w.gpus, priority: w.priority, askedAt: new Date(w.askedAt).toISOString(), position: i + 1 })),
    runs: [
      ...state.ended.map((e) => ({ runId: e.runId, spentUsd: e.spentUsd - e.countedBeforeUsd, running: false })),
      ...state.running.map((h) => ({ runId: h.runId, spentUsd: h.spentUsd - h.countedBeforeUsd, running: true })),
    ],
    foldedUsd: state.foldedUsd,
    history: state.history,
  };
}

/**
 * The team a run's spec names (its `team` label), or the default team. Only checked (the
 * askAdmission activity refuses a name other than the run's namespace): a run's team is
 * the namespace it executes in, never this.
 */
export function teamOf(spec: RunSpec): string {
  return spec.labels.team || DEFAULT_TEAM;
}

export function priorityOf(spec: RunSpec): number {
  return spec.priority ?? DEFAULT_PRIORITY;
}
