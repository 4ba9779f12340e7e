/**
 * A typed client for the emulator's admin API (/emulator/v1/), for tests and the demo.
 *
 *   const admin = new EmulatorAdminClient('http://127.0.0.1:8790');
 *   await admin.setCapacity('us-central1-a', { accelerator: 'nvidia-l4', spot: 0 });
 *   await admin.preempt('my-project', 'us-central1-a', 'vm-1');
 */
import type { GpuTelemetry } from './gpu-telemetry';
import type { AdminInstanceView, BillingResponse, GpuTelemetryView, CapacityView, ClockView, PriceView, SyntheticGuestsView } from './admin';
import type { ApiUsageView, MethodUsage, ProjectUsage } from './api-usage';
import type { BillingSummary } from './billing';
import type { FlexStartSettings } from './types';
import type { z } from 'zod';
import type { BillingCatalogAdminBody, BillingCatalogView } from './billing-catalog';
import type { FaultRule, FaultSpec } from './faults';
import type { RateQuotaChange, RateQuotaUsage, RateQuotaView } from './rate-quotas';
import type { SyntheticGuestConfig } from './synthetic-guest';

export type { GpuTelemetry, GpuTelemetryView };
export type { AdminInstanceView, ApiUsageView, BillingResponse, BillingSummary, CapacityView, ClockView, FaultRule, FaultSpec, MethodUsage, PriceView, ProjectUsage, RateQuotaChange, RateQuotaUsage, RateQuotaView, SyntheticGuestConfig, SyntheticGuestsView };

export class EmulatorAdminError extends Error {
  override name = 'EmulatorAdminError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface CapacityChange {
  accelerator: string;
  /** GPUs allocatable to spot VMs in the zone; null restores the catalog default. */
  spot?: number | null;
  onDemand?: number | null;
  /** GPUs in the zone's flex-start (DWS) pool; null restores the catalog default. */
  flexStart?: number | null;
  /** Preempt running spot VMs (newest first) when the new spot capacity is below what is in use. */
  preemptRunning?: boolean;
}

/** A bucket as the storage API serves it (admin `buckets/<name>`). */
export interface BucketView {
  name: string;
  exists: boolean;
  /** Absent while the bucket does not exist or cannot be read. */
  location?: string;
  forbidden: boolean;
  readOnly: boolean;
}

export class EmulatorAdminClient {
  private readonly base: string;

