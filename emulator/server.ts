/**
 * The emulator's HTTP server: the GCE API under /compute/v1/, the Cloud Billing Catalog
 * under /v1/services (emulator/billing-catalog.ts), buckets' metadata under /storage/v1/
 * (emulator/storage-api.ts) and their objects (emulator/storage-objects.ts: read, and media uploads), the admin API under /emulator/v1/,
 * GCE-style JSON errors everywhere else. `startEmulator` runs it
 * in-process (tests, the demo); `emulator/main.ts` is the command line.
 *
 *   const emu = await startEmulator({ port: 0, stateDir, timeFactor: 10 });
 *   // clients: { apiEndpoint: '127.0.0.1', port: emu.port, protocol: 'http', ... }
 *   await emu.close();                  // VMs keep running, state stays on disk
 *   await emu.close({ killVms: true }); // tests: nothing left behind
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join, resolve } from 'node:path';
import { allZones, defaultCatalog, type Catalog } from '../config/catalog';
import { ADMIN_PREFIX, handleAdmin } from './admin';
import { BillingApiError, BillingCatalogService } from './billing-catalog';
import { classifyCall, type ApiCall } from './api-methods';
import { ApiUsage } from './api-usage';
import { Clock } from './clock';
import { handleCompute } from './compute-api';
import { asGceError, GceError, Reason } from './errors';
import { deadlineExceeded, faultError, Faults, serverTimeoutMs } from './faults';
import { parseJson, pathSegments, readBody, readBodyBytes, sendError, sendJson } from './http';
import { applyFieldMask, parseFieldMask } from './partial-response';
import { PROJECT_NUMBER } from './ids';
import { DEFAULT_TIMINGS, Instances, type LifecycleTimings } from './instances';
import { Operations } from './operations';
import { RateQuotas, type RateQuotaOptions } from './rate-quotas';
import { AccessTokens, handleSecretManager, SecretStore } from './secret-manager';
import { Scheduler } from './scheduler';
import { CalmSpotModel, RandomSpotModel, TraceSpotModel, type RandomSpotOptions, type SpotModel } from './spot-model';
import { StateStore } from './state-store';
import { handleStorage, STORAGE_PREFIX, type BucketSettings } from './storage-api';
import { handleObjects, handleUpload, isObjectsPath, isUploadPath, MAX_UPLOAD_BYTES } from './storage-objects';
import { checkedConfig, DEFAULT_SYNTHETIC_GUEST, SyntheticGuests, type SyntheticGuestConfig } from './synthetic-guest';
import { loadTrace, traceCatalog, type Trace } from './trace';
import type { GuestKind, InstanceRecord } from './types';

export interface EmulatorOptions {
  /** Loopback port; 0 (the default) picks a free one. */
  port?: number;
  /** Interface to listen on; loopback unless you mean otherwise. */
  host?: string;
  /** Where state, instance directories and the log live. Reusing it resumes the emulator. */
  stateDir: string;
  /** Emulated time runs this many times faster than real time (default 1). */
  timeFactor?: number;
  /** A spot availability trace (file path or parsed) to replay. */
  trace?: string | Trace;
  /** Trace tick at emulated time 0 (default 0). */
  traceStartTick?: number;
  /** Seed of the random spot model and of fault injection (default 1). */
  seed?: number;
  /** Random spot model parameters; without them spot capacity is calm (always there, no preemptions). */
  spot?: Partial<Omit<RandomSpotOptions, 'seed'>>;
  /** Lifecycle durations (emulated seconds). */
  timings?: Partial<LifecycleTimings>;
  /** Longest real time `operations.wait` holds a call (default 20 s; GCE's is about 2 minutes). */
  operationWaitSeconds?: number;
  /** The catalog to serve (default config/catalog.ts; a trace adjusts it). */
  catalog?: Catalog;
  /**
   * GCE's per-minute API rate quotas (403 rateLimitExceeded past them): on by default at
   * the emulator's defaults (see rate-quotas.ts); change limits or the window here or
   * at runtime through the admin API.
   */
  rateQuotas?: RateQuotaOptions;
  /**
   * What new VMs run. `process` (the default): their startup script, as a local process
   * group. `synthetic`, for scale work only: no process; the emulator plays the Sterna
   * agent's observable behaviour (guest attributes, checkpoints, reaction to SIGTERM).
   */
  guest?: GuestKind;
  /** Completed operations kept, oldest dropped first (default 5,000); a long benchmark reading them afterwards wants more. */
  operationsKept?: number;
  /**
   * Variables every VM's guest gets besides the emulator's own few: the host machine's
   * settings a real VM would have from its image, e.g. CONTAINERS_CONF for its podman
   * (config/podman.ts). Never the emulator's whole environment.
   */
  guestEnv?: Record<string, string>;
  /** Synthetic guests' run: steps, stepSeconds, checkpointEvery, ... (see synthetic-guest.ts). */
  synthetic?: Partial<SyntheticGuestConfig>;
  /** Real milliseconds between synthetic guest ticks (default 200). */
  syntheticTickMs?: number;
  /**
   * The local directory that stands in for GCS (gs://bucket/path = <bucketsDir>/bucket/path);
   * synthetic guests write their checkpoints there and verify the ones they resume from.
   */
  bucketsDir?: string;
  /** Buckets' locations (or unreadable buckets) the storage API serves, by name; more through the admin API. */
  buckets?: Record<string, BucketSettings>;
  /**
   * The GPUS_ALL_REGIONS limit of every project the admin API has not set: 0 by default, as
   * on a new GCP project, where no GPU VM can start until the user requests more. The demo
   * and the test helpers set a non-zero default explicitly.
   */
  gpusAllRegions?: number;
  /** Log sink; by default lines go to <stateDir>/emulator.log. */
  log?: (line: string) => void;
}

