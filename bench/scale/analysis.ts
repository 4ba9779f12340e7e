/**
 * The scale benchmark's figures, as pure functions of what it collected: workflow
 * histories, the emulator's operations and API counters. No I/O here, so the rules
 * (what counts as a slot wait, which insert replaces which preemption, what is a read)
 * are tested without a server.
 */
import type { ApiUsageView, MethodUsage } from '../../emulator/admin-client';

/** A protobuf int64 (a Long) or a plain number. */
type Int64 = number | { toString(): string };

/**
 * The few fields of a Temporal history event (temporal.api.history.v1.IHistoryEvent)
 * that the figures use; the SDK's events fit it, and tests write plain ones.
 */
export interface HistoryEvent {
  eventId?: Int64 | null;
  eventTime?: { seconds?: Int64 | null; nanos?: number | null } | null;
  activityTaskScheduledEventAttributes?: { activityType?: { name?: string | null } | null; input?: { payloads?: { data?: Uint8Array | null }[] | null } | null } | null;
  activityTaskStartedEventAttributes?: { scheduledEventId?: Int64 | null; attempt?: number | null } | null;
  activityTaskCompletedEventAttributes?: { scheduledEventId?: Int64 | null } | null;
  workflowExecutionSignaledEventAttributes?: { signalName?: string | null } | null;
  workflowTaskScheduledEventAttributes?: object | null;
  workflowTaskStartedEventAttributes?: { scheduledEventId?: Int64 | null } | null;
  workflowExecutionStartedEventAttributes?: object | null;
  workflowExecutionCompletedEventAttributes?: object | null;
  workflowExecutionFailedEventAttributes?: object | null;
  workflowExecutionCanceledEventAttributes?: object | null;
  workflowExecutionTerminatedEventAttributes?: object | null;
  workflowExecutionTimedOutEventAttributes?: object | null;
  workflowExecutionContinuedAsNewEventAttributes?: { newExecutionRunId?: string | null } | null;
}

/** An activity that waited longer than this between scheduled and started waited for a slot. */
export const SLOT_WAIT_MS = 1000;

/** Calls that change the cloud; every other call of the Compute API is a read of some kind. */
export const WRITE_METHODS: ReadonlySet<string> = new Set(['compute.instances.insert', 'compute.instances.delete', 'compute.zoneOperations.delete']);

function num(value: Int64 | null | undefined): number {
  if (value === null || value === undefined) return NaN;
  return typeof value === 'number' ? value : Number(value.toString());
}

function timeMs(event: HistoryEvent): number {
  const t = event.eventTime;
  return t ? num(t.seconds) * 1000 + (t.nanos ?? 0) / 1e6 : NaN;
}

export type ExecutionEnd = 'completed' | 'failed' | 'cancelled' | 'terminated' | 'timed-out' | 'continued' | 'running';

export interface ActivityGap {
  activity: string;
  /** Scheduled -> started (ms). */
  gapMs: number;
  /** 1 for a first try; a retry's gap includes its backoff, so it is not a slot wait. */
  attempt: number;
  /** When it was scheduled (epoch ms). */
  scheduledAtMs: number;
}

export interface ExecutionFacts {
  events: number;
  startMs: number;
  endMs?: number;
  end: ExecutionEnd;
  continuedAsRunId?: string;
  activities: ActivityGap[];
  /** Workflow tasks: scheduled -> started (ms), how long the run waited for the worker to think. */
  workflowTasks: TaskGap[];
  /** Each release followed by a new placement: the steps from the last signal to the next create's start. */
  replacements: ReplacementPath[];
}

/**
 * One ended attempt's way to its replacement, as the history shows it (epoch ms): the
 * last signal before the release (the observer's word that ended the attempt), the
 * release (awaited, or running beside the placement), the new round's findCapacity and
 * the next attempt's provision.
 */
export interface ReplacementPath {
  /** The released resource's name, from the release activity's input. */
  released?: string;
  signalMs?: number;
  releaseScheduledMs: number;
  releaseDoneMs?: number;
  findScheduledMs?: number;
  findStartedMs?: number;
  findDoneMs?: number;
  provisionScheduledMs?: number;
  provisionStartedMs?: number;
}

