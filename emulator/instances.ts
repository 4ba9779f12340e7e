/**
 * Instances: the lifecycle of emulated VMs, as GCE runs it.
 *
 *   insert -> PROVISIONING -> STAGING -> RUNNING (the startup script starts; insert op DONE)
 *   flex-start insert -> PENDING (insert op RUNNING) until the zone's flex pool grants it
 *     (flex-model.ts) -> PROVISIONING -> ...; or, when its wait window ends first, the
 *     instance is gone and the insert op ends DONE with ZONE_RESOURCE_POOL_EXHAUSTED.
 *     Never preempted; stopped or deleted at its maxRunDuration (the time limit below).
 *   stockout / quota -> no instance; the insert operation ends DONE with the error
 *   preemption (spot): instance/preempted TRUE, STOPPING, SIGTERM to the process group,
 *     notice period (30 s emulated), SIGKILL, TERMINATED (or deleted with
 *     instanceTerminationAction DELETE), a compute.instances.preempted operation
 *   delete: STOPPING, SIGTERM, grace period, SIGKILL, gone; the delete operation DONE
 * A startup script that exits leaves the VM RUNNING (its guest OS is still up), as on GCE.
 *   time limit (scheduling.maxRunDuration / terminationTime): at the limit, a `stop` or
 *     `delete` operation by `system`, then STOPPING, SIGTERM, grace, TERMINATED or gone
 * Guests are process groups by default; with `guest: 'synthetic'` no process runs and
 * synthetic-guest.ts plays the agent (scale work), one shared tick for all of them.
 *
 * Every deadline is in the state, so after an emulator restart the timers are re-armed,
 * live process groups are adopted and their metadata servers come back on their ports.
 */
import { EventEmitter } from 'node:events';
import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pricePerHour, regionOfZone, type Catalog } from '../config/catalog';
import { closeSegment, openSegment } from './billing';
import { capacityLimit, capacityUsed, chargedMetric, GPUS_ALL_REGIONS, projectQuotaLimit, projectQuotaUsage, quotaLimit, quotaUsage, type ProjectQuotaDefaults } from './capacity';
import { drawWaitSeconds, flexHasRoom } from './flex-model';
import type { Clock } from './clock';
import { alreadyExists, badRequest, GceError, notFound, Reason } from './errors';
import { compileFilter } from './filter';
import { newId, PROJECT_NUMBER } from './ids';
import { validateInsert, validateSetLabels, validateSetMetadata } from './instance-request';
import { MetadataServer } from './metadata-server';
import type { Operations } from './operations';
import { instanceSelfLink, labelFingerprint, metadataFingerprint, renderInstance } from './render';
import type { Scheduler } from './scheduler';
import type { SpotModel } from './spot-model';
import type { SyntheticGuests } from './synthetic-guest';
import { InstanceStatus, OperationStatus, OperationType, StopReason, type EmulatorState, type GuestKind, type InstanceRecord, type OperationErrorItem, type OperationRecord } from './types';
import { DEFAULT_GPU_TELEMETRY, nvidiaSmiCsv } from './gpu-telemetry';
import { GUEST_BIN, groupAlive, readExitCode, readSerial, signalGroup, startVm } from './vm-process';
import type { AccessTokens } from './secret-manager';

export interface LifecycleTimings {
  /** Emulated seconds in PROVISIONING. */
  provisioningSeconds: number;
  /** Emulated seconds in STAGING. */
  stagingSeconds: number;
  /** Emulated seconds a failing insert takes to report its error. */
  failureSeconds: number;
  /** GCE's preemption notice, emulated seconds (30 on GCE). */
  preemptionNoticeSeconds: number;
  /** Emulated seconds a deleted or stopped guest gets between SIGTERM and SIGKILL. */
  stopGraceSeconds: number;
}

export const DEFAULT_TIMINGS: LifecycleTimings = {
  provisioningSeconds: 3,
  stagingSeconds: 2,
  failureSeconds: 2,
  preemptionNoticeSeconds: 30,
  stopGraceSeconds: 30,
};

/** Real milliseconds between checks whether a stopping guest has exited on its own. */
const EXIT_POLL_MS = 100;
/** Emulated seconds between looks at the flex pool for a request whose wait is over but found no room. */
const FLEX_RETRY_SECONDS = 10;
/** Real milliseconds between checks whether a running guest's startup script has exited. */
const RUNNING_POLL_MS = 1000;

export interface InstancesOptions {
  state: EmulatorState;
  /** Saves soon (changes are coalesced). */
  persist: () => void;
  /** Saves now: used when a process group starts, which a crash must not orphan. */
  persistNow: () => void;
  catalog: Catalog;
  clock: Clock;
  operations: Operations;
  scheduler: Scheduler;
  spotModel: SpotModel;
  timings: LifecycleTimings;
  stateDir: string;
  log: (line: string) => void;
  /** What new VMs run: their startup script as a process group (default), or a synthetic guest. */
  guest?: GuestKind;
  /** Runs the synthetic guests (needed when any VM is synthetic, including adopted ones). */
  synthetic: SyntheticGuests;
  /** Issues the VMs' service-account tokens (their metadata servers serve them). */
  tokens?: AccessTokens;
  /** More of the guests' environment, known once the server listens (its API endpoints). */
  guestEnv?: () => Record<string, string>;
  /** Project-wide quota limits (GPUS_ALL_REGIONS) of projects the admin API has not set. */
  projectQuotas: ProjectQuotaDefaults;
}

