/**
 * `npm run worker`: one Sterna worker on task queue `sterna` (STERNA_TASK_QUEUE),
 * connected with the standard Temporal environment (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
 * TLS and API-key variables or a profile), default the local dev server.
 */
import { existsSync, readFileSync } from 'node:fs';
import { Client } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import { NativeConnection } from '@temporalio/worker';
import { observerOptions, startObserver } from '../activities/fleet';
import { startPriceBook } from '../activities/pricing';
import { sternaDataConverter } from '../config/data-converter';
import { installReaperSchedule } from '../activities/reaper';
import { catalogPriceBook } from '../config/price-book';
import { loadWorkerConfig } from '../config/worker-config';
import { buildBillingCatalog, priceBookSettings } from './pricing';
import { buildBucketLocator, buildCheckTargets, buildDatasetChecker, buildProviders } from './providers';
import { WORKFLOW_BUNDLE } from './bundle';
import { promoteWhenPolling, versionOf } from './deployment';
import { createSternaWorker } from './worker';
import { installSdkMetrics, startMetricsServer } from './metrics';
import { sternaMetrics } from '../activities/metrics/registry';
import { logStoreSettingsFor } from '../activities/logs';

async function main(): Promise<void> {
  const config = loadWorkerConfig();
  // The workflows as `npm run build` bundled them: no bundling at start, and every worker
  // of a deployment runs the same code.
  const codePath = process.env.STERNA_WORKFLOW_BUNDLE ?? WORKFLOW_BUNDLE;
  if (!existsSync(codePath)) throw new Error(`no workflow bundle at ${codePath}: run \`npm run build\` first (or set STERNA_WORKFLOW_BUNDLE)`);
  // The SDK's runtime is process-wide: its exporter is set before the first connection.
  if (config.metrics) installSdkMetrics(config.metrics);
  const { connectionOptions, namespace } = loadClientConnectConfig();
  const connection = await NativeConnection.connect({ address: '127.0.0.1:7233', ...connectionOptions });
  const providers = await buildProviders(config, catalogPriceBook());
  // What each run's checks read before it creates anything (search attributes through this worker's own connection).
  const checks = await buildCheckTargets(config, { connect: async () => ({ operatorService: connection.operatorService, namespace: namespace ?? 'default' }) });
  const dataConverter = sternaDataConverter();
  const client = new Client({ connection, namespace: namespace ?? 'default', dataConverter });
  const version = config.versioning && versionOf(config.versioning, readFileSync(codePath));
  const observer = observerOptions({ settings: { intervalSeconds: config.observer.intervalSeconds, progressReadSeconds: config.observer.progressReadSeconds, readsPerMinute: config.observer.readsPerMinute } });
  const worker = await createSternaWorker({
    connection,
    namespace: namespace ?? 'default',
    taskQueue: config.taskQueue,
    providers,
    workflowBundle: { codePath },
    maxConcurrentActivities: config.maxConcurrentActivities,
    maxCachedWorkflows: config.maxCachedWorkflows,
    workflowThreads: config.workflowThreads,
    client,
    observer: config.observer.enabled ? observer : undefined,
    prices: { settings: priceBookSettings(config.prices), billing: buildBillingCatalog(config.prices) },
    dataConverter,
    metrics: config.metrics ? sternaMetrics() : undefined,
    notify: config.notify,
    storage: buildBucketLocator(config.storage),
    datasets: buildDatasetChecker(config.storage, config.gce?.localBucketsDir),
    version,
    logs: logStoreSettingsFor(config),
    checks: checks.targets,
  });
  const metricsServer = config.metrics ? await startMetricsServer({ metrics: sternaMetrics(), host: config.metrics.host, port: config.metrics.port, sdkPort: config.metrics.sdkPort, client }) : undefined;
  if (metricsServer) console.log(`metrics at ${metricsServer.url} (the Temporal SDK's exporter on 127.0.0.1:${config.metrics!.sdkPort})`);
  console.log(`sterna worker on task queue ${config.taskQueue} (${[config.gce && 'gce', config.gke && 'gke'].filter(Boolean).join(', ')})${version ? `, deployment ${version.deploymentName} version ${version.buildId}` : ', unversioned'}`);
  const running = worker.run();
  // Awaited below, after the version is settled and the fleet workflows are started.
  running.catch(() => undefined);
  if (version) {
    // The version exists once this worker polls; new runs reach it once it is current.
    const outcome = await promoteWhenPolling(client, version, config.versioning!.promote).catch((err: Error) => (console.error(err.message), undefined));
    const said = { promoted: 'made current', 'already-current': 'current', 'left-as-is': 'not current: new runs go to the current version (`sterna deploy promote` to change that)' } as const;
    if (outcome) console.log(`version ${version.buildId}: ${said[outcome]}`);
  }
  if (config.observer.startOnBoot) {
    // Runs start their observer when they provision; starting it here too means a worker
    // that comes back after a crash resumes watching before any run asks.
    for (const provider of Object.values(providers)) {
      if (!provider) continue;
      const { workflowId } = await startObserver(client, { taskQueue: config.taskQueue, backend: provider.backend, scope: provider.fleetScope(), options: observer, requester: 'worker' });
      console.log(`fleet observer ${workflowId}`);
    }
  }
  // A worker starting refreshes the book with its settings (and starts it if need be).
  const book = await startPriceBook(client, { taskQueue: config.taskQueue, settings: priceBookSettings(config.prices), requester: 'worker', signal: true });
  console.log(`price book ${book} (${config.prices.source}, ${config.prices.refreshSeconds > 0 ? `refreshed every ${config.prices.refreshSeconds / 3600} h` : 'scheduled refresh off'})`);
  if (config.reaper) {
    // Idempotent: every worker that starts with the setting (re)states the same Schedule.
    const { scheduleId } = await installReaperSchedule(client, { taskQueue: config.taskQueue, ...config.reaper });
    console.log(`reaper schedule ${scheduleId}: every ${config.reaper.intervalSeconds} s, grace ${config.reaper.graceSeconds} s`);
  }
  await running;
  await metricsServer?.close();
  for (const provider of Object.values(providers)) provider?.close?.();
  await checks.close();
  await connection.close();
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
