/**
 * The GCE emulator for tests: in-process, on a free loopback port, with a temporary
 * state directory, and the client options the real `@google-cloud/compute` needs to
 * reach it. `stop()` kills every VM process group and removes the directory it made.
 *
 *   const emu = await startTestEmulator({ timeFactor: 10 });
 *   const instances = new InstancesClient(emu.clientOptions);
 *   ...
 *   await emu.stop();
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThroughClient } from 'google-auth-library';
import { EmulatorAdminClient, type AdminInstanceView, type BillingSummary, type CapacityView } from '../../emulator/admin-client';
import { startEmulator, type EmulatorHandle, type EmulatorOptions } from '../../emulator/server';

export interface TestEmulatorOptions extends Partial<EmulatorOptions> {
  /** Keep the state directory after stop() (it is removed only when the helper created it). */
  keepStateDir?: boolean;
}

/**
 * Tests model a project that has been granted GPUs, so that only the regional quotas and
 * capacity they set can bind; a test of a new project (GPUS_ALL_REGIONS 0, the emulator's
 * own default) passes `gpusAllRegions: 0`.
 */
export const TEST_GPUS_ALL_REGIONS = 10_000;

export type ComputeClientOptions = {
  apiEndpoint: string;
  port: number;
  protocol: 'http';
  authClient: PassThroughClient;
  fallback: true;
};

export interface TestEmulator {
  port: number;
  endpoint: string;
  stateDir: string;
  handle: EmulatorHandle;
  admin: EmulatorAdminClient;
  /** Options for every `@google-cloud/compute` client (REST, no credentials). */
  clientOptions: ComputeClientOptions;
  /** Per-instance billing records (costUsd on the wall clock, emulatedCostUsd on the emulated one). */
  billing(project?: string): Promise<BillingSummary[]>;
  /** Spot GPUs allocatable in a zone; undefined restores the default. */
  setSpotCapacity(zone: string, accelerator: string, gpus: number | undefined): Promise<CapacityView>;
  setOnDemandCapacity(zone: string, accelerator: string, gpus: number | undefined): Promise<CapacityView>;
  setQuota(project: string, region: string, metric: string, limit: number | undefined): Promise<void>;
  /** A project-wide quota (GPUS_ALL_REGIONS); undefined restores the emulator's default. */
  setProjectQuota(project: string, metric: string, limit: number | undefined): Promise<void>;
  /** Preempts a spot VM (project optional when the name is unique in the zone). */
  preempt(zone: string, name: string, options?: { project?: string; afterSeconds?: number }): Promise<void>;
  instances(): Promise<AdminInstanceView[]>;
  /** Stops the server leaving VMs running, then starts it again on the same state dir (and port, if free). */
  restart(): Promise<void>;
  /** Kills every VM, stops the server, removes the temporary state dir. Safe to call twice. */
  stop(): Promise<void>;
}

export async function startTestEmulator(options: TestEmulatorOptions = {}): Promise<TestEmulator> {
  process.env.METADATA_SERVER_DETECTION = 'none';
  const ownDir = !options.stateDir;
  const stateDir = options.stateDir ?? mkdtempSync(join(tmpdir(), 'sterna-emulator-'));
  const startOptions: EmulatorOptions = { ...options, stateDir, port: options.port ?? 0, gpusAllRegions: options.gpusAllRegions ?? TEST_GPUS_ALL_REGIONS };
  let handle = await startEmulator(startOptions);
  let stopped = false;

  const emulator: TestEmulator = {
    port: handle.port,
    endpoint: handle.endpoint,
    stateDir,
    handle,
    admin: new EmulatorAdminClient(handle.endpoint),
    clientOptions: { apiEndpoint: '127.0.0.1', port: handle.port, protocol: 'http', authClient: new PassThroughClient(), fallback: true },
    async billing(project) {
      return (await emulator.admin.billing(project)).records;
    },
    setSpotCapacity: (zone, accelerator, gpus) => emulator.admin.setCapacity(zone, { accelerator, spot: gpus ?? null }),
    setOnDemandCapacity: (zone, accelerator, gpus) => emulator.admin.setCapacity(zone, { accelerator, onDemand: gpus ?? null }),
    async setQuota(project, region, metric, limit) {
      await emulator.admin.setQuota(project, region, metric, limit ?? null);
    },
    async setProjectQuota(project, metric, limit) {
      await emulator.admin.setProjectQuota(project, metric, limit ?? null);
    },
    async preempt(zone, name, opts = {}) {
      await emulator.admin.preempt(opts.project, zone, name, { afterSeconds: opts.afterSeconds });
    },
    instances: () => emulator.admin.instances(),
    async restart() {
      await handle.close({ killVms: false });
      // Let this process's HTTP agents see the closed keep-alive sockets before the next request.
      await new Promise((r) => setTimeout(r, 50));
      // Clients were built with this port: ask for it again (it was just released).
      handle = await startEmulator({ ...startOptions, port: emulator.port }).catch(() => startEmulator({ ...startOptions, port: 0 }));
      emulator.handle = handle;
      emulator.port = handle.port;
      emulator.endpoint = handle.endpoint;
      emulator.admin = new EmulatorAdminClient(handle.endpoint);
      emulator.clientOptions = { ...emulator.clientOptions, port: handle.port };
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await handle.close({ killVms: true });
      if (ownDir && !options.keepStateDir) rmSync(stateDir, { recursive: true, force: true });
    },
  };
  return emulator;
}