/** The resource name a release activity was given (its first argument's `ref.name`). */
function releasedName(e: HistoryEvent): string | undefined {
  const data = e.activityTaskScheduledEventAttributes?.input?.payloads?.[0]?.data;
  if (!data) return undefined;
  try {
    const request = JSON.parse(Buffer.from(data).toString('utf8')) as { ref?: { name?: unknown } };
    return typeof request.ref?.name === 'string' ? request.ref.name : undefined;
  } catch {
    return undefined;
  }
}

/** Follows release -> findCapacity -> provision through an execution's events. */
class ReplacementTracker {
  readonly paths: ReplacementPath[] = [];
  private open: ReplacementPath | undefined;
  private lastSignalMs: number | undefined;
  /** Scheduled event id -> the path and the field its start or completion fills. */
  private readonly ids = new Map<number, { path: ReplacementPath; started?: 'findStartedMs' | 'provisionStartedMs'; done?: 'releaseDoneMs' | 'findDoneMs' }>();

  signal(atMs: number): void {
    this.lastSignalMs = atMs;
  }

  scheduled(id: number, activity: string, atMs: number, e: HistoryEvent): void {
    if (activity === 'release') {
      this.open = { released: releasedName(e), signalMs: this.lastSignalMs, releaseScheduledMs: atMs };
      this.ids.set(id, { path: this.open, done: 'releaseDoneMs' });
    } else if (this.open && activity === 'findCapacity' && this.open.findScheduledMs === undefined) {
      // After the release was scheduled: done by then, or (released beside) still running.
      this.open.findScheduledMs = atMs;
      this.ids.set(id, { path: this.open, started: 'findStartedMs', done: 'findDoneMs' });
    } else if (this.open && activity === 'provision' && this.open.findDoneMs !== undefined && this.open.provisionScheduledMs === undefined) {
      this.open.provisionScheduledMs = atMs;
      this.ids.set(id, { path: this.open, started: 'provisionStartedMs' });
    }
  }

  started(scheduledId: number, atMs: number): void {
    const at = this.ids.get(scheduledId);
    if (!at?.started) return;
    at.path[at.started] = atMs;
    if (at.started === 'provisionStartedMs') {
      this.paths.push(at.path);
      if (this.open === at.path) this.open = undefined;
    }
  }

  completed(scheduledId: number, atMs: number): void {
    const at = this.ids.get(scheduledId);
    if (at?.done) at.path[at.done] = atMs;
  }
}

export interface TaskGap {
  gapMs: number;
  scheduledAtMs: number;
}

/** What one execution's history says about waiting, size and outcome. */
export function executionFacts(events: readonly HistoryEvent[]): ExecutionFacts {
  const scheduled = new Map<number, { activity: string; atMs: number }>();
  const tasks = new Map<number, number>();
  const replacements = new ReplacementTracker();
  const facts: ExecutionFacts = { events: events.length, startMs: events.length > 0 ? timeMs(events[0]) : NaN, end: 'running', activities: [], workflowTasks: [], replacements: replacements.paths };
  for (const e of events) {
    const id = num(e.eventId);
    const at = timeMs(e);
    if (e.activityTaskScheduledEventAttributes) {
      const activity = e.activityTaskScheduledEventAttributes.activityType?.name ?? '?';
      scheduled.set(id, { activity, atMs: at });
      replacements.scheduled(id, activity, at, e);
    } else if (e.activityTaskStartedEventAttributes) {
      const scheduledId = num(e.activityTaskStartedEventAttributes.scheduledEventId);
      const from = scheduled.get(scheduledId);
      if (from) facts.activities.push({ activity: from.activity, gapMs: at - from.atMs, attempt: e.activityTaskStartedEventAttributes.attempt ?? 1, scheduledAtMs: from.atMs });
      replacements.started(scheduledId, at);
    } else if (e.activityTaskCompletedEventAttributes) replacements.completed(num(e.activityTaskCompletedEventAttributes.scheduledEventId), at);
    else if (e.workflowExecutionSignaledEventAttributes) replacements.signal(at);
    else if (e.workflowTaskScheduledEventAttributes) tasks.set(id, at);
    else if (e.workflowTaskStartedEventAttributes) {
      const from = tasks.get(num(e.workflowTaskStartedEventAttributes.scheduledEventId));
      if (from !== undefined) facts.workflowTasks.push({ gapMs: at - from, scheduledAtMs: from });
    } else if (e.workflowExecutionCompletedEventAttributes) close(facts, 'completed', at);
    else if (e.workflowExecutionFailedEventAttributes) close(facts, 'failed', at);
    else if (e.workflowExecutionCanceledEventAttributes) close(facts, 'cancelled', at);
    else if (e.workflowExecutionTerminatedEventAttributes) close(facts, 'terminated', at);
    else if (e.workflowExecutionTimedOutEventAttributes) close(facts, 'timed-out', at);
    else if (e.workflowExecutionContinuedAsNewEventAttributes) {
      close(facts, 'continued', at);
      facts.continuedAsRunId = e.workflowExecutionContinuedAsNewEventAttributes.newExecutionRunId ?? undefined;
    }
  }
  return facts;
}

