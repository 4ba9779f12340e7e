/**
 * The input of a run continued as new, and the checks that make it impossible to inject.
 *
 * Anyone allowed to start a workflow can send `{ continued: true, state: … }`. Three
 * independent guards keep such a forged state from touching anything:
 *   1. only the server can say that this execution was created by the run's own
 *      continue-as-new. It sets `continuedFromExecutionRunId` on three kinds of execution:
 *      a continue-as-new, a cron run and a retry, and the last two carry their caller's
 *      input. A cron run is told by its `cronSchedule` and a retry by `attempt > 1`, so an
 *      input is carried only when neither holds (and trainingRun refuses cron outright,
 *      since a cron chain's own continuations could not be told from its cron runs).
 *      A reset keeps the execution's started event, so it keeps the answer too;
 *   2. the spec and the state pass the same strict schemas as fresh input;
 *   3. every attempt's resource name must be the one this run and execution would have
 *      derived, and providers act only on resources labelled with this execution's owner.
 */
import { z } from 'zod';
import { failure, FailureType } from '../failures';
import { resourceName } from '../naming';
import type { ZoneEvent } from '../placement';
import type { ZoneRecord } from '../zones/memory';
import { LAST_LINE_CHARS } from './last-line';
import { AttemptOutcome, MAX_CALLER_LENGTH, Phase, TimelineKind, type Attempt, type RunAdmission, type RunState, type TimelineEvent } from './state';
import { parseSpec, type RunSpec } from '../spec';
import { ProvisioningModel, type Offer } from '../types';

/** The input of a run continued as new: the validated spec and the state so far. */
export interface ContinuedRun {
  continued: true;
  spec: RunSpec;
  state: RunState;
}

export function isContinuedRun(input: unknown): input is ContinuedRun {
  return typeof input === 'object' && input !== null && (input as { continued?: unknown }).continued === true;
}

/** Built on first use and never exported: see spec.ts `runSpecSchema`. */
let built: ReturnType<typeof buildRunStateSchema> | undefined;
function runStateSchema() {
  return (built ??= buildRunStateSchema());
}

