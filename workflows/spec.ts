/**
 * The run spec: the trainingRun workflow's single input, plain JSON so that
 * `temporal workflow start --input-file run.json` works. One schema, used by the client,
 * the CLI and the workflow itself; a bad spec fails before any resource exists, with
 * every bad field named.
 *
 * Everything the schema accepts must be safe to carry all the way down: every string is
 * printable text, every number and time is bounded so that no date arithmetic can
 * overflow, storage URIs cannot climb out of their bucket, labels are valid on GCE and
 * Kubernetes alike, and argv/env fit what GCE metadata and Linux exec accept.
 */
import { z } from 'zod';
import { formatDuration, isDurationString, MAX_DURATION_SECONDS, parseDurationSeconds } from './duration';
import { failure, FailureType } from './failures';
import { labelProblems } from './labels';
import { notifySpecSchema } from './run/notify-spec';
import { looksSecret, parseSecretRef, SECRET_BACKEND, SECRET_REF_RULE } from './secrets';
import { MAX_OBJECT_BYTES, relativePathProblem, storageUriProblem } from './storage-uri';
import { forbiddenCharacter, utf8Length } from './text';
import { MAX_SHARED_CLIENTS, SharingStrategy, sliceProblems } from './gpu-slices';

/** Backends that create, watch and release a gang (resources.nodes > 1) as one. */
const GANG_BACKENDS: readonly string[] = ['gce', 'gke'];

/**
 * The building block for every string in a spec: printable text only. Every schema here is
 * built by a function, never held at module level (see `runSpecSchema`).
 */
function text() {
  return z.string().check((ctx) => {
    const bad = forbiddenCharacter(ctx.value);
    if (bad) ctx.issues.push({ code: 'custom', input: ctx.value, message: `contains ${bad.description} at index ${bad.index}; spec strings must be printable text` });
  });
}

/** A text() that `problem` (a rule of its own module) accepts. */
function textWhere(problem: (value: string) => string | undefined) {
  return text().check((ctx) => {
    const message = problem(ctx.value);
    if (message) ctx.issues.push({ code: 'custom', input: ctx.value, message });
  });
}

/** Where a dataset lands, relative to the work directory. */
const relativePath = () => textWhere(relativePathProblem).min(1).max(1024);

/** The run appends `/<run key (<= 63)>/step-<N>.<ext>` to the checkpoint prefix. */
const CHECKPOINT_SUFFIX_BYTES = 128;

// --- durations and times -----------------------------------------------------------

const DURATION_HINT = 'expected a duration: a number of seconds, or a string like "90s", "30m", "1h30m" or "2d"';

/** A duration in seconds within [min, max]; max defaults to MAX_DURATION_SECONDS (366 days). */
function duration(bounds: { min: number; minExclusive?: boolean; max?: number }) {
  const max = bounds.max ?? MAX_DURATION_SECONDS;
  const range = `${bounds.minExclusive ? 'more than' : 'at least'} ${formatDuration(bounds.min)} and at most ${formatDuration(max)}`;
  return z.union([z.number(), z.string().max(40)], { error: DURATION_HINT }).transform((value, ctx) => {
    if (typeof value === 'string' && !isDurationString(value)) {
      ctx.addIssue({ code: 'custom', message: DURATION_HINT });
      return z.NEVER;
    }
    const seconds = parseDurationSeconds(value);
    const aboveMin = bounds.minExclusive ? seconds > bounds.min : seconds >= bounds.min;
    if (!(aboveMin && seconds <= max)) {
      ctx.addIssue({ code: 'custom', message: `must be ${range}, got ${typeof value === 'string' ? JSON.stringify(value) : String(value)}` });
      return z.NEVER;
    }
    return seconds;
  });
}

/**
 * Absolute deadlines must fall in this window. Any real run's deadline does, and every
 * time in it is a valid Date whose sums with a bounded duration are valid Dates too.
 * (`deadlineProblem` adds the check against now, which a pure schema cannot make.)
 */