function close(facts: ExecutionFacts, end: ExecutionEnd, atMs: number): void {
  facts.end = end;
  facts.endMs = atMs;
}

/** One run: its executions (continue-as-new chain) folded together. */
export interface RunFacts {
  workflowId: string;
  executions: number;
  events: number;
  startMs: number;
  endMs?: number;
  end: ExecutionEnd;
  activities: ActivityGap[];
  workflowTasks: TaskGap[];
  replacements: ReplacementPath[];
}

export function runFacts(workflowId: string, chain: readonly ExecutionFacts[]): RunFacts {
  const last = chain[chain.length - 1];
  return {
    workflowId,
    executions: chain.length,
    events: chain.reduce((s, e) => s + e.events, 0),
    startMs: chain[0].startMs,
    endMs: last.end === 'running' || last.end === 'continued' ? undefined : last.endMs,
    end: last.end,
    activities: chain.flatMap((e) => e.activities),
    workflowTasks: chain.flatMap((e) => e.workflowTasks),
    replacements: chain.flatMap((e) => e.replacements),
  };
}

/** Nearest-rank percentile (p in 0..100) of unsorted values; undefined for none. */
export function percentile(values: readonly number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export interface HistorySummary {
  runsAnalysed: number;
  executions: number;
  events: number;
  runHours: number;
  eventsPerRunHour: number;
  /** Runs with at least one first-try activity that waited more than SLOT_WAIT_MS to start. */
  slotWaits: number;
  slotWaitActivities: Record<string, number>;
  activityStartP50Ms?: number;
  activityStartP99Ms?: number;
  activityStartMaxMs?: number;
  activities: number;
  /** First tries by activity type (`observe` is a look, `provision` an attempt's create). */
  activityCounts: Record<string, number>;
  activityRetries: number;
  workflowTaskStartP50Ms?: number;
  workflowTaskStartP99Ms?: number;
  workflowTaskStartMaxMs?: number;
  workflowTasks: number;
}

/** `untilMs` closes the run-time of runs still open (the measurement's end). */
export function summarizeHistories(runs: readonly RunFacts[], untilMs: number): HistorySummary {
  const firstTries = runs.flatMap((r) => r.activities.filter((a) => a.attempt === 1));
  const gaps = firstTries.map((a) => a.gapMs);
  const tasks = runs.flatMap((r) => r.workflowTasks.map((t) => t.gapMs));
  const waited = firstTries.filter((a) => a.gapMs > SLOT_WAIT_MS);
  const slotWaitActivities: Record<string, number> = {};
  for (const a of waited) slotWaitActivities[a.activity] = (slotWaitActivities[a.activity] ?? 0) + 1;
  const activityCounts: Record<string, number> = {};
  for (const a of firstTries) activityCounts[a.activity] = (activityCounts[a.activity] ?? 0) + 1;
  const runHours = runs.reduce((s, r) => s + Math.max(0, (r.endMs ?? untilMs) - r.startMs), 0) / 3_600_000;
  const events = runs.reduce((s, r) => s + r.events, 0);
  return {
    runsAnalysed: runs.length,
    executions: runs.reduce((s, r) => s + r.executions, 0),
    events,
    runHours,
    eventsPerRunHour: runHours > 0 ? events / runHours : 0,
    slotWaits: runs.filter((r) => r.activities.some((a) => a.attempt === 1 && a.gapMs > SLOT_WAIT_MS)).length,
    slotWaitActivities,
    activityStartP50Ms: percentile(gaps, 50),
    activityStartP99Ms: percentile(gaps, 99),
    activityStartMaxMs: gaps.length > 0 ? Math.max(...gaps) : undefined,
    activities: firstTries.length,
    activityCounts,
    activityRetries: runs.reduce((s, r) => s + r.activities.filter((a) => a.attempt > 1).length, 0),
    workflowTaskStartP50Ms: percentile(tasks, 50),
    workflowTaskStartP99Ms: percentile(tasks, 99),
    workflowTaskStartMaxMs: tasks.length > 0 ? tasks.reduce((m, t) => Math.max(m, t), 0) : undefined,
    workflowTasks: tasks.length,
  };
}

export interface WindowFigures {
  fromMs: number;
  toMs: number;
  /** Runs with a first-try activity scheduled in the window that waited more than SLOT_WAIT_MS. */
  slotWaits: number;
  activityStartP99Ms?: number;
  workflowTaskStartP50Ms?: number;
  workflowTaskStartP99Ms?: number;
}

/**
 * The waiting figures of what was scheduled in [fromMs, toMs): the steady state, apart
 * from the start burst (every run placing at once) and the end (every run releasing).
 */
export function windowFigures(runs: readonly RunFacts[], fromMs: number, toMs: number): WindowFigures {
  const inside = (atMs: number) => atMs >= fromMs && atMs < toMs;
  const firstTries = runs.map((r) => r.activities.filter((a) => a.attempt === 1 && inside(a.scheduledAtMs)));
  const tasks = runs.flatMap((r) => r.workflowTasks.filter((t) => inside(t.scheduledAtMs)).map((t) => t.gapMs));
  return {
    fromMs,
    toMs,
    slotWaits: firstTries.filter((list) => list.some((a) => a.gapMs > SLOT_WAIT_MS)).length,
    activityStartP99Ms: percentile(firstTries.flat().map((a) => a.gapMs), 99),
    workflowTaskStartP50Ms: percentile(tasks, 50),
    workflowTaskStartP99Ms: percentile(tasks, 99),
  };
}

// --- preemption -> replacement insert --------------------------------------------------

export interface TimedName {
  name: string;
  atMs: number;
}

/** `st-<run>-<hash>-<exec>-a<attempt>` (workflows/naming.ts) -> its chain and attempt. */
export function attemptOf(name: string): { chain: string; attempt: number } | undefined {
  const m = /^(.*)-a(\d+)$/.exec(name);
  return m ? { chain: m[1], attempt: Number(m[2]) } : undefined;
}

export interface PreemptionLatencies {
  /** Seconds from each preemption to the insert of the same run's next attempt. */
  seconds: number[];
  /** Preempted VMs whose run inserted no later attempt (it ended, or the measurement did). */
  unreplaced: string[];
}

/**
 * Pairs each preemption with the first insert, at or after it, of a later attempt of
 * the same run (the same name but for the attempt number).
 */
export function preemptionLatencies(preemptions: readonly TimedName[], inserts: readonly TimedName[]): PreemptionLatencies {
  const byChain = new Map<string, { attempt: number; atMs: number }[]>();
  for (const insert of inserts) {
    const a = attemptOf(insert.name);
    if (!a) continue;
    let list = byChain.get(a.chain);
    if (!list) byChain.set(a.chain, (list = []));
    list.push({ attempt: a.attempt, atMs: insert.atMs });
  }
  const result: PreemptionLatencies = { seconds: [], unreplaced: [] };
  for (const p of preemptions) {
    const a = attemptOf(p.name);
    const next = a && (byChain.get(a.chain) ?? []).filter((i) => i.attempt > a.attempt && i.atMs >= p.atMs).sort((x, y) => x.atMs - y.atMs)[0];
    if (next) result.seconds.push((next.atMs - p.atMs) / 1000);
    else result.unreplaced.push(p.name);
  }
  return result;
}

/** The steps of a preempted attempt's way to its replacement's create, in order. */
export const REPLACEMENT_STEPS = [
  ['preemption -> signal', 'preemptedMs', 'signalMs'],
  ['signal -> release scheduled', 'signalMs', 'releaseScheduledMs'],
  ['release', 'releaseScheduledMs', 'releaseDoneMs'],
  ['release scheduled -> findCapacity scheduled', 'releaseScheduledMs', 'findScheduledMs'],
  ['findCapacity schedule -> start', 'findScheduledMs', 'findStartedMs'],
  ['findCapacity', 'findStartedMs', 'findDoneMs'],
  ['findCapacity -> provision scheduled', 'findDoneMs', 'provisionScheduledMs'],
  ['provision schedule -> start', 'provisionScheduledMs', 'provisionStartedMs'],
] as const;

export interface StepFigures {
  step: string;
  p50S?: number;
  p99S?: number;
}

/**
 * Where the time between a preemption and its replacement's create goes: for each path
 * whose released resource was preempted (`preempted`: name -> epoch ms), p50 and p99 of
 * each step (seconds). Steps are measured per path, so their percentiles do not add up.
 */
export function replacementSteps(paths: readonly ReplacementPath[], preempted: ReadonlyMap<string, number>): { paths: number; steps: StepFigures[]; slowest?: SlowestPath } {
  const preemptedPaths = paths.flatMap((p) => (p.released !== undefined && preempted.has(p.released) ? [{ ...p, preemptedMs: preempted.get(p.released)! }] : []));
  const round2 = (x: number | undefined) => (x === undefined ? undefined : Math.round(x * 100) / 100);
  const stepSeconds = (p: (typeof preemptedPaths)[number], from: (typeof REPLACEMENT_STEPS)[number][1], to: (typeof REPLACEMENT_STEPS)[number][2]) =>
    p[from] !== undefined && p[to] !== undefined ? (p[to]! - p[from]!) / 1000 : undefined;
  const steps = REPLACEMENT_STEPS.map(([step, from, to]) => {
    const seconds = preemptedPaths.flatMap((p) => stepSeconds(p, from, to) ?? []);
    return { step, p50S: round2(percentile(seconds, 50)), p99S: round2(percentile(seconds, 99)) };
  });
  // The one path a tail figure cannot explain: where its time went, step by step.
  const took = (p: (typeof preemptedPaths)[number]) => (p.provisionScheduledMs === undefined ? -Infinity : p.provisionScheduledMs - p.preemptedMs);
  const worst = preemptedPaths.reduce<(typeof preemptedPaths)[number] | undefined>((w, p) => (took(p) > (w ? took(w) : -Infinity) ? p : w), undefined);
  const slowest = worst && {
    released: worst.released!,
    seconds: round2(took(worst) / 1000)!,
    steps: Object.fromEntries(
      REPLACEMENT_STEPS.flatMap(([step, from, to]) => {
        const seconds = stepSeconds(worst, from, to);
        return seconds === undefined ? [] : [[step, round2(seconds)!]];
      }),
    ),
  };
  return { paths: preemptedPaths.length, steps, ...(slowest ? { slowest } : {}) };
}

/** The preempted resource whose replacement took longest to be scheduled, with each step's seconds. */
export interface SlowestPath {
  released: string;
  seconds: number;
  steps: Record<string, number>;
}

// --- cloud API calls -------------------------------------------------------------------

export interface ApiFigures {
  calls: number;
  reads: number;
  writes: number;
  rateLimited: number;
  errors: number;
  /** Per method: calls and 403s. */
  methods: Record<string, MethodUsage>;
  elapsedSeconds: number;
}

/** One project's calls, optionally minus an earlier reading of the same counters. */
export function apiFigures(view: ApiUsageView, project: string, before?: ApiUsageView): ApiFigures {
  const now = view.projects.find((p) => p.project === project)?.methods ?? {};
  const then = before?.projects.find((p) => p.project === project)?.methods ?? {};
  const figures: ApiFigures = { calls: 0, reads: 0, writes: 0, rateLimited: 0, errors: 0, methods: {}, elapsedSeconds: view.elapsedSeconds - (before?.elapsedSeconds ?? 0) };
  for (const [method, usage] of Object.entries(now)) {
    const prior = then[method] ?? { calls: 0, rateLimited: 0, errors: 0 };
    const delta = { calls: usage.calls - prior.calls, rateLimited: usage.rateLimited - prior.rateLimited, errors: usage.errors - prior.errors };
    if (delta.calls === 0) continue;
    figures.methods[method] = delta;
    figures.calls += delta.calls;
    figures.rateLimited += delta.rateLimited;
    figures.errors += delta.errors;
    if (WRITE_METHODS.has(method)) figures.writes += delta.calls;
    else figures.reads += delta.calls;
  }
  return figures;
}

/** The most runs alive at one moment: each run from its start to its close (or `untilMs` if still open). */
export function peakOverlap(spans: readonly { fromMs: number; toMs?: number }[], untilMs: number): number {
  // Ends sort before starts at the same instant, so back-to-back runs do not count as overlapping.
  const edges = spans.flatMap((s) => [
    { at: s.fromMs, delta: 1 },
    { at: s.toMs ?? untilMs, delta: -1 },
  ]);
  edges.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let alive = 0;
  let peak = 0;
  for (const e of edges) peak = Math.max(peak, (alive += e.delta));
  return peak;
}
