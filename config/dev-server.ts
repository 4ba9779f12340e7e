/**
 * Starts and stops the embedded Temporal dev server (`temporal server start-dev`).
 * One launcher for `npm run server`, the demo and the test suite, so all three run the
 * server the same way, with Sterna's search attributes registered.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { Connection } from '@temporalio/client';
import { searchAttributeFlags, sternaSearchAttributes } from '../workflows/search-attributes';
import { spawnGuarded, stopGuard, stopProcessGroup } from './process-guard';
import { ensureTemporalCli } from './temporal-cli';
import { freePort } from './ports';

/** The server process ended before it answered: most often a port taken between our probe and its bind. */
export class DevServerExited extends Error {
  constructor(readonly address: string, readonly code: number | null) {
    super(`temporal server start-dev exited with code ${code} before answering (is port ${address} taken?)`);
    this.name = 'DevServerExited';
  }
}

export interface DevServerOptions {
  /** gRPC frontend port; 7233 by default. */
  port?: number;
  /** Web UI port; omitted together with `headless`. 8233 by default. */
  uiPort?: number;
  headless?: boolean;
  /** SQLite file that keeps workflows across restarts; in memory when omitted. */
  dbFile?: string;
  /** The server's own output goes here (it is noisy); discarded when omitted. */
  logFile?: string;
  namespace?: string;
  /** How long a cold 2-core machine may take to answer; 60 s by default. */
  readyTimeoutMs?: number;
  /** The codec server the web UI decodes payloads with (config/codec-server.ts). */
  uiCodecEndpoint?: string;
  /** Server dynamic config (`--dynamic-config-value KEY=JSON`), e.g. the test suite's timer precision. */
  dynamicConfig?: Record<string, string | number | boolean>;
}

export interface DevServer {
  address: string;
  namespace: string;
  uiUrl?: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * A headless-or-not server on any free port. The port is free when probed but may be taken
 * before the server binds it (and the server picks further random ports of its own), so a
 * server that exits before answering is started again on a fresh port, a few times.
 */
export async function startDevServerOnFreePort(options: Omit<DevServerOptions, 'port'> = {}, attempts = 3): Promise<DevServer> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort(0);
    if (port === undefined) throw new Error('no free port for the Temporal dev server');
    try {
      return await startDevServer({ ...options, port });
    } catch (err) {
      if (!(err instanceof DevServerExited) || attempt >= attempts) throw err;
    }
  }
}

export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const binary = await ensureTemporalCli();
  const port = options.port ?? 7233;
  const namespace = options.namespace ?? 'default';
  const address = `127.0.0.1:${port}`;
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--namespace', namespace];
  args.push('--log-level', 'warn', ...searchAttributeFlags());
  for (const [key, value] of Object.entries(options.dynamicConfig ?? {})) args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  if (options.headless) args.push('--headless');
  else args.push('--ui-port', String(options.uiPort ?? 8233));
  if (options.uiCodecEndpoint && !options.headless) args.push('--ui-codec-endpoint', options.uiCodecEndpoint);
  if (options.dbFile) {
    mkdirSync(dirname(options.dbFile), { recursive: true });
    args.push('--db-filename', options.dbFile);
  }
  // The server dies with its launcher, even one killed without running its cleanup.
  const { child, exited, guard } = spawnGuarded(binary, args, options.logFile);
  try {
    await waitUntilReady(address, namespace, child, options.readyTimeoutMs ?? 60_000);
  } catch (err) {
    stopGuard(guard);
    await stopProcessGroup(child, exited, 10_000);
    throw err;
  }
  return {
    address,
    namespace,
    uiUrl: options.headless ? undefined : `http://127.0.0.1:${options.uiPort ?? 8233}`,
    pid: child.pid!,
    stop: () => {
      stopGuard(guard);
      return stopProcessGroup(child, exited, 10_000);
    },
  };
}

async function waitUntilReady(address: string, namespace: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new DevServerExited(address, child.exitCode);
    try {
      const connection = await Connection.connect({ address, connectTimeout: 2_000 });
      try {
        // Ready means the namespace answers and our search attributes are registered.
        const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
        if (sternaSearchAttributes.every((key) => customAttributes && key.name in customAttributes)) return;
      } finally {
        await connection.close();
      }
    } catch (err) {
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`Temporal dev server at ${address} not ready after ${timeoutMs} ms: ${String(lastError)}`);
}