export const DEADLINE_EARLIEST = '2000-01-01T00:00:00Z';
export const DEADLINE_LATEST = '2100-01-01T00:00:00Z';

const deadlineSchema = () =>
  text()
    .pipe(z.iso.datetime({ offset: true, error: 'expected an ISO 8601 time with a time zone, e.g. "2030-01-31T18:00:00Z"' }))
    .refine(
      (iso) => Date.parse(iso) >= Date.parse(DEADLINE_EARLIEST) && Date.parse(iso) < Date.parse(DEADLINE_LATEST),
      `must be between ${DEADLINE_EARLIEST} and ${DEADLINE_LATEST}`,
    );

/**
 * Why `deadline` cannot be a run's deadline at `nowMs`, or undefined: it must parse,
 * lie ahead, and be at most 366 days away (so timers up to it stay sane). For a fresh
 * spec and for the setDeadline update; not for a continued run, whose deadline may
 * rightly have passed.
 */
export function deadlineProblem(deadline: unknown, nowMs: number): string | undefined {
  const check = deadlineSchema().safeParse(deadline);
  if (!check.success) return check.error.issues[0].message;
  const at = Date.parse(check.data);
  if (at <= nowMs) return `${check.data} is not in the future`;
  if (at > nowMs + MAX_DURATION_SECONDS * 1000) return `${check.data} is more than ${formatDuration(MAX_DURATION_SECONDS)} away`;
  return undefined;
}

// --- agent inputs ----------------------------------------------------------------------

/**
 * Bytes a list takes as the agent receives it: a count line, then each item's UTF-8
 * base64-encoded on its own line (activities/agent/script.ts `encodeList`).
 */
export function encodedListBytes(items: readonly string[]): number {
  return items.reduce((sum, item) => sum + 4 * Math.ceil(utf8Length(item) / 3) + 1, `${items.length}\n`.length);
}

/**
 * The most each encoded list (argv, env, datasets) may take: 96 KiB. On GKE each list is
 * one environment variable of the agent, and Linux refuses any single argv or environment
 * string over MAX_ARG_STRLEN = 128 KiB at exec; 32 KiB stay spare (for the variable's name
 * and what Sterna adds, such as STERNA_CHECKPOINT_INTERVAL). On GCE each list is one
 * metadata value (at most 256 KB) and all metadata must stay under 512 KB: three lists
 * (at most 295 KB) plus the ~8 KB agent script leave some 200 KB. Decoded, the trainer
 * gets at most 72 KiB of argv and 72 KiB of environment, far below ARG_MAX (2 MiB).
 */
export const MAX_ENCODED_LIST_BYTES = 96 * 1024;

function fitsAgent(items: readonly string[], what: string, ctx: z.RefinementCtx, limit = MAX_ENCODED_LIST_BYTES): void {
  const bytes = encodedListBytes(items);
  if (bytes > limit) {
    ctx.addIssue({
      code: 'custom',
      message: `${what} takes ${bytes} bytes as sent to the VM, more than the ${limit} allowed (GCE metadata and Linux exec limits); put large inputs in a file and stage it with datasets`,
    });
  }
}

/**
 * Setup: at most 32 commands of at most 4096 characters, and 32 KiB as sent to the VM. A
 * longer setup belongs in a script in the working directory (["bash setup.sh"]); the bound
 * keeps all of a VM's metadata under GCE's 512 KB with the other lists at their largest.
 */
export const MAX_SETUP_COMMANDS = 32;
export const MAX_SETUP_COMMAND_LENGTH = 4096;
export const MAX_SETUP_ENCODED_BYTES = 32 * 1024;

/** The trainer's environment: Sterna sets STERNA_* itself (run id, checkpoint dir...). */
const envName = () =>
  z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]{0,254}$/, 'environment names: a letter or "_", then letters, digits, "_" (255 characters at most)')
    .refine((name) => !name.startsWith('STERNA_'), 'names starting with STERNA_ are set by Sterna');

