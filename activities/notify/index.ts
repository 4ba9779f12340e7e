/**
 * The notification activities (workflows/run/notify-contract.ts): POST one event to each
 * webhook of the run and of its team, with `Idempotency-Key: <runId>/<kind>/<n>`.
 *
 *   activities: { ...createNotifyActivities({ teams, uiBaseUrl, client }) }
 *
 * At least once: a webhook is done once it answered 2xx; which ones are done is kept in
 * the activity's heartbeat, so a retry (a timeout, a worker that died mid-request) posts
 * only to the rest, and a request whose answer was lost is posted again with the same key.
 * A 4xx other than 408/429, or a ref the worker cannot resolve, is a refusal: reported,
 * not retried. Resolved URLs are never logged, returned or put in an error.
 */
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { startedSpecInput } from '../../client/run-input';
import { type DeliveryReport, type NotifyActivities, type NotifyEvent, notifyKey, NotifyKind, type ReapedNotice, type TeamWebhooks, webhookEnvName, type WebhookTarget } from '../../workflows/api';
import { payloadFor, uiLink } from './payload';
import { RunLocator, type NamespaceClients } from '../namespaces';

/** One request's limit: a webhook slower than this is tried again later. */
const REQUEST_TIMEOUT_MS = 10_000;

export interface NotifyOptions {
  /** Per-team webhooks (STERNA_NOTIFY_TEAMS). */
  teams?: TeamWebhooks;
  /** The web UI the event links to (STERNA_NOTIFY_UI_URL). */
  uiBaseUrl?: string;
  /** Where `env://` refs are read (the worker's environment). */
  env?: NodeJS.ProcessEnv;
  /** For the reaped notice: reads the run's spec from its start. */
  client?: Client;
  /**
   * The team namespaces (activities/namespaces.ts): a run's team is its namespace, whatever
   * its event says, and a reaped resource's run is looked for in every team namespace.
   */
  namespaces?: NamespaceClients;
}

interface Destination {
  /** How errors name it: never the URL of a ref or a team webhook. */
  label: string;
  target: WebhookTarget;
}

export function createNotifyActivities(options: NotifyOptions = {}): NotifyActivities {
  const env = options.env ?? process.env;

  const locator = options.namespaces ? new RunLocator(options.namespaces) : undefined;

  async function deliver(event: NotifyEvent, webhooks: readonly WebhookTarget[], runNamespace?: string): Promise<DeliveryReport> {
    const context = Context.current();
    const destinations: Destination[] = [
      ...webhooks.map((target, i) => ({ label: target.ref ? `run webhook ${i + 1} (${target.ref})` : `run webhook ${i + 1} (${originOf(target.url!)})`, target })),
      ...(event.team ? (options.teams?.[event.team] ?? []) : []).map((target, i) => ({ label: `team ${event.team} webhook ${i + 1}${target.ref ? ` (${target.ref})` : ''}`, target })),
    ];
    const url = uiLink(options.uiBaseUrl, runNamespace ?? context.info.namespace, event.runId);
    const done = new Set<number>((context.info.heartbeatDetails as number[] | undefined) ?? []);
    const beat = () => context.heartbeat([...done]);
    const timer = setInterval(beat, 2000);
    const report: DeliveryReport = { delivered: 0, skipped: 0, failed: [] };
    const retryable: string[] = [];
    try {
      for (const [i, { label, target }] of destinations.entries()) {
        if (target.on && !target.on.includes(event.kind)) {
          report.skipped++;
          continue;
        }
        if (done.has(i)) {
          report.delivered++;
          continue;
        }
        const address = resolve(target, env);
        if ('problem' in address) {
          report.failed.push({ target: label, problem: address.problem });
          continue;
        }
        const outcome = await post(address.url, event.key, payloadFor(target.format, { ...event, url }), context.cancellationSignal);
        if (outcome === 'ok') {
          done.add(i);
          beat();
          report.delivered++;
        } else if (outcome.retry) retryable.push(`${label}: ${outcome.problem}`);
        else report.failed.push({ target: label, problem: outcome.problem });
      }
    } finally {
      clearInterval(timer);
    }
    // The ones done stay done (heartbeat); the retry posts to the rest.
    if (retryable.length > 0) throw new Error(`notification ${event.key} not delivered yet: ${retryable.join('; ')}`);
    return report;
  }

  return {
    async deliverNotification({ event, webhooks }) {
      // The team whose webhooks hear of a run is the namespace it runs in (in every tenancy
      // mode: where one namespace serves everything, it is the one team), not what its event says.
      const team = options.namespaces ? options.namespaces.callerTeam('deliverNotification') : Context.current().info.namespace;
      return deliver({ ...event, team }, webhooks);
    },

    async notifyReaped(notice: ReapedNotice) {
      const located = locator ? await locator.locate(notice.workflowId) : undefined;
      const client = located === undefined ? options.client : typeof located === 'object' ? located.client : undefined;
      const runNamespace = typeof located === 'object' ? located.namespace : undefined;
      const found = client ? await runOf(client, notice.workflowId) : undefined;
      // Its team is the namespace it runs in: where it was found, or the one namespace there is.
      const team = found ? (runNamespace ?? client?.options.namespace) : undefined;
      const event: NotifyEvent = {
        key: notifyKey(notice.workflowId, NotifyKind.Reaped, notice.resource.name),
        kind: NotifyKind.Reaped,
        runId: notice.workflowId,
        ...(found?.name ? { name: found.name } : {}),
        ...(team ? { team } : {}),
        phase: (found?.status ?? 'unknown').toLowerCase() as NotifyEvent['phase'],
        at: notice.at,
        zone: notice.resource.zone,
        costUsd: 0,
        resource: notice.resource,
      };
      return deliver(event, found?.webhooks ?? [], runNamespace);
    },
  };
}

