/**
 * Starts and stops Sterna's own Temporal server (temporal-server/, built by
 * config/temporal-server.ts): a current server on SQLite with Sterna's search attributes
 * in every namespace, optionally with Temporal's JWT authorization switched on. One
 * launcher for `npm run server`, the demo, the benchmarks and the test suite, so all of
 * them run the server the same way. Its flags follow `temporal server start-dev`.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { Connection } from '@temporalio/client';
import { searchAttributeFlags, sternaSearchAttributes } from '../workflows/search-attributes';
import { spawnGuarded, stopGuard, stopProcessGroup } from './process-guard';
import { freePort } from './ports';
import { ensureTemporalServer } from './temporal-server';

export class TemporalServerExited extends Error {
  constructor(
    readonly address: string,
    readonly code: number | null,
  ) {
    super(`sterna-temporal-server exited with code ${code} before answering at ${address} (is the port taken? its log says why)`);
    this.name = 'TemporalServerExited';
  }
}

export interface JwtAuthorization {
  /** Where the server fetches the keys that sign tokens (a JSON Web Key Set). */
  jwksUrl: string;
  /** The claim listing permissions such as `team-a:write`; `permissions` by default. */
  permissionsClaim?: string;
  /** A token with `temporal-system:admin`, used only to tell when the server is ready. */
  adminToken: string;
}

export interface TemporalServerOptions {
  /** gRPC frontend port; any free one when omitted. */
  port?: number;
  /** Web UI port; the frontend port + 1000 when omitted. */
  uiPort?: number;
  headless?: boolean;
  /** Namespaces to create besides `default`. */
  namespaces?: string[];
  /** SQLite file that keeps workflows across restarts; in memory when omitted. */
  dbFile?: string;
  /** The server's own output goes here; discarded when omitted. */
  logFile?: string;
  /** Server dynamic config, as `--dynamic-config-value KEY=JSON`. */
  dynamicConfig?: Record<string, string | number | boolean>;
  /** Switches on Temporal's JWT authorization (default claim mapper and authorizer). */
  jwt?: JwtAuthorization;
  uiCodecEndpoint?: string;
  /** How long a cold, busy 2-core machine may take to answer; 60 s by default. */
  readyTimeoutMs?: number;
}

export interface TemporalServer {
  address: string;
  /** `default`, where runs start unless told otherwise. */
  namespace: string;
  namespaces: string[];
  uiUrl?: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * Starts the server. Without a given port it takes a free one, which another process may
 * take before the server binds it (the server picks further ports of its own too), so a
 * server that exits before answering is started again on a fresh port, a few times.
 */
export async function startTemporalServer(options: TemporalServerOptions = {}, attempts = 3): Promise<TemporalServer> {
  const binary = await ensureTemporalServer();
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort(0));
    if (port === undefined) throw new Error('no free port for the Temporal server');
    try {
      return await startOn(binary, port, options);
    } catch (err) {
      if (options.port !== undefined || !(err instanceof TemporalServerExited) || attempt >= attempts) throw err;
    }
  }
}

async function startOn(binary: string, port: number, options: TemporalServerOptions): Promise<TemporalServer> {
  const address = `127.0.0.1:${port}`;
  const namespaces = ['default', ...(options.namespaces ?? []).filter((ns) => ns !== 'default')];
  const args = ['--ip', '127.0.0.1', '--port', String(port), '--log-level', 'warn', ...searchAttributeFlags()];
  for (const ns of namespaces.slice(1)) args.push('--namespace', ns);
  for (const [key, value] of Object.entries(options.dynamicConfig ?? {})) args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  const uiPort = options.uiPort ?? port + 1000;
  if (options.headless) args.push('--headless');
  else args.push('--ui-port', String(uiPort));
  if (options.uiCodecEndpoint && !options.headless) args.push('--ui-codec-endpoint', options.uiCodecEndpoint);
  if (options.dbFile) {
    mkdirSync(dirname(options.dbFile), { recursive: true });
    args.push('--db-filename', options.dbFile);
  }
  if (options.jwt) {
    args.push('--jwks-url', options.jwt.jwksUrl);
    if (options.jwt.permissionsClaim) args.push('--jwt-permissions-claim', options.jwt.permissionsClaim);
  }
  // The server dies with its launcher, even one killed without running its cleanup.
  const { child, exited, guard } = spawnGuarded(binary, args, options.logFile);
  try {
    await waitUntilReady(address, namespaces, child, options.jwt?.adminToken, options.readyTimeoutMs ?? 60_000);
  } catch (err) {
    stopGuard(guard);
    await stopProcessGroup(child, exited, 10_000);
    throw err;
  }
  return {
    address,
    namespace: namespaces[0],
    namespaces,
    uiUrl: options.headless ? undefined : `http://127.0.0.1:${uiPort}`,
    pid: child.pid!,
    stop: () => {
      stopGuard(guard);
      return stopProcessGroup(child, exited, 10_000);
    },
  };
}

/** Ready means every namespace answers and has Sterna's search attributes. */
async function waitUntilReady(address: string, namespaces: string[], child: ChildProcess, apiKey: string | undefined, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new TemporalServerExited(address, child.exitCode);
    try {
      // tls: false, since an API key alone would make the client ask for TLS, which this server does not serve.
      const connection = await Connection.connect({ address, connectTimeout: 2_000, apiKey, tls: false });
      try {
        let ready = true;
        for (const namespace of namespaces) {
          const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
          ready &&= sternaSearchAttributes.every((key) => customAttributes && key.name in customAttributes);
        }
        if (ready) return;
      } finally {
        await connection.close();
      }
    } catch (err) {
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`Temporal server at ${address} not ready after ${timeoutMs} ms: ${String(lastError)}`);
}