// --- the working directory ---------------------------------------------------------------

/** Said when a spec's workdir is still a local path where a started run needs the uploaded object. */
export const LOCAL_WORKDIR_PROBLEM =
  'is a local directory: it is packed and uploaded when the run is started with `sterna start` (or the client\'s startTrainingRun), which give the run {"uri", "sha256"} instead; `temporal workflow start` cannot upload it';

/**
 * The packed working directory as a started run sees it (client/workdir packs and uploads
 * it; the agent checks the sha256 and unpacks it on every attempt). A spec in a file may
 * name a local directory instead: the CLI and the client replace it with this before
 * the run starts, so the workflow never sees a path of the starting machine.
 */
const workdirRef = () =>
  z.strictObject(
    {
      uri: textWhere((uri) => storageUriProblem(uri) ?? (uri.endsWith('.tar.gz') ? undefined : 'the packed working directory is a .tar.gz object')),
      sha256: z.string().regex(/^[0-9a-f]{64}$/, 'the sha256 of the packed working directory: 64 lowercase hex digits'),
    },
    { error: (issue) => (issue.code !== 'invalid_type' ? undefined : typeof issue.input === 'string' ? LOCAL_WORKDIR_PROBLEM : 'expected {"uri": "gs://…/workdirs/<sha256>.tar.gz", "sha256": "<64 hex digits>"}') },
  );

// --- the spec --------------------------------------------------------------------------

/** Each secret is one environment variable of the trainer; a run needing more is unusual. */
export const MAX_SECRETS = 100;

const zoneOrRegion = () => text().regex(/^[a-z][-a-z0-9]{0,62}$/, 'a GCE zone or region name such as us-central1-a or us-central1');
const allowDeny = () => z.strictObject({ allow: z.array(zoneOrRegion()).max(256).optional(), deny: z.array(zoneOrRegion()).max(256).optional() });

/** Ten million USD: far above any run, far below what makes cost arithmetic lose precision. */
export const MAX_BUDGET_USD = 10_000_000;

export const IdleAction = { Stop: 'stop', Flag: 'flag' } as const;
export type IdleAction = (typeof IdleAction)[keyof typeof IdleAction];

export const PricingMode = { Spot: 'spot', OnDemand: 'on-demand', FlexStart: 'flex-start', Auto: 'auto' } as const;
export type PricingMode = (typeof PricingMode)[keyof typeof PricingMode];

/**
 * How long a failed attempt's VM may be kept for inspection: at least a minute (the time
 * to hear of it and reach it), at most a week (it bills all the while).
 */
export const KEEP_ON_FAILURE_BOUNDS = { min: 60, max: 7 * 24 * 3600 } as const;

/** A spec's own labels with keepOnFailure: one fewer than otherwise, for the `sterna-keep-until` label. */
const KEEP_ON_FAILURE_MAX_LABELS = 59;

/** GCE's bounds on how long a flex-start request waits for capacity (`requestValidForDuration`). */
export const FLEX_START_WAIT_BOUNDS = { min: 90, max: 2 * 3600 } as const;

/**
 * The schema is built on first use and kept out of the module's exports. The worker shares
 * this module between all cached workflows (workers/bundle.ts) and deep-freezes what it
 * exports, and zod writes to its schemas while parsing; a schema per workflow instead
 * would cost about 2 MB per cached run (measured).
 */
let built: ReturnType<typeof buildRunSpecSchema> | undefined;
export function runSpecSchema() {
  return (built ??= buildRunSpecSchema());
}