function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'an invalid URL';
  }
}

function resolve(target: WebhookTarget, env: NodeJS.ProcessEnv): { url: string } | { problem: string } {
  if (target.url) return { url: target.url };
  const name = webhookEnvName(target.ref ?? '');
  const value = name ? env[name] : undefined;
  if (!name || !value) return { problem: `the worker has no ${name ?? 'valid'} environment variable; set it to the webhook URL on every worker` };
  if (!/^https?:\/\/\S+$/.test(value)) return { problem: `the worker's ${name} is not an http(s) URL` };
  return { url: value };
}

type PostOutcome = 'ok' | { retry: boolean; problem: string };

async function post(url: string, key: string, body: unknown, cancelled: AbortSignal): Promise<PostOutcome> {
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'user-agent': 'sterna-notify/1' },
      body: JSON.stringify(body),
      signal: AbortSignal.any([AbortSignal.timeout(REQUEST_TIMEOUT_MS), cancelled]),
      redirect: 'error',
    });
    await response.arrayBuffer().catch(() => undefined);
    if (response.ok) return 'ok';
    const retry = response.status >= 500 || response.status === 408 || response.status === 429;
    return { retry, problem: `answered HTTP ${response.status}` };
  } catch (err) {
    // fetch's errors name the URL only in `cause`; the message is enough to act on.
    const name = (err as Error)?.name === 'TimeoutError' ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` : `unreachable (${(err as Error)?.message ?? 'error'})`;
    return { retry: true, problem: name };
  }
}

/**
 * Who to tell about a reaped resource's run: the webhooks of the spec it started with (the
 * first event of its latest execution, a fresh spec or a continued run carrying it). Its
 * team is its namespace, the caller's to say. Nothing when the run is unknown.
 */
async function runOf(client: Client, workflowId: string): Promise<{ status: string; name?: string; webhooks: WebhookTarget[] } | undefined> {
  try {
    const { description, specInput } = await startedSpecInput(client, workflowId);
    const spec = specInput as { name?: string; notify?: { webhooks?: WebhookTarget[] } } | undefined;
    return { status: description.status.name, name: spec?.name, webhooks: spec?.notify?.webhooks ?? [] };
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}
