/**
 * Where a run's notifications go: `notify.webhooks` in the spec (per run), and the
 * worker's per-team webhooks (config/worker-config.ts STERNA_NOTIFY_TEAMS) for the run's
 * team, the namespace it executes in.
 *
 * A spec's `url` is stored in workflow history in the clear, so it must carry no secret:
 * a URL with credentials, a query string, or a known secret-bearing webhook host (Slack,
 * Discord, Teams) is refused with a pointer to `ref`. A `ref` ("env://STERNA_WEBHOOK_ML")
 * names an environment variable of the worker that holds the URL: only the delivery
 * activity reads it, and neither it nor anything derived from it is returned, logged or
 * recorded. Pure; schemas are built by functions (see spec.ts runSpecSchema).
 */
import { z } from 'zod';

/** What a notification is about (which ones a run sends, and when: notify.ts). */
export const NotifyKind = {
  Started: 'started',
  Preempted: 'preempted',
  Restarted: 'restarted',
  Budget80: 'budget-80',
  Budget100: 'budget-100',
  DeadlineAtRisk: 'deadline-at-risk',
  Completed: 'completed',
  Failed: 'failed',
  Reaped: 'reaped',
} as const;
export type NotifyKind = (typeof NotifyKind)[keyof typeof NotifyKind];
export const NOTIFY_KINDS = Object.values(NotifyKind) as [NotifyKind, ...NotifyKind[]];

export const WebhookFormat = { Json: 'json', Slack: 'slack' } as const;
export type WebhookFormat = (typeof WebhookFormat)[keyof typeof WebhookFormat];

/** At most this many webhooks per run (and per team). */
export const MAX_WEBHOOKS = 10;

/** Only worker variables with this prefix can be named: a spec cannot point at other worker settings. */
export const WEBHOOK_ENV_PREFIX = 'STERNA_WEBHOOK_';
const ENV_REF = /^env:\/\/(STERNA_WEBHOOK_[A-Z0-9_]{1,100})$/;

export const WEBHOOK_REF_RULE = `a reference to a worker environment variable holding the URL, "env://${WEBHOOK_ENV_PREFIX}<NAME>" (upper case, digits, "_")`;

/** Hosts whose webhook URLs are themselves the credential. */
const SECRET_HOSTS = [/^hooks\.slack\.com$/, /(^|\.)discord(app)?\.com$/, /\.webhook\.office\.com$/, /^outlook\.office\.com$/];

/** The worker variable a ref names, or undefined if it is not a valid ref. */
export function webhookEnvName(ref: string): string | undefined {
  return ENV_REF.exec(ref)?.[1];
}

/** Why `url` may not be written in a spec in the clear, or undefined when it may. */
export function plainUrlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'expected an http(s) URL such as "https://hooks.example.com/sterna"';
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return 'expected an http(s) URL';
  const secret = parsed.username || parsed.password ? 'credentials' : parsed.search ? 'a query string' : SECRET_HOSTS.some((h) => h.test(parsed.hostname)) ? 'a secret path (this host puts the credential in the URL)' : undefined;
  if (secret) return `this URL carries ${secret}, and a url is stored in workflow history in the clear; put it in a worker environment variable and give ref: "env://${WEBHOOK_ENV_PREFIX}<NAME>" instead`;
  return undefined;
}

/** One webhook: a plain `url` or a `ref`, the payload format, and optionally which kinds it wants. */
export function webhookSchema(options: { plainUrlsMaySecret: boolean }) {
  return z
    .strictObject({
      url: z
        .string()
        .max(2048)
        .check((ctx) => {
          const problem = options.plainUrlsMaySecret ? (/^https?:\/\//.test(ctx.value) ? undefined : 'expected an http(s) URL') : plainUrlProblem(ctx.value);
          if (problem) ctx.issues.push({ code: 'custom', input: ctx.value, message: problem });
        })
        .optional(),
      ref: z.string().max(200).regex(ENV_REF, WEBHOOK_REF_RULE).optional(),
      format: z.enum([WebhookFormat.Json, WebhookFormat.Slack]).default(WebhookFormat.Json),
      /** Only these kinds (default: all). */
      on: z.array(z.enum(NOTIFY_KINDS)).min(1).max(NOTIFY_KINDS.length).optional(),
    })
    .refine((w) => (w.url === undefined) !== (w.ref === undefined), 'give exactly one of url and ref');
}

/** `notify` in the run spec. */
export function notifySpecSchema() {
  return z.strictObject({ webhooks: z.array(webhookSchema({ plainUrlsMaySecret: false })).min(1).max(MAX_WEBHOOKS) });
}

/** STERNA_NOTIFY_TEAMS: team -> webhooks. Not in history, so plain URLs may carry secrets here. */
export function teamWebhooksSchema() {
  return z.record(z.string().min(1).max(63), z.array(webhookSchema({ plainUrlsMaySecret: true })).min(1).max(MAX_WEBHOOKS));
}

export type WebhookTarget = z.output<ReturnType<typeof webhookSchema>>;
export type TeamWebhooks = z.output<ReturnType<typeof teamWebhooksSchema>>;
