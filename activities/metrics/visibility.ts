/**
 * The gauges only Temporal knows in full: runs by phase (every run of the namespace,
 * whichever worker drives it), and each open run's cost and average GPU utilisation,
 * read from the search attributes the runs keep (workflows/run/views.ts). Read at scrape
 * time, at most once per `refreshMs`, so a busy Prometheus does not load visibility.
 */
import type { Client } from '@temporalio/client';
import { Phase } from '../../workflows/api';
import type { SternaMetrics } from './registry';

export interface VisibilityGaugeOptions {
  client: Client;
  /** Where runs execute when not in `client`'s namespace (each team namespace); their counts add up. */
  runClients?: Client[];
  /** Reads at most this often (default 15 s); scrapes in between see the last reading. */
  refreshMs?: number;
  /** Open runs listed at most (their per-run gauges); default 1,000. */
  maxOpenRuns?: number;
}

export function feedFromVisibility(metrics: SternaMetrics, options: VisibilityGaugeOptions): () => Promise<void> {
  const refreshMs = options.refreshMs ?? 15_000;
  const maxOpenRuns = options.maxOpenRuns ?? 1000;
  let readAt = -Infinity;
  let reading: Promise<void> | undefined;

  const clients = options.runClients?.length ? options.runClients : [options.client];
  const read = async () => {
    const counts = await Promise.all(
      Object.values(Phase).map(async (phase) => {
        const each = await Promise.all(clients.map(async (client) => (await client.workflow.count(`WorkflowType = "trainingRun" AND SternaPhase = "${phase}"`)).count));
        return [phase, each.reduce((a, b) => a + b, 0)] as const;
      }),
    );
    for (const [phase, count] of counts) metrics.runs.set({ phase }, count);
    metrics.runCost.reset();
    metrics.runGpuMean.reset();
    let listed = 0;
    for (const client of clients) {
      for await (const run of client.workflow.list({ query: 'WorkflowType = "trainingRun" AND ExecutionStatus = "Running"' })) {
        if (listed >= maxOpenRuns) break;
        const attrs = run.searchAttributes as Record<string, unknown[] | undefined>;
        const cost = attrs.SternaCostUsd?.[0];
        const gpu = attrs.SternaGpuUtil?.[0];
        // A run's team is the namespace it runs in (in every tenancy mode), whatever its attributes say.
        if (typeof cost === 'number') metrics.runCost.set({ run: run.workflowId, team: client.options.namespace }, cost);
        if (typeof gpu === 'number') metrics.runGpuMean.set({ run: run.workflowId }, gpu);
        listed++;
      }
    }
  };

  /** Refreshes the gauges if the last reading is older than `refreshMs`; a failed read keeps the last values. */
  return async () => {
    if (Date.now() - readAt < refreshMs) return;
    reading ??= read()
      .then(() => void (readAt = Date.now()))
      .catch(() => undefined)
      .finally(() => (reading = undefined));
    await reading;
  };
}
