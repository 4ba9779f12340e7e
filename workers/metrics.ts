/**
 * The worker's Prometheus endpoint: `GET /metrics` on the configured port serves Sterna's
 * metrics (activities/metrics/registry.ts) followed by the Temporal SDK's own runtime
 * metrics, which the SDK's exporter serves on a loopback port of its own
 * (`Runtime.install({ telemetryOptions: { metrics: { prometheus: { bindAddress } } } })`):
 * one scrape target per worker.
 */
import { createServer, type Server } from 'node:http';
import type { Client } from '@temporalio/client';
import { Runtime } from '@temporalio/worker';
import { feedFromVisibility, type SternaMetrics } from '../activities/metrics';
import type { MetricsConfig } from '../config/worker-config';

/**
 * Installs the SDK runtime with its Prometheus exporter on `127.0.0.1:<sdkPort>`. Must run
 * before the first connection or worker is created (the runtime is process-wide).
 */
export function installSdkMetrics(config: MetricsConfig): void {
  Runtime.install({ telemetryOptions: { metrics: { prometheus: { bindAddress: `127.0.0.1:${config.sdkPort}` } } } });
}

export interface MetricsServer {
  /** e.g. http://0.0.0.0:9464/metrics */
  url: string;
  port: number;
  close(): Promise<void>;
}

export interface MetricsServerOptions {
  metrics: SternaMetrics;
  host: string;
  port: number;
  /** The SDK exporter's port on loopback, merged into /metrics when set. */
  sdkPort?: number;
  /** Runs by phase, cost and GPU per run come from visibility when given. */
  client?: Client;
  /** The runs' namespaces when they are not `client`'s (one per team namespace). */
  runClients?: Client[];
}

/** The SDK exporter's exposition text on loopback `port`, or '' while it is not up. */
export async function sdkText(port: number): Promise<string> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5000) });
    return res.ok ? await res.text() : '';
  } catch {
    // The SDK's exporter is not up (yet): Sterna's own metrics still go out.
    return '';
  }
}

export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const refresh = options.client ? feedFromVisibility(options.metrics, { client: options.client, runClients: options.runClients }) : async () => undefined;
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('metrics are at GET /metrics\n');
      return;
    }
    void (async () => {
      await refresh();
      const [own, sdk] = await Promise.all([options.metrics.text(), options.sdkPort === undefined ? '' : sdkText(options.sdkPort)]);
      res.writeHead(200, { 'Content-Type': options.metrics.registry.contentType }).end(sdk ? `${own.trimEnd()}\n${sdk}` : own);
    })().catch((err: Error) => res.writeHead(500, { 'Content-Type': 'text/plain' }).end(`${err.message}\n`));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://${options.host}:${port}/metrics`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