const buildRunSpecSchema = () =>
  z
    .strictObject({
      /** A short human name, shown in the UI; the run id is the workflow id. */
      name: text().max(80).optional(),
      backend: z.enum(['gce', 'gke']).default('gce'),
      /**
       * Container image. On GKE the Job's image (the agent runs in it); on GCE the agent runs
       * setup and the command inside it with the VM's container runtime (docker, else podman),
       * the work directory, datasets and checkpoints mounted and the VM's GPUs passed. Absent:
       * on GCE they run on the VM itself.
       */
      image: text().min(1).max(512).regex(/^\S+$/, 'an image reference has no spaces').optional(),
      /**
       * Shell commands run once on each VM (or pod) before the command, in order, in the
       * working directory (inside `image` when one is given), with the command's environment
       * and secrets: e.g. ["pip install -r requirements.txt"]. Each is one line, run by bash
       * where the machine has it, else sh; the first that fails ends the run with SetupFailed
       * (no retry: the same commands fail the same way on any VM).
       */
      setup: z
        .array(text().min(1, 'a setup command cannot be empty').max(MAX_SETUP_COMMAND_LENGTH))
        .max(MAX_SETUP_COMMANDS, `at most ${MAX_SETUP_COMMANDS} setup commands; put a longer setup in a script in the working directory, e.g. ["bash setup.sh"]`)
        .superRefine((commands, ctx) => fitsAgent(commands, 'setup', ctx, MAX_SETUP_ENCODED_BYTES))
        .optional(),
      command: z
        .array(text())
        .min(1, 'give the training command as an argv list, e.g. ["python", "train.py"]')
        .refine((argv) => argv.length === 0 || argv[0] !== '', { message: 'the program to run (command[0]) cannot be empty', path: [0] })
        .superRefine((argv, ctx) => fitsAgent(argv, 'command', ctx)),
      /** Non-secret settings: stored in workflow history and in the VM's metadata (see `secrets`). */
      env: z
        .record(envName(), text())
        .superRefine((env, ctx) => fitsAgent(Object.entries(env).map(([k, v]) => `${k}=${v}`), 'env', ctx))
        .default({}),
      /**
       * Secrets for the trainer's environment, by reference (workflows/secrets.ts): the
       * value is fetched inside the VM or pod and never passes through Sterna.
       */
      secrets: z
        .record(envName(), textWhere((ref) => (parseSecretRef(ref) ? undefined : SECRET_REF_RULE)).max(1024))
        .refine((secrets) => Object.keys(secrets).length <= MAX_SECRETS, `at most ${MAX_SECRETS} secrets`)
        .superRefine((secrets, ctx) => fitsAgent(Object.entries(secrets).flat(), 'secrets', ctx))
        .default({}),
      /** At most 1000: more files belong under one prefix, staged as one. */
      datasets: z
        .array(
          z.strictObject({
            uri: textWhere((uri) => storageUriProblem(uri)),
            path: relativePath(),
            /** Where the bucket lives (a GCS region or multi-region): placement weighs moving it (workflows/data-cost.ts). */
            location: text().regex(/^([a-z]+-[a-z]+[0-9]+|US|EU|ASIA|us|eu|asia)$/, 'a GCS location: a region such as asia-southeast1, or US, EU, ASIA').optional(),
            /** Its size, for the egress and staging estimate before the agent has measured it. */
            sizeGb: z.number().min(0).max(1_000_000).optional(),
          }),
        )
        .max(1000)
        .superRefine((datasets, ctx) => fitsAgent(datasets.flatMap((d) => [d.uri, d.path]), 'datasets', ctx))
        .default([]),
      /** Where the command runs: a local directory packed and uploaded at start (workdirRef). Datasets land in it at their paths. */
      workdir: workdirRef().optional(),
      checkpoint: z.strictObject({
        uri: textWhere((uri) => storageUriProblem(uri, MAX_OBJECT_BYTES - CHECKPOINT_SUFFIX_BYTES)),
        /** Pins the interval; without it the run chooses per zone (workflows/run/checkpoint-interval.ts). */
        interval: duration({ min: 1 }).optional(),
        /** The chosen interval's cap (default 30 min). */
        maxInterval: duration({ min: 1 }).optional(),
        /** The chosen interval's floor (default 1 min): lower it only where a checkpoint is cheap to write and store. */
        minInterval: duration({ min: 1 }).optional(),
      }),
      resources: z.strictObject({
        accelerators: z
          .array(
            z.strictObject({
              type: text().regex(/^nvidia-[a-z0-9-]{1,56}$/, 'a GCE accelerator type such as nvidia-l4'),
              count: z.int().min(1).max(16),
              /** GKE only: a multi-instance GPU partition (MIG profile) such as 1g.10gb, instead of the whole GPU. */
              partition: text().regex(/^[1-7]g\.[0-9]{1,3}gb$/, 'a MIG profile such as 1g.10gb or 3g.40gb').optional(),
              /** GKE only: a GPU time-shared with other pods (GKE's gpu-sharing-strategy). */
              sharing: z.enum([SharingStrategy.TimeSharing]).optional(),
              /** With sharing: only pools whose GPUs are shared by exactly this many pods; any time-shared pool when absent. */
              maxSharedClients: z.int().min(MAX_SHARED_CLIENTS.min).max(MAX_SHARED_CLIENTS.max).optional(),
            }),
          )
          .min(1, 'list at least one acceptable accelerator, e.g. [{ "type": "nvidia-l4", "count": 1 }]')
          .max(32),
        machineType: text().regex(/^[a-z][-a-z0-9]{0,62}$/, 'a GCE machine type such as g2-standard-8').optional(),
        diskSizeGb: z.int().min(10).max(65536).default(100),
        /**
         * A gang: this many VMs (or pods) at once, in one zone, all or nothing (workflows/run/gang.ts).
         * Prices (pricing.maxPricePerHour, the budget, the ledger) count every node.
         */
        nodes: z.int().min(1).max(64).default(1),
      }),
      placement: z
        .strictObject({
          regions: allowDeny().optional(),
          zones: allowDeny().optional(),
          /**
           * A storage prefix per region, "{region}" standing for the attempt's region
           * (gs://my-cache-{region}/sterna): datasets staged once in a region are kept there
           * and reused by the run's later attempts in that region.
           */
          dataCache: textWhere((uri) => (uri.includes('{region}') ? storageUriProblem(uri.replace(/\{region\}/g, 'us-central1')) : 'must contain {region}, e.g. gs://my-cache-{region}/sterna'))
            .max(512)
            .optional(),
          /** Overrides of the data-transfer table (workflows/data-cost.ts DEFAULT_DATA_TRANSFER). */
          dataTransfer: z
            .strictObject({
              sameContinentUsdPerGb: z.number().min(0).max(10).optional(),
              otherContinentUsdPerGb: z.number().min(0).max(10).optional(),
              farContinentUsdPerGb: z.number().min(0).max(10).optional(),
              sameRegionMBps: z.number().positive().max(100_000).optional(),
              sameContinentMBps: z.number().positive().max(100_000).optional(),
              otherContinentMBps: z.number().positive().max(100_000).optional(),
            })
            .optional(),
        })
        .default({}),
      pricing: z
        .strictObject({
          mode: z.enum([PricingMode.Spot, PricingMode.OnDemand, PricingMode.FlexStart, PricingMode.Auto]).default(PricingMode.Auto),
          /**
           * Flex-start (DWS): how long a request may wait for capacity. With mode
           * `flex-start` it is the only model used (defaults apply when omitted); with
           * `auto`, giving it adds flex-start as a tier between spot and on-demand.
           */
          flexStart: z.strictObject({ maxWait: duration({ min: FLEX_START_WAIT_BOUNDS.min, max: FLEX_START_WAIT_BOUNDS.max }).default(FLEX_START_WAIT_BOUNDS.max) }).optional(),
          /** USD per hour; the largest GPU VMs cost about $100/h on demand. */
          maxPricePerHour: z.number().positive().max(10_000).optional(),
          /** USD; bounded so budget arithmetic stays in ordinary floating-point range. */
          budgetUsd: z.number().positive().max(MAX_BUDGET_USD).optional(),
        })
        .default({ mode: PricingMode.Auto }),
      time: z
        .strictObject({
          /** Absolute deadline (ISO 8601). */
          deadline: deadlineSchema().optional(),
          /** Deadline relative to the run's start, for specs kept in files. */
          deadlineAfter: duration({ min: 0, minExclusive: true }).optional(),
          /** Stop the run after this long, whatever its state. */
          maxRunDuration: duration({ min: 0, minExclusive: true }).optional(),
          /** Accelerator time the job needs uninterrupted; drives the deadline-aware `auto` mode. */
          expectedDuration: duration({ min: 0, minExclusive: true }).optional(),
          /**
           * How fast each accelerator trains this job, relative to the others (any unit, one
           * per accelerator): `sterna plan` scales expectedDuration, which is on the first
           * accelerator listed, by it. Without it, datasheet peak throughput (plan/throughput.ts).
           */
          relativeThroughput: z.record(z.string().max(64), z.number().positive().max(1e6)).optional(),
        })
        .default({}),
      recovery: z
        .strictObject({
          maxPreemptions: z.int().min(0).max(1000).default(20),
          maxRestartsOnError: z.int().min(0).max(100).default(2),
          noRetryExitCodes: z.array(z.int().min(1).max(255)).max(255).default([]),
          /** A zone that preempted or stocked out this run is not retried before this passes. */
          zoneCooldown: duration({ min: 0 }).default(1800),
          /** How often the agent reports progress, in seconds. */
          pollSeconds: z.number().min(0.2).max(60).default(5),
          /**
           * Keep the VM of an attempt whose training or agent failed the run, for this long,
           * so it can be inspected (run/keep.ts); absent: released like every other attempt.
           */
          keepOnFailure: duration(KEEP_ON_FAILURE_BOUNDS).optional(),
        })
        .default({ maxPreemptions: 20, maxRestartsOnError: 2, noRetryExitCodes: [], zoneCooldown: 1800, pollSeconds: 5 }),
      /**
       * Urgency in the team's queue and on the task queue, as Temporal's priority keys:
       * 1 first … 5 last; 3 when absent. The team is the namespace the run executes in
       * (workflows/teams, docs/tenancy.md); `labels.team`, if given, must name it.
       */
      priority: z.int().min(1, 'priority: 1 (most urgent) to 5 (least); 3 when absent').max(5, 'priority: 1 (most urgent) to 5 (least); 3 when absent').optional(),
      /** What the run watches while it trains (workflows/run/gpu-util.ts, workflows/run/progress.ts). */
      monitoring: z
        .strictObject({
          /** The steps the trainer will run, when the spec knows them: progress shows percent and ETA (the trainer may report it too). */
          totalSteps: z.int().min(1).max(1e12).optional(),
          /** Percent: a run whose GPUs stay below it for `idleWindow` is stopped or flagged (`idleAction`). */
          minGpuUtilisation: z.number().gt(0, 'a utilisation in percent above 0, e.g. 10').max(100).optional(),
          /** How long the GPUs must stay below `minGpuUtilisation` while training. */
          idleWindow: duration({ min: 1 }).default(600),
          /** stop: end the run with GpuIdle (checkpoints stay); flag: say so in the status, timeline and metrics, and go on. */
          idleAction: z.enum([IdleAction.Stop, IdleAction.Flag]).default(IdleAction.Stop),
        })
        .default({ idleWindow: 600, idleAction: IdleAction.Stop }),
      /** Webhooks told about this run (workflows/run/notify*.ts); the team's come from the worker. */
      notify: notifySpecSchema().optional(),
      labels: z
        .record(z.string(), z.string())
        .superRefine((labels, ctx) => {
          for (const { key, message } of labelProblems(labels, { userLabels: true })) ctx.addIssue({ code: 'custom', path: key === undefined ? [] : [key], message });
        })
        .default({}),
    })
    .superRefine((spec, ctx) => {
      for (const [name, ref] of Object.entries(spec.secrets)) {
        if (Object.hasOwn(spec.env, name)) ctx.addIssue({ code: 'custom', path: ['secrets', name], message: `${name} is also in env; give it in one place` });
        const parsed = parseSecretRef(ref);
        if (parsed && SECRET_BACKEND[parsed.scheme] !== spec.backend) {
          ctx.addIssue({ code: 'custom', path: ['secrets', name], message: `a ${parsed.scheme}:// reference resolves on backend ${SECRET_BACKEND[parsed.scheme]}, and this run's backend is ${spec.backend}` });
        }
      }
      if (spec.recovery.keepOnFailure !== undefined && spec.backend !== 'gce') {
        // A GKE attempt is its agent's pod: it exits with the command, so nothing is left running to reach.
        ctx.addIssue({
          code: 'custom',
          path: ['recovery', 'keepOnFailure'],
          message: `keeping a failed attempt is for backend gce only: on ${spec.backend} the attempt's pod exits with its command and leaves nothing running to reach; read what it printed with \`sterna logs RUN --attempt N\` (and its Job with kubectl for an hour after it ends), or drop recovery.keepOnFailure`,
        });
      }
      if (spec.recovery.keepOnFailure !== undefined && Object.keys(spec.labels).length > KEEP_ON_FAILURE_MAX_LABELS) {
        // GCE allows 64 labels: a gang's node carries four of Sterna's, and a kept one its sterna-keep-until too.
        ctx.addIssue({ code: 'custom', path: ['labels'], message: `with recovery.keepOnFailure at most ${KEEP_ON_FAILURE_MAX_LABELS} labels (a kept VM also carries sterna-keep-until, and GCE allows 64 in all); drop ${Object.keys(spec.labels).length - KEEP_ON_FAILURE_MAX_LABELS}` });
      }
      if (spec.time.deadline && spec.time.deadlineAfter !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['time', 'deadlineAfter'], message: 'give either time.deadline or time.deadlineAfter, not both' });
      }
      const throughput = spec.time.relativeThroughput;
      if (throughput) {
        for (const { type } of spec.resources.accelerators) {
          if (throughput[type] === undefined) ctx.addIssue({ code: 'custom', path: ['time', 'relativeThroughput'], message: `give a figure for every accelerator the run may use; ${type} has none` });
        }
      }
      if (spec.pricing.flexStart && spec.pricing.mode !== PricingMode.FlexStart && spec.pricing.mode !== PricingMode.Auto) {
        ctx.addIssue({ code: 'custom', path: ['pricing', 'flexStart'], message: `flex-start settings apply to pricing.mode "flex-start" or "auto", not "${spec.pricing.mode}"` });
      }
      spec.resources.accelerators.forEach((entry, i) => {
        for (const { field, message } of sliceProblems(entry, spec.backend)) ctx.addIssue({ code: 'custom', path: ['resources', 'accelerators', i, field], message });
      });
      if (spec.resources.nodes > 1 && !GANG_BACKENDS.includes(spec.backend)) {
        // Until each backend creates, watches and releases a gang as one, a run of N nodes would silently get one.
        ctx.addIssue({ code: 'custom', path: ['resources', 'nodes'], message: `gang runs (nodes > 1) are not supported yet on backend ${spec.backend}; use nodes: 1` });
      }
      if (spec.resources.nodes > 1 && spec.resources.accelerators.some((a) => a.partition !== undefined || a.sharing !== undefined)) {
        ctx.addIssue({ code: 'custom', path: ['resources', 'nodes'], message: 'a gang runs on whole GPUs; drop partition/sharing, or use nodes: 1' });
      }
      if (spec.resources.nodes > 1 && spec.backend === 'gce' && (spec.pricing.mode === PricingMode.FlexStart || spec.pricing.flexStart)) {
        // Each GCE node's flex-start request would wait for capacity on its own: no all-or-nothing start.
        ctx.addIssue({ code: 'custom', path: ['resources', 'nodes'], message: 'gang runs (nodes > 1) on GCE cannot use flex-start yet; use pricing.mode spot, on-demand or auto without pricing.flexStart' });
      }
      if (spec.pricing.mode === PricingMode.Auto && spec.time.expectedDuration === undefined && (spec.time.deadline || spec.time.deadlineAfter)) {
        ctx.addIssue({ code: 'custom', path: ['time', 'expectedDuration'], message: 'auto pricing with a deadline needs time.expectedDuration to know when spot is too risky' });
      }
    });