function buildRunStateSchema() {
  const IsoTime = z.iso.datetime({ offset: true });
  const Model = z.enum(Object.values(ProvisioningModel) as [ProvisioningModel, ...ProvisioningModel[]]);
  const Backend = z.enum(['gce', 'gke']);
  const Caller = z.string().min(1).max(MAX_CALLER_LENGTH);
  const SetByShape = z.strictObject({ by: Caller, at: IsoTime });
  const Checkpoint = z.strictObject({ uri: z.string().min(1), sha256: z.string().regex(/^[0-9a-f]{64}$/), step: z.int().min(0) });

  const OfferSchema = z.strictObject({
    backend: Backend,
    zone: z.string().min(1),
    region: z.string().min(1),
    accelerator: z.string().min(1),
    acceleratorCount: z.int().min(1),
    machineType: z.string().min(1),
    provisioningModel: Model,
    pricePerHour: z.number().nonnegative(),
    onDemandPricePerHour: z.number().nonnegative(),
    quotaAvailable: z.boolean(),
    pricesAsOf: z.string().min(1).max(40).optional(),
    priceSource: z.enum(['billing', 'catalog']).optional(),
    expectedWaitSeconds: z.number().nonnegative().finite().optional(),
    nodes: z.int().min(2).max(64).optional(),
    partition: z.string().min(1).max(16).optional(),
    maxSharedClients: z.int().min(2).max(48).optional(),
  });

  const AttemptSchema = z.strictObject({
    attempt: z.int().min(1),
    ref: z.strictObject({ backend: Backend, name: z.string().min(1), zone: z.string().min(1), namespace: z.string().optional(), nodes: z.int().min(2).max(64).optional() }),
    offer: OfferSchema,
    outcome: z.enum(Object.values(AttemptOutcome) as [AttemptOutcome, ...AttemptOutcome[]]),
    startedAt: IsoTime.optional(),
    stoppedAt: IsoTime.optional(),
    resumedFromStep: z.int().min(0).optional(),
    exitCode: z.int().optional(),
    reason: z.string().optional(),
    released: z.boolean(),
    releasing: z.boolean().optional(),
    createSettled: z.boolean().optional(),
    runDurationSeconds: z.number().positive().finite().optional(),
    requestedAt: IsoTime.optional(),
    training: z.strictObject({ fromStep: z.int().min(0), fromMs: z.number().finite(), steps: z.int().min(0), seconds: z.number().nonnegative().finite() }).optional(),
    moveAskedAt: IsoTime.optional(),
    checkpointInterval: z
      .strictObject({
        seconds: z.number().positive().finite(),
        preemptionsPerHour: z.number().nonnegative().finite(),
        checkpointSeconds: z.number().nonnegative().finite(),
        frozen: z.string().max(2000).optional(),
      })
      .optional(),
  });

  // The zone memory a run read: a prior for placement only (it names no resource).
  const Count = z.number().nonnegative().finite();
  const ZoneMemorySchema = z.strictObject({
    version: z.literal(1),
    halfLifeHours: z.number().positive().finite(),
    records: z.array(
      z.strictObject({
        zone: z.string().min(1),
        accelerator: z.string().min(1),
        model: Model,
        nodes: z.int().min(2).optional(),
        region: z.string().optional(),
        asOf: z.number().finite(),
        stockouts: Count,
        preemptions: Count,
        exposureHours: Count,
        lastStockoutAt: z.number().finite().optional(),
        lastPreemptionAt: z.number().finite().optional(),
        lifetimes: z.array(z.tuple([Count, z.number().finite()])),
      }),
    ),
    counted: z.array(z.string()),
  });

  return z.strictObject({
    runId: z.string().min(1),
    namespace: z.string().min(1).max(1000).optional(),
    phase: z.enum(Object.values(Phase) as [Phase, ...Phase[]]),
    startedAt: IsoTime,
    attempts: z.array(AttemptSchema),
    zoneEvents: z.array(
      z.strictObject({ zone: z.string(), region: z.string(), provisioningModel: Model, kind: z.enum(['stockout', 'quota', 'preempted']), at: z.number().finite(), accelerator: z.string().optional() }),
    ),
    lastCheckpoint: Checkpoint.optional(),
    step: z.int().min(0).optional(),
    preemptions: z.int().min(0),
    restarts: z.int().min(0),
    budgetUsd: z.number().positive().finite().optional(),
    deadline: IsoTime.optional(),
    limitsSetBy: z.strictObject({ budget: SetByShape.optional(), deadline: SetByShape.optional() }).optional(),
    timeline: z.array(
      z.strictObject({
        at: IsoTime,
        kind: z.enum(Object.values(TimelineKind) as [TimelineKind, ...TimelineKind[]]),
        event: z.string(),
        attempt: z.int().min(1).optional(),
        zone: z.string().optional(),
        step: z.int().min(0).optional(),
        outcome: z.enum(Object.values(AttemptOutcome) as [AttemptOutcome, ...AttemptOutcome[]]).optional(),
        model: Model.optional(),
        released: z.enum(['deleted', 'absent', 'not-ours']).optional(),
        createWatch: z.enum(['landed-late', 'deadline-passed']).optional(),
        by: Caller.optional(),
      }),
    ),
    policyState: z.unknown().optional(),
    placement: z.strictObject({ offers: z.array(OfferSchema), tried: z.array(z.string()) }).optional(),
    notice: z.string().optional(),
    lastHeardAt: z.number().finite().optional(),
    observerHeardAt: z.number().finite().optional(),
    observerQuietSeconds: z.number().positive().max(86_400).optional(),
    observerAskedAt: z.number().finite().optional(),
    capacityRetryAt: z.number().finite().optional(),
    policyCheckAt: z.number().finite().optional(),
    checked: z.boolean().optional(),
    admission: z
      .strictObject({
        team: z.string().min(1).max(63).optional(),
        status: z.enum(['asked', 'queued', 'admitted']),
        askedAt: z.number().finite(),
        firstAskedAt: z.number().finite(),
        position: z.int().min(1).optional(),
        teamWebhooks: z.boolean().optional(),
        spendReportedAt: z.number().finite().optional(),
      })
      .optional(),
    prices: z
      .strictObject({
        asOf: z.string().min(1).max(40),
        source: z.enum(['billing', 'catalog']),
        warning: z.string().optional(),
        unpriced: z.array(z.string()),
        unpricedCount: z.int().min(0),
      })
      .optional(),
    zoneMemory: ZoneMemorySchema.optional(),
    dataCachedRegions: z.array(z.string().min(1)).optional(),
    staging: z
      .strictObject({
        attempt: z.int().min(1),
        stagedBytes: z.number().nonnegative().finite(),
        reusedBytes: z.number().nonnegative().finite().optional(),
        totalBytes: z.number().nonnegative().finite().optional(),
        firstAt: z.number().finite(),
        at: z.number().finite(),
      })
      .optional(),
    checkpointSeconds: z.number().nonnegative().finite().optional(),
    notify: z.strictObject({ sent: z.array(z.string()) }).optional(),
    gpu: z
      .strictObject({
        utilisation: z.number().min(0).max(100),
        memoryUsedMiB: z.number().min(0),
        memoryTotalMiB: z.number().min(0),
        gpus: z.int().min(1),
        attempt: z.int().min(1),
        atMs: z.number().finite(),
        weightedPercentSeconds: z.number().min(0).finite(),
        sampledSeconds: z.number().min(0).finite(),
        belowSinceMs: z.number().finite().optional(),
        idle: z.boolean().optional(),
      })
      .optional(),
    // Bounded as run/last-line.ts bounds it: 160 code points are at most 320 UTF-16 units.
    lastLine: z.strictObject({ attempt: z.int().min(1), text: z.string().min(1).max(2 * LAST_LINE_CHARS), atMs: z.number().finite() }).optional(),
    totalSteps: z.int().min(1).optional(),
    progressMark: z.strictObject({ attempt: z.int().min(1), step: z.int().min(0), atMs: z.number().finite() }).optional(),
    intervalCheckAt: z.number().finite().optional(),
    bucketLocations: z.record(z.string().min(1).max(222), z.strictObject({ location: z.string().min(1).max(64).optional(), problem: z.string().max(2000).optional() })).optional(),
    // Set only as a run ends (run/keep.ts), so never carried in practice: accepted as declared.
    keep: z
      .strictObject({
        attempt: z.int().min(1),
        status: z.enum(['asked', 'kept', 'not-kept']),
        untilMs: z.number().finite(),
        keptUntil: IsoTime.optional(),
        reach: z.array(z.string().max(2000)).max(64).optional(),
        problem: z.string().max(2000).optional(),
      })
      .optional(),
  });
}