  constructor(endpoint: string) {
    this.base = `${endpoint.replace(/\/+$/, '')}/emulator/v1`;
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(`${this.base}/${path}`, {
      method,
      headers: body === undefined ? undefined : { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const json = text ? (JSON.parse(text) as unknown) : undefined;
    if (!res.ok) {
      const message = (json as { error?: { message?: string } } | undefined)?.error?.message ?? text;
      throw new EmulatorAdminError(res.status, `${method} /emulator/v1/${path}: ${res.status} ${message}`);
    }
    return json as T;
  }

  /** Adds a version to a secret of the emulator's Secret Manager; only `accessors` (service-account emails) may read it, when given. */
  async addSecretVersion(project: string, secret: string, value: string, options: { accessors?: string[] } = {}): Promise<{ name: string; version: number }> {
    return this.call('POST', `projects/${project}/secrets/${secret}/versions`, { value, ...options });
  }

  async health(): Promise<boolean> {
    return (await this.call<{ ok: boolean }>('GET', 'health')).ok;
  }

  clock(): Promise<ClockView> {
    return this.call('GET', 'clock');
  }

  spotModel(): Promise<Record<string, unknown>> {
    return this.call('GET', 'spot-model');
  }

  /** The flex-start wait model: each request waits `meanWaitSeconds` (fixed, or exponential from `seed`) before its pool may grant it. */
  setFlexStart(change: Partial<Pick<FlexStartSettings, 'seed' | 'meanWaitSeconds' | 'distribution'>>): Promise<FlexStartSettings> {
    return this.call('POST', 'flex-start', change);
  }

  capacity(zone: string): Promise<CapacityView> {
    return this.call('GET', `zones/${encodeURIComponent(zone)}/capacity`);
  }

  setCapacity(zone: string, change: CapacityChange): Promise<CapacityView> {
    return this.call('POST', `zones/${encodeURIComponent(zone)}/capacity`, change);
  }

  /**
   * Declares a bucket of the storage API: its location, that nothing in it can be read
   * (`forbidden`), or that its objects can be read but not written (`readOnly`).
   */
  async setBucket(name: string, settings: { location?: string; forbidden?: boolean; readOnly?: boolean }): Promise<BucketView> {
    return this.call<BucketView>('POST', `buckets/${encodeURIComponent(name)}`, settings);
  }

  /** Sets a regional quota limit (e.g. NVIDIA_L4_GPUS, PREEMPTIBLE_NVIDIA_L4_GPUS); null restores the default. */
  async setQuota(project: string, region: string, metric: string, limit: number | null): Promise<{ metric: string; limit: number; usage: number }[]> {
    return (await this.call<{ quotas: { metric: string; limit: number; usage: number }[] }>('POST', `projects/${encodeURIComponent(project)}/regions/${encodeURIComponent(region)}/quotas`, { metric, limit })).quotas;
  }

  /** Sets a project-wide quota limit (GPUS_ALL_REGIONS); null restores the emulator's default. */
  async setProjectQuota(project: string, metric: string, limit: number | null): Promise<{ metric: string; limit: number; usage: number }[]> {
    return (await this.call<{ quotas: { metric: string; limit: number; usage: number }[] }>('POST', `projects/${encodeURIComponent(project)}/quotas`, { metric, limit })).quotas;
  }

  /** The project-wide quotas of a project, with limit and usage (as projects.get lists them). */
  async projectQuotas(project: string): Promise<{ metric: string; limit: number; usage: number }[]> {
    return (await this.call<{ quotas: { metric: string; limit: number; usage: number }[] }>('GET', `projects/${encodeURIComponent(project)}/quotas`)).quotas;
  }

  /**
   * Preempts a spot VM as GCE does (preempted flag, SIGTERM, notice, SIGKILL), now or
   * `afterSeconds` emulated seconds from now. `project` undefined: the one instance of
   * that name in the zone, whatever its project.
   */
  preempt(project: string | undefined, zone: string, name: string, options: { afterSeconds?: number } = {}): Promise<{ preemptAt: string; instance: AdminInstanceView }> {
    const path = `${project ? `projects/${encodeURIComponent(project)}/` : ''}zones/${encodeURIComponent(zone)}/instances/${encodeURIComponent(name)}/preempt`;
    return this.call('POST', path, options);
  }

  async instances(): Promise<AdminInstanceView[]> {
    return (await this.call<{ instances: AdminInstanceView[] }>('GET', 'instances')).instances;
  }

  billing(project?: string): Promise<BillingResponse> {
    return this.call('GET', `billing${project ? `?project=${encodeURIComponent(project)}` : ''}`);
  }

  async prices(zone?: string): Promise<PriceView[]> {
    return (await this.call<{ prices: PriceView[] }>('GET', `prices${zone ? `?zone=${encodeURIComponent(zone)}` : ''}`)).prices;
  }

  /** Calls to the GCE API by project and method since the emulator started or the last reset. */
  apiUsage(project?: string): Promise<ApiUsageView> {
    return this.call('GET', `api-usage${project ? `?project=${encodeURIComponent(project)}` : ''}`);
  }

  /** Zeroes the call counters (a benchmark resets them when its measurement starts). */
  resetApiUsage(): Promise<ApiUsageView> {
    return this.call('DELETE', 'api-usage');
  }

  /** The rate quota groups, their limits, and each project's use of the current interval. */
  rateQuotas(project?: string): Promise<RateQuotaView> {
    return this.call('GET', `rate-quotas${project ? `?project=${encodeURIComponent(project)}` : ''}`);
  }

  /**
   * Changes rate quotas at runtime, e.g. `{ limits: { read_requests_per_region: 5 }, windowSeconds: 2 }`;
   * with `project`, for that project only; a null limit restores the default.
   */
  setRateQuotas(change: RateQuotaChange): Promise<RateQuotaView> {
    return this.call('POST', 'rate-quotas', change);
  }

  /** What synthetic guests run (emulators started with `guest: 'synthetic'`), and how many run now. */
  syntheticGuests(): Promise<SyntheticGuestsView> {
    return this.call('GET', 'synthetic-guests');
  }

  /** Changes the run of synthetic guests booted from now on, e.g. `{ steps: 50, stepSeconds: 2, checkpointEvery: 10 }`. */
  setSyntheticGuests(change: Partial<SyntheticGuestConfig>): Promise<SyntheticGuestsView> {
    return this.call('POST', 'synthetic-guests', change);
  }

  /** The Billing Catalog the emulator serves: access, and the rates changed from its catalog. */
  billingCatalog(): Promise<BillingCatalogView> {
    return this.call('GET', 'billing-catalog');
  }

  /**
   * Changes the Billing Catalog: `{ access: 'denied' }` answers 403 PERMISSION_DENIED;
   * `{ rates: [{ region, rate: 'gpu:nvidia-l4', model: 'spot', usdPerHour: 0.5 }] }` changes
   * a rate (null restores the catalog's), for the SKUs served and the VMs billed alike.
   */
  setBillingCatalog(change: z.input<typeof BillingCatalogAdminBody>): Promise<BillingCatalogView> {
    return this.call('POST', 'billing-catalog', change);
  }

  gpuTelemetry(): Promise<GpuTelemetryView> {
    return this.call('GET', 'gpu-telemetry');
  }

  /** What every VM's stand-in nvidia-smi reports from now on (null: the emulator's default). */
  setGpuTelemetry(reading: GpuTelemetry | null): Promise<GpuTelemetryView> {
    return this.call('POST', 'gpu-telemetry', reading ?? { utilisation: null });
  }

  /** One VM's own reading, over the default (null: back to the default). */
  setInstanceGpuTelemetry(zone: string, name: string, reading: GpuTelemetry | null): Promise<{ instance: string; gpuTelemetry: GpuTelemetry }> {
    return this.call('POST', `zones/${zone}/instances/${name}/gpu-telemetry`, reading ?? { utilisation: null });
  }

  injectFault(spec: FaultSpec): Promise<FaultRule> {
    return this.call('POST', 'faults', spec);
  }

  async faults(): Promise<FaultRule[]> {
    return (await this.call<{ faults: FaultRule[] }>('GET', 'faults')).faults;
  }

  async clearFaults(): Promise<void> {
    await this.call('DELETE', 'faults');
  }
}