/** The spec as the user writes it (defaults optional). */
export type RunSpecInput = z.input<ReturnType<typeof runSpecSchema>>;
/** The spec after validation: defaults filled, durations in seconds. */
export type RunSpec = z.output<ReturnType<typeof runSpecSchema>>;

export interface SpecProblem {
  path: string;
  message: string;
}

export type SpecCheck = { ok: true; spec: RunSpec } | { ok: false; problems: SpecProblem[] };

export interface CheckOptions {
  /**
   * The time a fresh run starts at: also require time.deadline to lie ahead and within
   * 366 days. Leave out when re-reading a continued run's spec.
   */
  nowMs?: number;
}

/** A path for messages: dots between segments, anything unprintable in a key escaped. */
function pathText(path: readonly PropertyKey[]): string {
  const segment = (p: PropertyKey) => {
    const text = String(p);
    return forbiddenCharacter(text) ? JSON.stringify(text).slice(1, -1) : text;
  };
  return path.map(segment).join('.') || '(spec)';
}

/** Zod reports a bad record key as "Invalid key in record"; the reasons are nested. */
function problemsOf(issues: readonly z.core.$ZodIssue[], parent: readonly PropertyKey[] = []): SpecProblem[] {
  return issues.flatMap((issue) => {
    const path = [...parent, ...issue.path];
    if (issue.code === 'invalid_key') return problemsOf(issue.issues, path);
    return [{ path: pathText(path), message: issue.message }];
  });
}

