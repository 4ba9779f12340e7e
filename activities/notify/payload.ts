/**
 * What a webhook receives: the event as JSON, or a Slack-compatible message (`text`, the
 * incoming-webhook format Slack, Mattermost and Rocket.Chat accept) with the event kept
 * under `sterna` for anything that reads it. Pure.
 */
import { type NotifyEvent, WebhookFormat } from '../../workflows/api';

export type DeliveredEvent = NotifyEvent & { url?: string };

/** The run's page in the Temporal web UI (the default: the local dev server's). */
export function uiLink(base: string | undefined, namespace: string, workflowId: string): string {
  return `${(base ?? 'http://localhost:8233').replace(/\/+$/, '')}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}

export function payloadFor(format: WebhookFormat, event: DeliveredEvent): unknown {
  return format === WebhookFormat.Slack ? { text: slackText(event), sterna: event } : event;
}

const SAID: Record<NotifyEvent['kind'], (e: DeliveredEvent) => string> = {
  started: () => 'started',
  preempted: (e) => `was preempted in ${e.zone ?? '?'} (${e.count} so far); resuming from its last checkpoint`,
  restarted: (e) => `failed (${e.failure?.message ?? 'unknown'}) and restarted (restart ${e.count})`,
  'budget-80': (e) => `has spent ${usd(e.costUsd)} of its ${usd(e.budgetUsd)} budget (80%)`,
  'budget-100': (e) => `has spent its ${usd(e.budgetUsd)} budget`,
  'deadline-at-risk': (e) => `may miss its deadline ${e.deadline}: ${hours(e.estimate?.remainingWorkSeconds)} of work left, ${hours(e.estimate?.secondsToDeadline)} to go`,
  completed: (e) => `completed for ${usd(e.costUsd)}`,
  failed: (e) => `failed${e.failure?.type ? ` with ${e.failure.type}` : ''}: ${e.failure?.message ?? ''}`,
  reaped: (e) => `had ${e.resource?.name} deleted by the reaper (${e.resource?.reason}: ${e.resource?.detail})`,
};

function slackText(e: DeliveredEvent): string {
  const run = e.url ? `<${e.url}|${e.name ?? e.runId}>` : (e.name ?? e.runId);
  return `Sterna run ${run}${e.team ? ` (team ${e.team})` : ''} ${SAID[e.kind](e)}`;
}

function usd(n: number | undefined): string {
  return n === undefined ? '?' : `$${n.toFixed(2)}`;
}

function hours(seconds: number | undefined): string {
  return seconds === undefined ? '?' : `${(seconds / 3600).toFixed(1)} h`;
}