export interface Execution {
  workflowId: string;
  /** The execution token of this chain (workflows/naming.ts `executionToken`). */
  execution: string;
  /** Set by the server on executions created by a continue-as-new, a cron run or a retry. */
  continuedFromExecutionRunId?: string;
  /** The execution's cron schedule, if it was started with one (inherited by every run of the chain). */
  cronSchedule?: string;
  /** 1, and more only on a retry under the start's retry policy. */
  attempt: number;
}

/**
 * Why this execution may not run at all, whatever its input: a cron chain's own
 * continue-as-new could not be told from its next cron run, so runs on a schedule are
 * Temporal Schedules, which start each run afresh.
 */
export function executionProblem(execution: Execution): string | undefined {
  if (execution.cronSchedule) {
    return `trainingRun does not run on a cron schedule (${execution.cronSchedule}): start runs on a schedule with \`temporal schedule create\` (a Temporal Schedule), which starts each run with its spec`;
  }
  return undefined;
}

/** Validates a continued input against this execution, or throws InvalidSpec saying why. */
export function acceptContinuation(input: ContinuedRun, execution: Execution): { spec: RunSpec; state: RunState } {
  const refuse = (why: string) => failure(FailureType.InvalidSpec, `continued run refused: ${why}`);
  const onlyOwn = 'a continued state is accepted only from Sterna\'s own continue-as-new; start a run with its spec alone';
  if (!execution.continuedFromExecutionRunId) throw refuse(onlyOwn);
  if (execution.cronSchedule) throw refuse(`this execution is a cron run, which carries its caller's input: ${onlyOwn}`);
  if (execution.attempt > 1) throw refuse(`this execution is retry ${execution.attempt} of a failed one, which carries its caller's input: ${onlyOwn}`);
  const spec = parseSpec(input.spec);
  const parsed = runStateSchema().safeParse(input.state);
  if (!parsed.success) {
    throw refuse(parsed.error.issues.map((i) => `state.${i.path.map(String).join('.')}: ${i.message}`).join('; '));
  }
  const state = parsed.data as RunState;
  if (state.runId !== execution.workflowId) throw refuse(`state.runId ${state.runId} is not this workflow (${execution.workflowId})`);
  state.attempts.forEach((a, i) => {
    if (a.attempt !== i + 1) throw refuse(`state.attempts.${i}.attempt is ${a.attempt}, expected ${i + 1}`);
    const expected = resourceName(execution.workflowId, execution.execution, a.attempt, a.offer.nodes ?? 1);
    if (a.ref.name !== expected) throw refuse(`state.attempts.${i}.ref.name ${a.ref.name} is not this run's resource (${expected})`);
    if (a.ref.backend !== spec.backend || a.offer.backend !== spec.backend) throw refuse(`state.attempts.${i} is on another backend than the spec`);
    if (a.ref.nodes !== undefined && a.ref.nodes !== a.offer.nodes) throw refuse(`state.attempts.${i}.ref.nodes is not its offer's`);
  });
  return { spec, state };
}

/**
 * Every state a run can hold must pass the schema: a field added to RunState and not
 * here would refuse the run's own continue-as-new. This fails to compile when they drift.
 */
type SchemaState = z.infer<ReturnType<typeof buildRunStateSchema>>;
type SchemaAttempt = SchemaState['attempts'][number];
/** Keys of A the schema B has no place for (strict objects refuse them at run time). */
type Unplaced<A, B> = Exclude<keyof A, keyof B>;
type Drift = [
  Unplaced<RunState, SchemaState>,
  Unplaced<Attempt, SchemaAttempt>,
  Unplaced<Offer, SchemaAttempt['offer']>,
  Unplaced<ZoneEvent, SchemaState['zoneEvents'][number]>,
  Unplaced<TimelineEvent, SchemaState['timeline'][number]>,
  Unplaced<RunAdmission, NonNullable<SchemaState['admission']>>,
  Unplaced<ZoneRecord, NonNullable<SchemaState['zoneMemory']>['records'][number]>,
];
export const everyRunStatePasses: RunState extends SchemaState ? (Drift extends [never, never, never, never, never, never, never] ? true : Drift) : never = true;