/** The status message of a VM stopped or deleted by its time limit. */
export const TIME_LIMIT_MESSAGE = 'Instance was terminated because it reached its time limit (scheduling.maxRunDuration or scheduling.terminationTime).';

/** An insert's QUOTA_EXCEEDED: HTTP 403, GCE's message and its `errorDetails[].quotaInfo`. */
function quotaExceeded(message: string, quotaInfo: Record<string, unknown>): { errors: OperationErrorItem[]; httpStatus: number } {
  return { httpStatus: 403, errors: [{ code: 'QUOTA_EXCEEDED', message, errorDetails: [{ quotaInfo }] }] };
}

function keyOf(i: { project: string; zone: string; name: string }): string {
  return `${i.project}/${i.zone}/${i.name}`;
}

export class Instances {
  private readonly events = new EventEmitter();
  private readonly metadataServers = new Map<string, MetadataServer>();
  private readonly busy = new Set<string>();
  private runningPoll?: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly o: InstancesOptions) {
    this.events.setMaxListeners(0);
  }

  private get state(): EmulatorState {
    return this.o.state;
  }

  private now(): number {
    return this.o.clock.now();
  }

  private at(emulatedSecondsFromNow: number): number {
    return this.now() + this.o.clock.realMs(emulatedSecondsFromNow);
  }

  private changed(i: InstanceRecord): void {
    this.o.persist();
    this.events.emit(keyOf(i));
  }

  find(project: string, zone: string, name: string): InstanceRecord | undefined {
    return this.state.instances.find((i) => i.name === name && i.zone === zone && i.project === project);
  }

  get(project: string, zone: string, name: string): InstanceRecord {
    const i = this.find(project, zone, name);
    if (!i) throw notFound(`projects/${project}/zones/${zone}/instances/${name}`);
    return i;
  }

  list(project: string, zone: string, filter?: string): InstanceRecord[] {
    const here = this.state.instances.filter((i) => i.project === project && i.zone === zone);
    if (!filter) return here;
    const matches = compileFilter(filter);
    return here.filter((i) => matches(renderInstance(i)));
  }

  /** A project's instances by zone, in one pass (aggregatedList over a large fleet). */
  byZone(project: string): Map<string, InstanceRecord[]> {
    const zones = new Map<string, InstanceRecord[]>();
    for (const i of this.state.instances) {
      if (i.project !== project) continue;
      let list = zones.get(i.zone);
      if (!list) zones.set(i.zone, (list = []));
      list.push(i);
    }
    return zones;
  }

  all(): InstanceRecord[] {
    return this.state.instances;
  }

  // --- insert ------------------------------------------------------------------------

  insert(project: string, zone: string, body: unknown): OperationRecord {
    const { catalog } = this.o;
    const req = validateInsert(body, zone, catalog, { nowMs: this.now(), timeFactor: this.o.clock.timeFactor });
    if (this.find(project, zone, req.name)) throw alreadyExists(`projects/${project}/zones/${zone}/instances/${req.name}`);
    const now = this.now();
    const id = newId();
    const region = regionOfZone(zone, this.o.catalog);
    const op = this.o.operations.create({ project, zone, type: OperationType.Insert, targetLink: instanceSelfLink(project, zone, req.name), targetId: id, nowMs: now });

    const probe = { gpus: req.gpus, provisioningModel: req.model };
    const quotaMetric = chargedMetric(this.state, catalog, project, region, probe);
    const failure = this.admissionFailure(project, zone, region, probe, quotaMetric);
    if (failure) {
      op.failAtMs = this.at(this.o.timings.failureSeconds);
      op.error = failure.errors;
      op.httpErrorStatusCode = failure.httpStatus;
      this.o.persist();
      this.armOperationFailure(op);
      this.o.log(`insert ${project}/${zone}/${req.name}: ${failure.errors[0].code}`);
      return op;
    }

    const flex = req.model === 'FLEX_START';
    const guest = this.o.guest ?? 'process';
    const dir = join(this.o.stateDir, 'instances', project.replace(/:/g, '_'), zone, req.name);
    rmSync(dir, { recursive: true, force: true });
    // A synthetic guest has no files: thousands of them need no directories.
    if (guest === 'process') mkdirSync(dir, { recursive: true });
    const instance: InstanceRecord = {
      project,
      zone,
      region,
      name: req.name,
      id,
      creationMs: now,
      status: flex ? InstanceStatus.Pending : InstanceStatus.Provisioning,
      resource: req.resource,
      machineType: req.machineType,
      gpus: req.gpus,
      provisioningModel: probe.provisioningModel,
      ...(quotaMetric ? { quotaMetric } : {}),
      terminationAction: req.terminationAction,
      timeLimit: req.timeLimit,
      guest,
      labels: req.labels,
      metadata: req.metadata,
      guestAttributesEnabled: String(req.metadata['enable-guest-attributes'] ?? '').toUpperCase() === 'TRUE',
      guestAttributes: {},
      preempted: false,
      ...(flex ? {} : this.bootTimes()),
      ...(flex ? { flexStart: { requestedAtMs: now, expiresAtMs: this.at(req.flexWaitSeconds ?? 0), grantAtMs: this.at(drawWaitSeconds(this.state)) } } : {}),
      insertOperation: op.name,
      vm: { dir },
    };
    this.state.instances.push(instance);
    op.progress = flex ? 0 : 10;
    this.changed(instance);
    if (flex) this.armFlexStart(instance);
    else this.armBoot(instance);
    this.o.log(`insert ${keyOf(instance)} (${instance.machineType}${instance.gpus ? `, ${instance.gpus.count} x ${instance.gpus.type}` : ''}, ${instance.provisioningModel}${guest === 'synthetic' ? ', synthetic guest' : ''})`);
    return op;
  }

  private bootTimes(): Pick<InstanceRecord, 'stagingAtMs' | 'runningAtMs'> {
    return { stagingAtMs: this.at(this.o.timings.provisioningSeconds), runningAtMs: this.at(this.o.timings.provisioningSeconds + this.o.timings.stagingSeconds) };
  }

  // --- flex-start: waiting for capacity ---------------------------------------------------

  /** Arms a PENDING flex-start VM's grant (when its wait is over and the pool has room) and its expiry. */
  private armFlexStart(i: InstanceRecord): void {
    const request = i.flexStart;
    if (!request || i.status !== InstanceStatus.Pending) return;
    const key = keyOf(i);
    this.o.scheduler.at(`flexexpire:${key}`, request.expiresAtMs, () => this.expireFlexStart(i));
    this.o.scheduler.at(`flex:${key}`, request.grantAtMs, () => this.tryGrant(i));
  }

  private tryGrant(i: InstanceRecord): void {
    if (i.status !== InstanceStatus.Pending || !this.state.instances.includes(i) || !i.flexStart) return;
    if (!flexHasRoom(this.state, this.o.catalog, i)) {
      this.o.scheduler.at(`flex:${keyOf(i)}`, this.at(FLEX_RETRY_SECONDS), () => this.tryGrant(i));
      return;
    }
    this.o.scheduler.cancel(`flexexpire:${keyOf(i)}`);
    const waited = this.o.clock.emulatedSeconds(this.now() - i.flexStart.requestedAtMs);
    i.flexStart = undefined;
    i.status = InstanceStatus.Provisioning;
    Object.assign(i, this.bootTimes());
    const op = this.o.operations.byName(i.insertOperation);
    if (op && op.status !== OperationStatus.Done) op.progress = 10;
    this.changed(i);
    this.armBoot(i);
    this.o.log(`flex-start capacity granted to ${keyOf(i)} after ${Math.round(waited)} s`);
  }

  /** The wait window ended without capacity: the create fails, and the VM is gone, as on GCE. */
  private expireFlexStart(i: InstanceRecord): void {
    if (i.status !== InstanceStatus.Pending || !this.state.instances.includes(i)) return;
    const now = this.now();
    const op = this.o.operations.byName(i.insertOperation);
    const errors = [{ code: 'ZONE_RESOURCE_POOL_EXHAUSTED', message: `The zone 'projects/${i.project}/zones/${i.zone}' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.` }];
    this.remove(i, now);
    if (op && op.status !== OperationStatus.Done) this.o.operations.finish(op, now, { errors, httpStatus: 503 });
    this.o.log(`flex-start request of ${keyOf(i)} expired without capacity`);
  }

  /**
   * Quota first (the region's, then the project's GPUS_ALL_REGIONS), then capacity, as GCE
   * checks them; each reported in the operation with GCE's message and quotaInfo.
   */
  private admissionFailure(project: string, zone: string, region: string, probe: Pick<InstanceRecord, 'gpus' | 'provisioningModel'>, metric: string | undefined): { errors: OperationErrorItem[]; httpStatus: number } | undefined {
    const { state } = this;
    const { catalog } = this.o;
    const spot = probe.provisioningModel === 'SPOT';
    if (probe.gpus && metric) {
      const limit = quotaLimit(state, catalog, project, region, metric);
      if (quotaUsage(state, catalog, project, region, metric) + probe.gpus.count > limit) {
        return quotaExceeded(`Quota '${metric}' exceeded.  Limit: ${limit.toFixed(1)} in region ${region}.`, { metricName: `compute.googleapis.com/${metric.toLowerCase()}`, limitName: `${metric.replace(/_/g, '-')}-per-project-region`, dimensions: { region }, limit });
      }
    }
    if (probe.gpus) {
      const limit = projectQuotaLimit(state, this.o.projectQuotas, project, GPUS_ALL_REGIONS);
      if (projectQuotaUsage(state, project, GPUS_ALL_REGIONS) + probe.gpus.count > limit) {
        return quotaExceeded(`Quota '${GPUS_ALL_REGIONS}' exceeded.  Limit: ${limit.toFixed(1)} globally.`, { metricName: 'compute.googleapis.com/gpus_all_regions', limitName: 'GPUS-ALL-REGIONS-per-project', limit });
      }
    }
    const stockout = () => ({
      httpStatus: 503,
      errors: [{ code: 'ZONE_RESOURCE_POOL_EXHAUSTED', message: `The zone 'projects/${project}/zones/${zone}' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.` }],
    });
    // A flex-start request does not stock out: it waits for its own pool (flex-model.ts).
    if (probe.provisioningModel === 'FLEX_START') return undefined;
    if (spot && !this.o.spotModel.spotAvailable(zone, probe.gpus)) return stockout();
    if (probe.gpus) {
      const limit = capacityLimit(state, catalog, zone, probe.gpus.type, spot);
      if (capacityUsed(state, zone, probe.gpus.type, spot) + probe.gpus.count > limit) return stockout();
    }
    return undefined;
  }

  private armOperationFailure(op: OperationRecord): void {
    if (op.failAtMs === undefined) return;
    const errors = op.error ?? [];
    const httpStatus = op.httpErrorStatusCode ?? 400;
    this.o.scheduler.at(`op:${op.name}`, op.failAtMs, () => this.o.operations.finish(op, this.now(), { errors, httpStatus }));
  }

  /** Arms the next boot step of a PROVISIONING or STAGING instance. */
  private armBoot(i: InstanceRecord): void {
    const key = `boot:${keyOf(i)}`;
    if (i.status === InstanceStatus.Provisioning) {
      this.o.scheduler.at(key, i.stagingAtMs ?? this.now(), () => {
        if (i.status !== InstanceStatus.Provisioning || !this.state.instances.includes(i)) return;
        i.status = InstanceStatus.Staging;
        const op = this.o.operations.byName(i.insertOperation);
        if (op && op.status !== OperationStatus.Done) op.progress = 50;
        this.changed(i);
        this.armBoot(i);
      });
    } else if (i.status === InstanceStatus.Staging) {
      this.o.scheduler.at(key, i.runningAtMs ?? this.now(), () => void this.boot(i).catch((err: Error) => this.o.log(`boot ${keyOf(i)} failed: ${err.message}`)));
    }
  }

  private isSynthetic(i: InstanceRecord): boolean {
    return i.guest === 'synthetic';
  }

  /** STAGING -> RUNNING for a synthetic guest: no metadata server, no process. */
  private bootSynthetic(i: InstanceRecord): void {
    if (i.status !== InstanceStatus.Staging || !this.state.instances.includes(i)) return;
    const now = this.now();
    i.status = InstanceStatus.Running;
    i.lastStartMs = now;
    openSegment(this.state, i, now, this.priceOf(i), this.o.clock.timeFactor);
    this.o.synthetic.start(i, now);
    this.changed(i);
    const op = this.o.operations.byName(i.insertOperation);
    if (op) this.o.operations.finish(op, now);
    this.armTimeLimit(i, true);
    if (i.preemptAtMs !== undefined) this.armPreemption(i);
  }

  /** STAGING -> RUNNING: the metadata server comes up, then the guest starts. */
  private async boot(i: InstanceRecord): Promise<void> {
    if (this.isSynthetic(i)) return this.bootSynthetic(i);
    if (i.status !== InstanceStatus.Staging || !this.state.instances.includes(i) || this.busy.has(keyOf(i))) return;
    this.busy.add(keyOf(i));
    try {
      const server = await this.serveMetadata(i);
      if (this.closed || i.status !== InstanceStatus.Staging || !this.state.instances.includes(i)) {
        await server.close();
        return;
      }
      const now = this.now();
      i.vm.metadataPort = server.port;
      const script = i.metadata['startup-script'];
      if (script !== undefined) {
        const spawned = startVm(i.vm.dir, script, this.guestEnv(i, server.port), { gpus: (i.gpus?.count ?? 0) > 0 });
        i.vm.pid = spawned.pid;
        i.vm.pgid = spawned.pgid;
        i.vm.startedAtMs = now;
      }
      i.status = InstanceStatus.Running;
      i.lastStartMs = now;
      openSegment(this.state, i, now, this.priceOf(i), this.o.clock.timeFactor);
      const op = this.o.operations.byName(i.insertOperation);
      this.changed(i);
      this.o.persistNow();
      if (op) this.o.operations.finish(op, now);
      this.armRunningPoll();
      this.armTimeLimit(i, true);
      if (i.preemptAtMs !== undefined) this.armPreemption(i);
      this.o.log(`running ${keyOf(i)}${i.vm.pgid ? ` (pgid ${i.vm.pgid}, metadata 127.0.0.1:${server.port})` : ' (no startup-script)'}`);
    } finally {
      this.busy.delete(keyOf(i));
    }
  }

  private guestEnv(i: InstanceRecord, metadataPort: number): Record<string, string> {
    const tmp = join(i.vm.dir, 'tmp');
    mkdirSync(tmp, { recursive: true });
    return {
      // The emulator's node and the usual tools; nothing else of the emulator's environment.
      // The guest's own poweroff first: the host's must never be reached from a guest.
      PATH: `${join(i.vm.dir, GUEST_BIN)}:${dirname(process.execPath)}:${process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin'}`,
      HOME: i.vm.dir,
      TMPDIR: tmp,
      LANG: 'C.UTF-8',
      GCE_METADATA_HOST: `127.0.0.1:${metadataPort}`,
      GCE_METADATA_IP: `127.0.0.1:${metadataPort}`,
      STERNA_EMULATOR: '1',
      ...this.o.guestEnv?.(),
    };
  }

  private serveMetadata(i: InstanceRecord): Promise<MetadataServer> {
    const key = keyOf(i);
    const existing = this.metadataServers.get(key);
    if (existing) return Promise.resolve(existing);
    const view = {
      instance: () => (this.state.instances.includes(i) ? i : undefined),
      projectNumber: PROJECT_NUMBER,
      accessToken: this.o.tokens && (() => this.o.tokens!.issue(i)),
      setGuestAttribute: (namespace: string, k: string, value: string | undefined) => {
        if (value === undefined) delete i.guestAttributes[namespace]?.[k];
        else (i.guestAttributes[namespace] ??= {})[k] = value;
        this.changed(i);
      },
      onChange: (listener: () => void) => {
        this.events.on(key, listener);
        return () => void this.events.off(key, listener);
      },
      powerOff: () => this.guestPowerOff(i),
      nvidiaSmi: () => (i.gpus && i.gpus.count > 0 ? nvidiaSmiCsv(i.gpus, i.gpuTelemetry ?? this.state.gpuTelemetry ?? DEFAULT_GPU_TELEMETRY) : undefined),
    };
    const start = async (port: number) => {
      const server = await MetadataServer.start(view, port);
      this.metadataServers.set(key, server);
      return server;
    };
    // An adopted VM knows its metadata server by port: get the same one back if we can.
    return start(i.vm.metadataPort ?? 0).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EADDRINUSE' || !i.vm.metadataPort) throw err;
      this.o.log(`metadata port ${i.vm.metadataPort} of ${key} is taken; its guest cannot reach the metadata server any more`);
      return start(0);
    });
  }

  private priceOf(i: InstanceRecord): number {
    const spot = i.provisioningModel === 'SPOT';
    const flexStart = i.provisioningModel === 'FLEX_START';
    const modelPrice = spot ? this.o.spotModel.spotPrice(i.zone, i.gpus) : undefined;
    return modelPrice ?? pricePerHour({ region: i.region, machineType: i.machineType, accelerator: i.gpus?.type, count: i.gpus?.count, spot, flexStart }, this.o.catalog) ?? 0;
  }

  /** Re-prices running VMs (trace replay changes spot prices tick by tick; the admin API changes rates). */
  reprice(): void {
    const now = this.now();
    let any = false;
    for (const i of this.state.instances) {
      if (i.status !== InstanceStatus.Running && i.status !== InstanceStatus.Stopping) continue;
      openSegment(this.state, i, now, this.priceOf(i), this.o.clock.timeFactor);
      any = true;
    }
    if (any) this.o.persist();
  }

  /** Notices startup scripts that have exited (the VM stays RUNNING; the exit code is recorded). */
  private armRunningPoll(): void {
    if (this.runningPoll || this.closed) return;
    this.runningPoll = setInterval(() => {
      let live = false;
      for (const i of this.state.instances) {
        if (i.status !== InstanceStatus.Running || !i.vm.pgid || i.vm.exitedAtMs !== undefined) continue;
        if (groupAlive(i.vm.pgid)) {
          live = true;
          continue;
        }
        i.vm.exitedAtMs = this.now();
        i.vm.exitCode = readExitCode(i.vm.dir);
        this.o.log(`guest of ${keyOf(i)} exited (${i.vm.exitCode ?? 'no status'}); the VM stays RUNNING`);
        this.changed(i);
      }
      if (!live && this.runningPoll) {
        clearInterval(this.runningPoll);
        this.runningPoll = undefined;
      }
    }, RUNNING_POLL_MS);
    this.runningPoll.unref();
  }

  // --- time limits -------------------------------------------------------------------------

  /**
   * Arms the VM's time limit: `maxRunDuration` counts emulated seconds from this RUNNING
   * start; `terminationTime` is a wall-clock time. GCE sets the VM's termination
   * timestamp whenever it enters RUNNING with a time limit.
   */
  private armTimeLimit(i: InstanceRecord, starting: boolean): void {
    if (!i.timeLimit || i.status !== InstanceStatus.Running) return;
    if (starting || i.terminationAtMs === undefined) {
      i.terminationAtMs = 'maxRunDurationSeconds' in i.timeLimit ? (i.lastStartMs ?? this.now()) + this.o.clock.realMs(i.timeLimit.maxRunDurationSeconds) : i.timeLimit.terminationTimeMs;
      this.o.persist();
    }
    this.o.scheduler.at(`limit:${keyOf(i)}`, i.terminationAtMs, () => this.reachTimeLimit(i));
  }

  /** The time limit is reached: GCE stops or deletes the VM, as its instanceTerminationAction says, and records the operation. */
  private reachTimeLimit(i: InstanceRecord): void {
    if (i.status !== InstanceStatus.Running || !this.state.instances.includes(i)) return;
    const now = this.now();
    const del = i.terminationAction === 'DELETE';
    const op = this.o.operations.create({
      project: i.project,
      zone: i.zone,
      type: del ? OperationType.Delete : OperationType.Stop,
      targetLink: instanceSelfLink(i.project, i.zone, i.name),
      targetId: i.id,
      user: 'system',
      nowMs: now,
    });
    op.statusMessage = TIME_LIMIT_MESSAGE;
    i.pendingOperations = [...(i.pendingOperations ?? []), op.name];
    this.beginStop(i, StopReason.TimeLimit, this.o.timings.stopGraceSeconds);
    this.o.log(`time limit of ${keyOf(i)} reached: ${del ? 'deleting' : 'stopping'} it`);
  }

  // --- stopping: preemption and delete --------------------------------------------------

  /** Preempts a spot VM now, or schedules it `afterSeconds` emulated seconds from now. */
  preempt(i: InstanceRecord, why: string, afterSeconds?: number): { preemptAt: string } {
    if (i.provisioningModel !== 'SPOT') throw badRequest(`Instance ${i.name} is not a spot (preemptible) VM; GCE never preempts it.`);
    if (afterSeconds !== undefined && afterSeconds > 0) {
      i.preemptAtMs = this.at(afterSeconds);
      this.o.persist();
      this.armPreemption(i, why);
      return { preemptAt: new Date(i.preemptAtMs).toISOString() };
    }
    if (i.status !== InstanceStatus.Running) {
      throw new GceError(409, Reason.ResourceNotReady, `Instance ${i.name} is ${i.status}; only a RUNNING VM can be preempted now (or pass afterSeconds).`);
    }
    this.beginStop(i, StopReason.Preempted, this.o.timings.preemptionNoticeSeconds);
    this.o.log(`preempted ${keyOf(i)}: ${why}`);
    return { preemptAt: new Date(this.now()).toISOString() };
  }

  private armPreemption(i: InstanceRecord, why = 'scheduled preemption'): void {
    if (i.preemptAtMs === undefined) return;
    this.o.scheduler.at(`preempt:${keyOf(i)}`, i.preemptAtMs, () => {
      if (!this.state.instances.includes(i)) return;
      if (i.status === InstanceStatus.Provisioning || i.status === InstanceStatus.Staging) return; // boot() re-arms it
      i.preemptAtMs = undefined;
      if (i.status === InstanceStatus.Running) {
        this.beginStop(i, StopReason.Preempted, this.o.timings.preemptionNoticeSeconds);
        this.o.log(`preempted ${keyOf(i)}: ${why}`);
      } else {
        this.o.persist();
      }
    });
  }

  /** Spot VMs the models may preempt. */
  liveSpot(): InstanceRecord[] {
    return this.state.instances.filter((i) => i.provisioningModel === 'SPOT' && i.status === InstanceStatus.Running);
  }

  delete(project: string, zone: string, name: string): OperationRecord {
    const i = this.get(project, zone, name);
    const now = this.now();
    const op = this.o.operations.create({ project, zone, type: OperationType.Delete, targetLink: instanceSelfLink(project, zone, name), targetId: i.id, nowMs: now });
    i.pendingOperations = [...(i.pendingOperations ?? []), op.name];
    switch (i.status) {
      case InstanceStatus.Pending:
      case InstanceStatus.Provisioning:
      case InstanceStatus.Staging: {
        // Deleted while waiting or booting: the insert completes (the VM existed), then it is gone.
        this.o.scheduler.cancel(`boot:${keyOf(i)}`);
        const insert = this.o.operations.byName(i.insertOperation);
        if (insert) this.o.operations.finish(insert, now);
        this.remove(i, now);
        break;
      }
      case InstanceStatus.Running:
        this.beginStop(i, StopReason.Deleted, this.o.timings.stopGraceSeconds);
        break;
      case InstanceStatus.Stopping:
        i.stopReason = StopReason.Deleted;
        this.changed(i);
        break;
      case InstanceStatus.Terminated:
        this.remove(i, now);
        break;
    }
    this.o.log(`delete ${keyOf(i)} (was ${i.status})`);
    return op;
  }

  /**
   * Replaces the instance's metadata, as GCE's setMetadata does: only under the current
   * fingerprint (412 conditionNotMet otherwise, so concurrent writers never lose each
   * other's items). The guest sees the new values at once on its metadata server, and a
   * `wait_for_change` on them returns.
   */
  setMetadata(project: string, zone: string, name: string, body: unknown): OperationRecord {
    const i = this.get(project, zone, name);
    const { metadata, fingerprint } = validateSetMetadata(body);
    if (fingerprint !== metadataFingerprint(i.metadata)) {
      throw new GceError(412, Reason.ConditionNotMet, `Supplied fingerprint does not match current metadata fingerprint.`);
    }
    const now = this.now();
    const op = this.o.operations.create({ project, zone, type: OperationType.SetMetadata, targetLink: instanceSelfLink(project, zone, name), targetId: i.id, nowMs: now });
    i.metadata = metadata;
    i.guestAttributesEnabled = String(metadata['enable-guest-attributes'] ?? '').toUpperCase() === 'TRUE';
    this.o.operations.finish(op, now);
    this.changed(i);
    this.o.log(`setMetadata ${keyOf(i)} (${Object.keys(metadata).length} items)`);
    return op;
  }

  /** Replaces the instance's labels, as GCE's setLabels does: only under the current label fingerprint (412 otherwise). */
  setLabels(project: string, zone: string, name: string, body: unknown): OperationRecord {
    const i = this.get(project, zone, name);
    const { labels, fingerprint } = validateSetLabels(body);
    if (fingerprint !== labelFingerprint(i.labels)) throw new GceError(412, Reason.ConditionNotMet, `Labels fingerprint either invalid or resource labels have changed`);
    const now = this.now();
    const op = this.o.operations.create({ project, zone, type: OperationType.SetLabels, targetLink: instanceSelfLink(project, zone, name), targetId: i.id, nowMs: now });
    i.labels = labels;
    this.o.operations.finish(op, now);
    this.changed(i);
    this.o.log(`setLabels ${keyOf(i)} (${Object.keys(labels).length} labels)`);
    return op;
  }

  /** RUNNING -> STOPPING: preempted flag first (so the guest's SIGTERM handler sees TRUE), then SIGTERM. */
  private beginStop(i: InstanceRecord, reason: StopReason, graceSeconds: number): void {
    const now = this.now();
    i.status = InstanceStatus.Stopping;
    i.stoppingSinceMs = now;
    i.stopReason = reason;
    i.killAtMs = this.at(graceSeconds);
    if (reason === StopReason.Preempted) {
      i.preempted = true;
      const op = this.o.operations.create({
        project: i.project,
        zone: i.zone,
        type: OperationType.Preempted,
        targetLink: instanceSelfLink(i.project, i.zone, i.name),
        targetId: i.id,
        user: 'system',
        nowMs: now,
      });
      op.statusMessage = 'Instance was preempted.';
      this.o.operations.finish(op, now);
    }
    i.terminationAtMs = undefined;
    this.o.scheduler.cancel(`limit:${keyOf(i)}`);
    this.changed(i);
    this.armStop(i);
    if (this.isSynthetic(i)) this.o.synthetic.terminate(i, now);
    else signalGroup(i.vm.pgid, 'SIGTERM');
  }

  private armStop(i: InstanceRecord): void {
    const key = keyOf(i);
    this.o.scheduler.at(`kill:${key}`, i.killAtMs ?? this.now(), () => this.killGuest(i));
    // A synthetic guest reports its own exit (guestExited); only process groups are polled.
    // One that exited already is the agent waiting to power off, which SIGTERM ends at once.
    if (this.isSynthetic(i)) {
      if (!this.o.synthetic.alive(i)) this.finishStop(i);
      return;
    }
    const poll = () => {
      if (i.status !== InstanceStatus.Stopping || !this.state.instances.includes(i)) return;
      if (!groupAlive(i.vm.pgid)) this.finishStop(i);
      else this.o.scheduler.at(`exit:${key}`, this.now() + EXIT_POLL_MS, poll);
    };
    poll();
  }

  /**
   * The notice or grace period is over: SIGKILL whatever is left. A process group takes a
   * moment to die, and the VM is not stopped until it has: the exit poll armStop started,
   * still running while the group lives, finishes the stop.
   */
  private killGuest(i: InstanceRecord): void {
    if (i.status !== InstanceStatus.Stopping || !this.state.instances.includes(i)) return;
    if (!this.isSynthetic(i) && groupAlive(i.vm.pgid)) {
      signalGroup(i.vm.pgid, 'SIGKILL');
      i.vm.killed = true;
      return;
    }
    this.finishStop(i);
  }

  /** The guest is gone (or, synthetic, killed now): TERMINATED (or deleted). */
  private finishStop(i: InstanceRecord): void {
    if (i.status !== InstanceStatus.Stopping || !this.state.instances.includes(i)) return;
    const key = keyOf(i);
    this.o.scheduler.cancel(`kill:${key}`);
    this.o.scheduler.cancel(`exit:${key}`);
    const now = this.now();
    if (this.isSynthetic(i)) {
      if (this.o.synthetic.kill(i, now)) i.vm.killed = true;
      i.vm.exitedAtMs ??= i.vm.synthetic?.exitedAtMs ?? now;
      i.vm.exitCode ??= i.vm.synthetic?.killed ? undefined : i.vm.synthetic?.exitCode;
    } else {
      i.vm.exitedAtMs ??= now;
      i.vm.exitCode ??= readExitCode(i.vm.dir);
    }
    closeSegment(this.state, i, now);
    i.lastStopMs = now;
    void this.metadataServers.get(key)?.close();
    this.metadataServers.delete(key);
    const deleteOnStop = (i.stopReason === StopReason.Preempted || i.stopReason === StopReason.TimeLimit) && i.terminationAction === 'DELETE';
    if (i.stopReason === StopReason.Deleted || deleteOnStop) {
      this.remove(i, now);
      return;
    }
    i.status = InstanceStatus.Terminated;
    i.killAtMs = undefined;
    this.finishPending(i, now);
    this.changed(i);
    this.o.log(`terminated ${key}${i.preempted ? ' (preempted)' : i.stopReason === StopReason.TimeLimit ? ' (time limit)' : ''}`);
  }

  private finishPending(i: InstanceRecord, now: number): void {
    for (const name of i.pendingOperations ?? []) {
      const op = this.o.operations.byName(name);
      if (op) this.o.operations.finish(op, now);
    }
    i.pendingOperations = [];
  }

  private remove(i: InstanceRecord, now: number): void {
    const key = keyOf(i);
    for (const prefix of ['boot', 'kill', 'exit', 'preempt', 'limit', 'poweroff', 'flex', 'flexexpire']) this.o.scheduler.cancel(`${prefix}:${key}`);
    if (this.isSynthetic(i)) this.o.synthetic.kill(i, now);
    closeSegment(this.state, i, now);
    void this.metadataServers.get(key)?.close();
    this.metadataServers.delete(key);
    this.state.instances = this.state.instances.filter((x) => x !== i);
    this.finishPending(i, now);
    this.o.persist();
    this.events.emit(key);
    this.o.log(`deleted ${key}`);
  }

  /** A synthetic guest is gone: recorded as a process exit is; a stopping VM then stops at once. */
  guestExited(i: InstanceRecord): void {
    if (!this.state.instances.includes(i)) return;
    const rec = i.vm.synthetic;
    i.vm.exitedAtMs = rec?.exitedAtMs ?? this.now();
    i.vm.exitCode = rec?.exitCode;
    if (i.status === InstanceStatus.Stopping) {
      this.finishStop(i);
      return;
    }
    this.o.log(`guest of ${keyOf(i)} exited (${i.vm.exitCode ?? 'no status'}); the VM stays RUNNING`);
    this.changed(i);
    this.armSyntheticPowerOff(i);
  }

  /**
   * The guest OS powered itself off: GCE stops the VM (STOPPING, then TERMINATED; a
   * guest shutdown is not an API operation, and instanceTerminationAction does not apply).
   */
  guestPowerOff(i: InstanceRecord): void {
    if (i.status !== InstanceStatus.Running || !this.state.instances.includes(i)) return;
    this.o.log(`guest of ${keyOf(i)} powered itself off`);
    this.beginStop(i, StopReason.Stopped, this.o.timings.stopGraceSeconds);
  }

  /**
   * As the agent does (activities/agent/sterna-agent.sh): once the trainer has exited, a
   * synthetic guest powers off after `sterna-poweroff-after-seconds` (emulated) if the
   * VM is still running then.
   */
  private armSyntheticPowerOff(i: InstanceRecord): void {
    const grace = i.metadata['sterna-poweroff-after-seconds'];
    if (!this.isSynthetic(i) || i.vm.exitedAtMs === undefined || grace === undefined || !/^\d+$/.test(grace)) return;
    this.o.scheduler.at(`poweroff:${keyOf(i)}`, i.vm.exitedAtMs + this.o.clock.realMs(Number(grace)), () => this.guestPowerOff(i));
  }

  /** Notes a guest attribute change made by a synthetic guest (persisted, wakes metadata waiters). */
  guestChanged(i: InstanceRecord): void {
    // No membership check: a removed VM's guest is dropped in remove(), before it can publish.
    this.changed(i);
  }

  // --- guest attributes and serial port ---------------------------------------------------

  guestAttributes(i: InstanceRecord, queryPath?: string, variableKey?: string): Record<string, unknown> {
    const selfLink = `${instanceSelfLink(i.project, i.zone, i.name)}/guestAttributes/${variableKey ?? queryPath ?? ''}`;
    const missing = () => notFound(`projects/${i.project}/zones/${i.zone}/instances/${i.name}/guestAttributes/${variableKey ?? queryPath ?? ''}`);
    if (!i.guestAttributesEnabled) throw missing();
    if (variableKey) {
      const [namespace, key, ...rest] = variableKey.split('/');
      const value = rest.length === 0 && key ? i.guestAttributes[namespace]?.[key] : undefined;
      if (value === undefined) throw missing();
      return { kind: 'compute#guestAttributes', variableKey, variableValue: value, selfLink };
    }
    const path = queryPath ?? '';
    const [namespace, key] = path.split('/');
    const items: { namespace: string; key: string; value: string }[] = [];
    for (const [ns, values] of Object.entries(i.guestAttributes)) {
      if (namespace && ns !== namespace) continue;
      for (const [k, value] of Object.entries(values)) if (!key || k === key) items.push({ namespace: ns, key: k, value });
    }
    if (items.length === 0) throw missing();
    return { kind: 'compute#guestAttributes', queryPath: path, queryValue: { items }, selfLink };
  }

  serialPort(i: InstanceRecord, start: number): Record<string, unknown> {
    const out = readSerial(i.vm.dir, start);
    return { kind: 'compute#serialPortOutput', contents: out.contents, start: String(out.start), next: String(out.next), selfLink: `${instanceSelfLink(i.project, i.zone, i.name)}/serialPort` };
  }

  // --- restart and shutdown ---------------------------------------------------------------

  /** After a restart: re-arms every pending step and adopts live guests. */
  async resume(): Promise<void> {
    for (const op of this.state.operations) if (op.failAtMs !== undefined && op.status !== OperationStatus.Done) this.armOperationFailure(op);
    for (const i of [...this.state.instances]) {
      i.pendingOperations ??= [];
      switch (i.status) {
        case InstanceStatus.Pending:
          this.armFlexStart(i);
          break;
        case InstanceStatus.Provisioning:
        case InstanceStatus.Staging:
          this.armBoot(i);
          break;
        case InstanceStatus.Running:
          if (this.isSynthetic(i)) {
            // Its progress is a function of time: it catches up with what it did meanwhile.
            this.o.synthetic.adopt(i);
            this.armSyntheticPowerOff(i);
          } else if (i.vm.pgid && i.vm.exitedAtMs === undefined && groupAlive(i.vm.pgid)) {
            await this.serveMetadata(i);
            this.o.log(`adopted ${keyOf(i)} (pgid ${i.vm.pgid}, metadata 127.0.0.1:${i.vm.metadataPort})`);
            this.armRunningPoll();
          } else if (i.vm.pgid && i.vm.exitedAtMs === undefined) {
            i.vm.exitedAtMs = this.now();
            i.vm.exitCode = readExitCode(i.vm.dir);
          }
          this.armTimeLimit(i, false);
          if (i.preemptAtMs !== undefined) this.armPreemption(i);
          break;
        case InstanceStatus.Stopping:
          if (this.isSynthetic(i)) this.o.synthetic.adopt(i);
          else if (groupAlive(i.vm.pgid)) await this.serveMetadata(i);
          this.armStop(i);
          break;
        case InstanceStatus.Terminated:
          break;
      }
    }
    // Operations whose instance vanished while the emulator was down cannot stay RUNNING.
    const now = this.now();
    for (const op of this.state.operations) {
      if (op.status === OperationStatus.Done || op.failAtMs !== undefined) continue;
      const owner = this.state.instances.find((i) => i.insertOperation === op.name || i.pendingOperations?.includes(op.name));
      if (!owner) this.o.operations.finish(op, now);
    }
    this.o.persist();
  }

  /**
   * Stops serving. VMs keep running unless `killVms`: then every guest is SIGKILLed
   * and its instance TERMINATED (billing closed), so tests leave nothing behind.
   */
  async close(killVms: boolean): Promise<void> {
    this.closed = true;
    if (this.runningPoll) clearInterval(this.runningPoll);
    this.o.synthetic.close();
    if (killVms) {
      const now = this.now();
      for (const i of this.state.instances) {
        if (signalGroup(i.vm.pgid, 'SIGKILL')) i.vm.killed = true;
        if (this.isSynthetic(i) && this.o.synthetic.kill(i, now)) i.vm.killed = true;
        if (i.status === InstanceStatus.Running || i.status === InstanceStatus.Stopping) {
          closeSegment(this.state, i, now);
          i.status = InstanceStatus.Terminated;
          i.lastStopMs = now;
          i.vm.exitedAtMs ??= now;
        }
      }
      await waitForGroupsGone(this.state.instances.map((i) => i.vm.pgid));
    }
    await Promise.all([...this.metadataServers.values()].map((s) => s.close()));
    this.metadataServers.clear();
    this.o.persist();
  }
}

async function waitForGroupsGone(pgids: (number | undefined)[], timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let live = pgids.filter((p): p is number => p !== undefined && groupAlive(p));
  while (live.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    live = live.filter((p) => groupAlive(p));
  }
}
