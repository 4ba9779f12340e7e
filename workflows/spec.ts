/**
 * The run spec: the trainingRun workflow's single input, plain JSON so that
 * `temporal workflow start --input-file run.json` works. One schema, used by the client,
 * the CLI and the workflow itself; a bad spec fails before any resource exists, with
 * every bad field named.
 */
import { z } from 'zod';
import { isDurationString, parseDurationSeconds } from './duration';
import { failure, FailureType } from './failures';

const Duration = z
  .union([z.number().positive(), z.string().refine(isDurationString, 'expected a duration like "90s", "30m", "1h30m" or "2d"')])
  .transform(parseDurationSeconds);

const StorageUri = z.string().regex(/^(gs:\/\/[a-z0-9][-_.a-z0-9]*[a-z0-9](\/.*)?|file:\/\/\/.+)$/, 'expected gs://bucket/path or file:///absolute/path');

const RelativePath = z
  .string()
  .min(1)
  .refine((p) => !p.startsWith('/') && !p.split('/').includes('..'), 'must be a relative path without ".."');

// GCE label rules: keys start with a lowercase letter; keys and values are at most 63
// characters of lowercase letters, digits, '_' and '-'.
const LabelKey = z.string().regex(/^[a-z][a-z0-9_-]{0,62}$/, 'label keys: lowercase letter first, then [a-z0-9_-], 63 chars max');
const LabelValue = z.string().regex(/^[a-z0-9_-]{0,63}$/, 'label values: [a-z0-9_-], 63 chars max');

const AllowDeny = z.strictObject({ allow: z.array(z.string().min(1)).optional(), deny: z.array(z.string().min(1)).optional() });

export const PricingMode = { Spot: 'spot', OnDemand: 'on-demand', Auto: 'auto' } as const;
export type PricingMode = (typeof PricingMode)[keyof typeof PricingMode];

export const RunSpecSchema = z
  .strictObject({
    /** A short human name, shown in the UI; the run id is the workflow id. */
    name: z.string().max(80).optional(),
    backend: z.enum(['gce', 'gke']).default('gce'),
    /** Container image (GKE, or a container VM); the command runs on the host otherwise. */
    image: z.string().min(1).optional(),
    command: z.array(z.string()).min(1, 'give the training command as an argv list, e.g. ["python", "train.py"]'),
    env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'environment names: letters, digits, _'), z.string()).default({}),
    datasets: z.array(z.strictObject({ uri: StorageUri, path: RelativePath })).default([]),
    checkpoint: z.strictObject({ uri: StorageUri, interval: Duration.default(600) }),
    resources: z.strictObject({
      accelerators: z
        .array(z.strictObject({ type: z.string().regex(/^nvidia-[a-z0-9-]+$/, 'a GCE accelerator type such as nvidia-l4'), count: z.int().min(1).max(16) }))
        .min(1, 'list at least one acceptable accelerator, e.g. [{ "type": "nvidia-l4", "count": 1 }]'),
      machineType: z.string().regex(/^[a-z][-a-z0-9]*$/).optional(),
      diskSizeGb: z.int().min(10).max(65536).default(100),
    }),
    placement: z.strictObject({ regions: AllowDeny.optional(), zones: AllowDeny.optional() }).default({}),
    pricing: z
      .strictObject({
        mode: z.enum([PricingMode.Spot, PricingMode.OnDemand, PricingMode.Auto]).default(PricingMode.Auto),
        maxPricePerHour: z.number().positive().optional(),
        budgetUsd: z.number().positive().optional(),
      })
      .default({ mode: PricingMode.Auto }),
    time: z
      .strictObject({
        /** Absolute deadline (ISO 8601). */
        deadline: z.iso.datetime({ offset: true }).optional(),
        /** Deadline relative to the run's start, for specs kept in files. */
        deadlineAfter: Duration.optional(),
        /** Stop the run after this long, whatever its state. */
        maxRunDuration: Duration.optional(),
        /** Accelerator time the job needs uninterrupted; drives the deadline-aware `auto` mode. */
        expectedDuration: Duration.optional(),
      })
      .default({}),
    recovery: z
      .strictObject({
        maxPreemptions: z.int().min(0).default(20),
        maxRestartsOnError: z.int().min(0).default(2),
        noRetryExitCodes: z.array(z.int().min(1).max(255)).default([]),
        /** A zone that preempted or stocked out this run is not retried before this passes. */
        zoneCooldown: Duration.default(1800),
        /** How often the agent reports progress, in seconds. */
        pollSeconds: z.number().min(0.2).max(60).default(5),
      })
      .default({ maxPreemptions: 20, maxRestartsOnError: 2, noRetryExitCodes: [], zoneCooldown: 1800, pollSeconds: 5 }),
    labels: z.record(LabelKey, LabelValue).default({}),
  })
  .superRefine((spec, ctx) => {
    if (spec.time.deadline && spec.time.deadlineAfter !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['time', 'deadlineAfter'], message: 'give either time.deadline or time.deadlineAfter, not both' });
    }
    if (spec.pricing.mode === PricingMode.Auto && spec.time.expectedDuration === undefined && (spec.time.deadline || spec.time.deadlineAfter)) {
      ctx.addIssue({ code: 'custom', path: ['time', 'expectedDuration'], message: 'auto pricing with a deadline needs time.expectedDuration to know when spot is too risky' });
    }
    for (const key of ['sterna-run', 'sterna-attempt']) {
      if (key in spec.labels) ctx.addIssue({ code: 'custom', path: ['labels', key], message: `${key} is set by Sterna` });
    }
  });

/** The spec as the user writes it (defaults optional). */
export type RunSpecInput = z.input<typeof RunSpecSchema>;
/** The spec after validation: defaults filled, durations in seconds. */
export type RunSpec = z.output<typeof RunSpecSchema>;

export interface SpecProblem {
  path: string;
  message: string;
}

export type SpecCheck = { ok: true; spec: RunSpec } | { ok: false; problems: SpecProblem[] };

export function checkSpec(input: unknown): SpecCheck {
  const result = RunSpecSchema.safeParse(input);
  if (result.success) return { ok: true, spec: result.data };
  const problems = result.error.issues.map((issue) => ({ path: issue.path.map(String).join('.') || '(spec)', message: issue.message }));
  return { ok: false, problems };
}

export function describeProblems(problems: SpecProblem[]): string {
  return `invalid run spec: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`;
}

/** Validates or throws the non-retryable `InvalidSpec` failure naming every bad field. */
export function parseSpec(input: unknown): RunSpec {
  const check = checkSpec(input);
  if (!check.ok) throw failure(FailureType.InvalidSpec, describeProblems(check.problems), { problems: check.problems });
  return check.spec;
}