export interface EmulatorHandle {
  /** http://127.0.0.1:<port> */
  endpoint: string;
  host: string;
  port: number;
  stateDir: string;
  timeFactor: number;
  /** The catalog being served (with a trace's zones, if any). */
  catalog: Catalog;
  spotModel: SpotModel['kind'];
  guest: GuestKind;
  /**
   * Stops serving and persists the state. VMs keep running (they outlive the emulator,
   * as real VMs do) unless `killVms`, which SIGKILLs every guest and marks it TERMINATED.
   */
  close(options?: { killVms?: boolean }): Promise<void>;
}

const LOCK_FILE = 'emulator.lock';
/** Real milliseconds over which state changes are gathered into one write. */
const PERSIST_DELAY_MS = 20;
/** Writes are spaced by at least this many times the last write's duration. */
const PERSIST_COST_FACTOR = 10;
const openStateDirs = new Set<string>();

function takeLock(stateDir: string): void {
  const file = join(stateDir, LOCK_FILE);
  if (openStateDirs.has(stateDir)) throw new Error(`an emulator in this process already uses ${stateDir}`);
  if (existsSync(file)) {
    const pid = Number(readFileSync(file, 'utf8').trim());
    let alive = false;
    if (pid > 0 && pid !== process.pid) {
      try {
        process.kill(pid, 0);
        alive = true;
      } catch {
        alive = false;
      }
    }
    if (alive) throw new Error(`state dir ${stateDir} is in use by the emulator with pid ${pid}`);
  }
  writeFileSync(file, String(process.pid));
  openStateDirs.add(stateDir);
}

function releaseLock(stateDir: string): void {
  openStateDirs.delete(stateDir);
  rmSync(join(stateDir, LOCK_FILE), { force: true });
}

function chooseSpotModel(options: EmulatorOptions, trace: Trace | undefined, state: ReturnType<StateStore['load']>, clock: Clock, catalog: Catalog): SpotModel {
  if (trace) return new TraceSpotModel(trace, state, clock, options.traceStartTick ?? 0);
  const spot = options.spot ?? {};
  const random = (spot.meanUpHours !== undefined && Number.isFinite(spot.meanUpHours)) || (spot.preemptionsPerHour ?? 0) > 0;
  if (!random) return new CalmSpotModel();
  return new RandomSpotModel(
    { seed: options.seed ?? 1, meanUpHours: spot.meanUpHours ?? Infinity, meanDownHours: spot.meanDownHours ?? 1, preemptionsPerHour: spot.preemptionsPerHour ?? 0, stepSeconds: spot.stepSeconds },
    state,
    clock,
    allZones(catalog).map((z) => z.name),
  );
}