export function checkSpec(input: unknown, options: CheckOptions = {}): SpecCheck {
  const result = runSpecSchema().safeParse(input);
  if (!result.success) return { ok: false, problems: problemsOf(result.error.issues) };
  const deadline = result.data.time.deadline;
  const late = deadline !== undefined && options.nowMs !== undefined ? deadlineProblem(deadline, options.nowMs) : undefined;
  if (late) return { ok: false, problems: [{ path: 'time.deadline', message: late }] };
  return { ok: true, spec: result.data };
}

/**
 * What is valid but probably a mistake: an env entry whose name looks like a secret
 * (its value is stored in workflow history and in the VM's metadata, in the clear for
 * anyone with `compute.instances.get`). Shown by `sterna validate` / `sterna start`, and
 * recorded in the run's timeline (so `sterna status` and the web UI show it too).
 */
export function specWarnings(spec: RunSpec): SpecProblem[] {
  return Object.keys(spec.env)
    .filter(looksSecret)
    .map((name) => ({
      path: `env.${name}`,
      message: `looks like a secret, but env values are stored in workflow history and in the VM's metadata; pass it as secrets: { "${name}": "${spec.backend === 'gke' ? 'k8s://SECRET/KEY' : 'gcp-secret-manager://projects/P/secrets/S/versions/V'}" } instead`,
    }));
}

export function describeProblems(problems: SpecProblem[]): string {
  return `invalid run spec: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`;
}

/** Validates or throws the non-retryable `InvalidSpec` failure naming every bad field. */
export function parseSpec(input: unknown, options: CheckOptions = {}): RunSpec {
  const check = checkSpec(input, options);
  if (!check.ok) throw failure(FailureType.InvalidSpec, describeProblems(check.problems), { problems: check.problems });
  return check.spec;
}