export async function startEmulator(options: EmulatorOptions): Promise<EmulatorHandle> {
  const stateDir = resolve(options.stateDir);
  mkdirSync(stateDir, { recursive: true });
  takeLock(stateDir);
  try {
    return await start(options, stateDir);
  } catch (err) {
    releaseLock(stateDir);
    throw err;
  }
}

async function start(options: EmulatorOptions, stateDir: string): Promise<EmulatorHandle> {
  const logFile = join(stateDir, 'emulator.log');
  const log = options.log ?? ((line: string) => appendFileSync(logFile, `${new Date().toISOString()} ${line}\n`));
  const clock = new Clock(options.timeFactor ?? 1);
  const trace = typeof options.trace === 'string' ? loadTrace(options.trace, options.catalog ?? defaultCatalog) : options.trace;
  // A copy: the Billing Catalog's admin API changes its rates at runtime (emulator/billing-catalog.ts).
  const catalog = structuredClone(trace ? traceCatalog(trace, options.catalog ?? defaultCatalog) : (options.catalog ?? defaultCatalog));
  const store = new StateStore(stateDir);
  const state = store.load(clock.now());
  if (options.buckets) state.buckets = { ...state.buckets, ...options.buckets };
  // Changes are coalesced into one atomic write per PERSIST_DELAY_MS (a busy fleet writes
  // guest attributes many times a second), and a large state (thousands of VMs) is written
  // at most once per PERSIST_COST_FACTOR times its last write's duration, so writing never
  // takes more than a small share of the emulator's time. close() flushes what is pending.
  let pendingWrite: NodeJS.Timeout | undefined;
  let lastWrite = { endedAt: 0, tookMs: 0 };
  const flush = () => {
    if (pendingWrite) clearTimeout(pendingWrite);
    pendingWrite = undefined;
    const started = performance.now();
    store.save(state);
    lastWrite = { endedAt: performance.now(), tookMs: performance.now() - started };
  };
  const persist = () => {
    if (pendingWrite) return;
    const spacing = Math.max(PERSIST_DELAY_MS, lastWrite.tookMs * PERSIST_COST_FACTOR);
    const delay = Math.max(PERSIST_DELAY_MS, lastWrite.endedAt + spacing - performance.now());
    pendingWrite = setTimeout(flush, delay);
    pendingWrite.unref();
  };
  const scheduler = new Scheduler((err) => log(`timer failed: ${(err as Error)?.stack ?? String(err)}`));
  const operations = new Operations(state, persist, options.operationsKept);
  const spotModel = chooseSpotModel(options, trace, state, clock, catalog);
  const syntheticConfig = checkedConfig({ ...DEFAULT_SYNTHETIC_GUEST, ...options.synthetic });
  // The synthetic guests and the instances call each other: the guests report through these.
  const guestEvents = { changed: (_: InstanceRecord) => undefined as void, exited: (_: InstanceRecord) => undefined as void };
  const synthetic = new SyntheticGuests(
    { clock, tickMs: options.syntheticTickMs, bucketsDir: options.bucketsDir, changed: (i) => guestEvents.changed(i), exited: (i) => guestEvents.exited(i), log },
    syntheticConfig,
  );
  const tokens = new AccessTokens();
  const secrets = new SecretStore();
  let endpoint = '';
  // VMs reach Secret Manager here, through the override gcloud itself honours.
  const guestEnv = () => ({ ...options.guestEnv, CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER: `${endpoint}/` });
  const projectQuotas = { gpusAllRegions: options.gpusAllRegions ?? 0 };
  const instances = new Instances({ state, persist, persistNow: flush, catalog, clock, operations, scheduler, spotModel, timings: { ...DEFAULT_TIMINGS, ...options.timings }, stateDir, log, guest: options.guest ?? 'process', synthetic, tokens, guestEnv, projectQuotas });
  guestEvents.changed = (i) => instances.guestChanged(i);
  guestEvents.exited = (i) => instances.guestExited(i);
  const faults = new Faults(options.seed ?? 1);
  const rateQuotas = new RateQuotas(options.rateQuotas);
  const apiUsage = new ApiUsage(clock.now());
  const operationWaitMs = (options.operationWaitSeconds ?? 20) * 1000;
  const computeCtx = { state, catalog, instances, operations, operationWaitMs, projectQuotas, persist };
  const billingCatalog = new BillingCatalogService(catalog, () => clock.now(), () => instances.reprice());
  const adminCtx = { state, catalog, clock, instances, faults, spotModel, rateQuotas, apiUsage, synthetic, persist, billingCatalog, secrets, bucketsDir: options.bucketsDir, projectQuotas };
  const secretCtx = { store: secrets, tokens, projectNumber: PROJECT_NUMBER, findInstance: (project: string, zone: string, name: string) => instances.find(project, zone, name) };

  const pendingHangs = new Set<() => void>();
  const hang = (ms: number) =>
    new Promise<void>((resolveHang) => {
      const done = () => {
        clearTimeout(timer);
        pendingHangs.delete(done);
        resolveHang();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      pendingHangs.add(done);
    });

  /** A GCE API call: counted by project and method, held to the rate quotas, then faults, then served. */
  const serveCompute = async (req: IncomingMessage, res: ServerResponse, method: string, pathname: string, query: URLSearchParams) => {
    let project = '-';
    let call: ApiCall | undefined;
    let status = 500;
    let rateLimited = false;
    try {
      const segments = pathSegments(pathname).slice(2);
      if (segments[0] === 'projects' && segments[1]) project = segments[1];
      call = classifyCall(method, segments, catalog);
      const refused = call ? rateQuotas.admit(call, clock.now()) : undefined;
      if (refused) {
        rateLimited = true;
        throw refused;
      }
      const fault = faults.pick(method, pathname);
      if (fault) {
        // A request held past its own server deadline is failed, never carried out later.
        const deadline = serverTimeoutMs(req.headers['x-server-timeout']);
        if (fault.hangMs && deadline !== undefined && fault.hangMs > deadline) {
          await hang(deadline);
          req.resume();
          status = 504;
          return sendError(res, deadlineExceeded());
        }
        if (fault.hangMs) await hang(fault.hangMs);
        if (fault.status) {
          req.resume();
          status = fault.status;
          return sendError(res, faultError(fault.status));
        }
      }
      const text = await readBody(req);
      const body = method === 'POST' || method === 'PUT' || method === 'PATCH' ? parseJson(text) : undefined;
      const mask = query.get('fields') ?? req.headers['x-goog-fieldmask'];
      const selection = typeof mask === 'string' ? parseFieldMask(mask) : undefined;
      const result = await handleCompute(computeCtx, { method, segments, query, body });
      status = result.status;
      const ok = result.status >= 200 && result.status < 300;
      return sendJson(res, result.status, selection && ok ? applyFieldMask(result.body, selection) : result.body);
    } catch (err) {
      status = asGceError(err).status;
      throw err;
    } finally {
      apiUsage.record(project, call?.method, { status, rateLimited });
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const method = req.method ?? 'GET';
    // The raw path, not URL's: `new URL` would resolve "..", "." and "%2e%2e" segments away.
    const rawUrl = req.url ?? '/';
    const queryAt = rawUrl.indexOf('?');
    const pathname = queryAt >= 0 ? rawUrl.slice(0, queryAt) : rawUrl;
    let query: URLSearchParams;
    try {
      query = new URLSearchParams(queryAt >= 0 ? rawUrl.slice(queryAt + 1) : '');
    } catch {
      throw new GceError(400, Reason.Invalid, 'Malformed query string');
    }
    if (!pathname.startsWith('/')) throw new GceError(400, Reason.Invalid, 'Malformed request URL');
    if (pathname.startsWith('/compute/v1/')) return serveCompute(req, res, method, pathname, query);
    if (pathname.startsWith('/v1/services')) {
      req.resume();
      try {
        const result = billingCatalog.serve(method, pathSegments(pathname).slice(1), query);
        return sendJson(res, result.status, result.body);
      } catch (err) {
        if (err instanceof BillingApiError) return sendJson(res, err.status, err.toJSON());
        throw err;
      }
    }
    if (isObjectsPath(pathname)) {
      req.resume();
      const result = handleObjects({ state, bucketsDir: options.bucketsDir, endpoint: () => endpoint }, method, pathname, query, req.headers.range);
      if (!('media' in result)) return sendJson(res, result.status, result.body);
      res.writeHead(result.status, { 'Content-Type': 'application/octet-stream', 'Content-Length': result.media.length, ...result.headers });
      return void res.end(result.media);
    }
    if (isUploadPath(pathname)) {
      const data = await readBodyBytes(req, MAX_UPLOAD_BYTES);
      const result = handleUpload({ state, bucketsDir: options.bucketsDir, endpoint: () => endpoint }, method, pathname, query, data);
      return sendJson(res, result.status, result.body);
    }
    if (pathname.startsWith(`${STORAGE_PREFIX}/`)) {
      req.resume();
      const result = handleStorage({ state, bucketsDir: options.bucketsDir, endpoint: () => endpoint }, method, pathSegments(pathname), query);
      return sendJson(res, result.status, result.body);
    }
    if (pathname.startsWith('/v1/projects/')) {
      req.resume();
      const result = handleSecretManager(secretCtx, method, pathname, req.headers.authorization);
      return sendJson(res, result.status, result.body);
    }
    if (pathname === ADMIN_PREFIX || pathname.startsWith(`${ADMIN_PREFIX}/`)) {
      const segments = pathSegments(pathname).slice(2);
      const body = parseJson(await readBody(req));
      const result = await handleAdmin(adminCtx, method, segments, query, body);
      return sendJson(res, result.status, result.body);
    }
    req.resume();
    throw new GceError(404, Reason.NotFound, `The requested URL ${pathname.slice(0, 200)} was not found on this server.`);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      const gce = asGceError(err);
      if (gce.status >= 500) log(`internal error on ${req.method} ${req.url}: ${(err as Error)?.stack ?? String(err)}`);
      req.resume();
      sendError(res, gce);
    });
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // Requests Node's HTTP parser cannot read still get GCE's error shape.
    if (!socket.writable) return;
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
    const body = JSON.stringify(new GceError(status, Reason.BadRequest, `Malformed HTTP request (${err.code ?? 'parse error'})`).toJSON());
    socket.end(`HTTP/1.1 ${status} Bad Request\r\nContent-Type: application/json; charset=UTF-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolveListen();
    });
  });

  try {
    await instances.resume();
  } catch (err) {
    server.close();
    throw err;
  }
  flush();
  spotModel.start({
    liveSpotInstances: () => instances.liveSpot(),
    preempt: (i, why) => void (i.status === 'RUNNING' ? instances.preempt(i, why) : undefined),
    repriced: () => instances.reprice(),
    persist,
  });
  const port = (server.address() as { port: number }).port;
  endpoint = `http://${host}:${port}`;
  log(`listening on http://${host}:${port} (time factor ${clock.timeFactor}, spot model ${spotModel.kind}${trace ? ` ${trace.name}` : ''}, ${options.guest ?? 'process'} guests, state ${stateDir})`);

  let closing: Promise<void> | undefined;
  return {
    endpoint: `http://${host}:${port}`,
    host,
    port,
    stateDir,
    timeFactor: clock.timeFactor,
    catalog,
    spotModel: spotModel.kind,
    guest: options.guest ?? 'process',
    close(closeOptions = {}) {
      closing ??= (async () => {
        spotModel.stop();
        scheduler.close();
        operations.releaseWaiters();
        for (const done of [...pendingHangs]) done();
        await new Promise<void>((resolveClose) => {
          server.close(() => resolveClose());
          server.closeAllConnections();
        });
        await instances.close(closeOptions.killVms ?? false);
        flush();
        log(`closed${closeOptions.killVms ? ' (VMs killed)' : ' (VMs left running)'}`);
        releaseLock(stateDir);
      })();
      return closing;
    },
  };
}
