/**
 * The Compute Engine checks before a run: the credentials reach the project
 * (`projects.get`), the project's GPUS_ALL_REGIONS quota has room, the spec's accelerators
 * are offered where it allows, and the regional GPU quota of every accelerator, region and
 * provisioning model it allows (`regions.get`). Through the same `@google-cloud/compute`
 * clients the provider uses (activities/providers/gce-clients.ts), against Google or the
 * emulator alike.
 *
 * GCE's quota rules, as the emulator models them (emulator/capacity.ts): standard VMs use
 * NVIDIA_<type>_GPUS; spot and flex-start VMs use PREEMPTIBLE_NVIDIA_<type>_GPUS, or the
 * standard metric in a region without preemptible quota; every GPU also counts against the
 * project's GPUS_ALL_REGIONS, which is 0 on a new project.
 *
 * A region without room is a warning while some other allowed choice has room (placement
 * skips it), and blocking when no choice has: then the run could only fail, zone by zone.
 */
import { quotaMetric as catalogQuotaMetric } from '../../config/catalog';
import { type CapacityRequest, type Finding, ProvisioningModel, regionOf } from '../../workflows/api';
import type { ComputeClients } from '../providers/gce-clients';
import { isRateLimited, isTransient } from '../providers/transient';

export const GPUS_ALL_REGIONS = 'GPUS_ALL_REGIONS';
const PREEMPTIBLE = 'PREEMPTIBLE_';
// Async iterators page lazily anyway; saying so silences gax's AutopaginateTrueWarning.
const NO_AUTOPAGINATE = { autoPaginate: false };

export interface GceTarget {
  project: string;
  clients: Pick<ComputeClients, 'projects' | 'regions' | 'acceleratorTypes'>;
  /** The emulator's base URL when the clients talk to it; fixes then also say how to change it there. */
  emulatorEndpoint?: string;
}

/** What a run of the spec may ask GCE for. */
export interface GpuNeed {
  /** Each accelerator the spec accepts, with the GPUs one placement takes (count x nodes). */
  accelerators: { type: string; gpus: number }[];
  models: readonly ProvisioningModel[];
  regions?: CapacityRequest['regions'];
  zones?: CapacityRequest['zones'];
}

interface Quota {
  limit: number;
  usage: number;
}

/** Every GCE check for `need` (undefined: only the credentials and one GPU of GPUS_ALL_REGIONS). */
export async function checkGce(target: GceTarget, need: GpuNeed | undefined): Promise<Finding[]> {
  const { project, clients } = target;
  let projectQuotas: Map<string, Quota>;
  try {
    const [resource] = await clients.projects.get({ project });
    projectQuotas = quotaMap(resource.quotas);
  } catch (err) {
    return [{ check: 'gce:project', ok: false, ...computeApiProblem(err, target), ...transientOf(err) }];
  }
  const findings: Finding[] = [{ check: 'gce:project', ok: true }];
  const smallest = need ? Math.min(...need.accelerators.map((a) => a.gpus)) : 1;
  const largest = need ? Math.max(...need.accelerators.map((a) => a.gpus)) : 1;
  const global = projectQuotas.get(GPUS_ALL_REGIONS);
  const check = `quota:${GPUS_ALL_REGIONS}`;
  const gpusText = (n: number) => `${n} GPU${n === 1 ? '' : 's'}`;
  if (!global) {
    findings.push({ check, ok: true, problem: `projects.get lists no ${GPUS_ALL_REGIONS} quota for ${project}: not checked` });
  } else if (global.limit < smallest) {
    findings.push({
      check,
      ok: false,
      problem: `the project's ${GPUS_ALL_REGIONS} quota is ${fmt(global.limit)}: a run needing ${gpusText(smallest)} cannot start in any region${global.limit === 0 ? ' (a new project has 0)' : ''}`,
      fix: quotaFix(target, GPUS_ALL_REGIONS, undefined, Math.max(smallest, global.usage + smallest)),
    });
  } else if (global.limit < largest) {
    findings.push({ check, ok: true, problem: `the project's ${GPUS_ALL_REGIONS} quota is ${fmt(global.limit)}: choices needing ${gpusText(largest)} can never start`, fix: quotaFix(target, GPUS_ALL_REGIONS, undefined, largest) });
  } else if (global.limit - global.usage < smallest) {
    // Other VMs hold the GPUs now: the run can start once they are released.
    findings.push({ check, ok: true, problem: `${fmt(global.usage)} of the project's ${fmt(global.limit)} ${GPUS_ALL_REGIONS} are in use now: a run needing ${gpusText(smallest)} waits until some are released`, fix: quotaFix(target, GPUS_ALL_REGIONS, undefined, global.usage + smallest) });
  } else {
    findings.push({ check, ok: true });
  }
  if (!need) return findings;
  try {
    findings.push(...(await checkRegional(target, need, global?.limit ?? Infinity)));
  } catch (err) {
    findings.push({ check: 'quota:regions', ok: false, ...computeApiProblem(err, target), ...transientOf(err) });
  }
  return findings;
}

/** The accelerators' zones, then each region's quotas (one regions.get per region). */
async function checkRegional(target: GceTarget, need: GpuNeed, globalLimit: number): Promise<Finding[]> {
  const { project, clients } = target;
  const zonesOf = new Map<string, string[]>();
  for await (const [scope, list] of clients.acceleratorTypes.aggregatedListAsync({ project }, NO_AUTOPAGINATE)) {
    const zone = scope.replace(/^zones\//, '');
    for (const type of list.acceleratorTypes ?? []) if (type.name) zonesOf.set(type.name, [...(zonesOf.get(type.name) ?? []), zone]);
  }
  const unoffered: Omit<Finding, 'ok'>[] = [];
  const regionsOf = new Map<string, string[]>();
  for (const { type } of need.accelerators) {
    const offered = zonesOf.get(type) ?? [];
    const allowed = offered.filter((zone) => within(zone, need.zones) && within(regionOf(zone), need.regions));
    regionsOf.set(type, [...new Set(allowed.map(regionOf))].sort());
    if (allowed.length === 0) {
      unoffered.push({
        check: `gce:accelerator:${type}`,
        problem: offered.length === 0 ? `GCE offers no ${type} to project ${project} in any zone` : `no zone the spec allows offers ${type} (GCE offers it in ${offered.slice(0, 8).join(', ')}${offered.length > 8 ? ', ...' : ''})`,
        fix: offered.length === 0 ? `check the type's name: \`gcloud compute accelerator-types list --project=${project}\`` : 'allow one of those zones or their regions in placement.zones / placement.regions',
      });
    }
  }
  const regions = [...new Set([...regionsOf.values()].flat())].sort();
  const quotasByRegion = new Map(
    await Promise.all(regions.map(async (region) => [region, quotaMap((await target.clients.regions.get({ project, region }))[0].quotas)] as const)),
  );

  // One finding per (region, metric) asked for: a spot and a flex-start VM ask for the same one.
  const choices = new Map<string, Choice>();
  for (const { type, gpus } of need.accelerators) {
    const base = catalogQuotaMetric(type);
    for (const region of regionsOf.get(type) ?? []) {
      const quotas = quotasByRegion.get(region)!;
      for (const model of need.models) {
        if (!base) {
          choices.set(`quota:${region}:${type}`, { check: `quota:${region}:${type}`, gpus, fit: 'now', problem: `no GPU quota metric is known for ${type}: its regional quota was not checked` });
          continue;
        }
        const metric = model === ProvisioningModel.OnDemand ? base : `${PREEMPTIBLE}${base}`;
        const check = `quota:${region}:${metric}`;
        if (!choices.has(check)) choices.set(check, regionalChoice(target, check, region, metric, base, quotas, gpus, model));
      }
    }
  }
  // A run that cannot fit anywhere could only fail, zone after zone: that blocks it. One
  // that fits somewhere, if perhaps only once other VMs release their GPUs, goes ahead.
  const usable = [...choices.values()].some((c) => c.fit !== 'never' && c.gpus <= globalLimit);
  const anyOffered = need.accelerators.some(({ type }) => (regionsOf.get(type) ?? []).length > 0);
  // An accelerator offered nowhere the spec allows blocks the run only if none of the others is offered either.
  const findings: Finding[] = unoffered.map((f) => ({ ...f, ok: anyOffered }));
  for (const c of choices.values()) {
    if (c.fit === 'now') findings.push({ check: c.check, ok: true, ...(c.problem ? { problem: c.problem } : {}) });
    else if (c.fit === 'later') findings.push({ check: c.check, ok: true, problem: `${c.problem}; the run waits for them or places elsewhere`, fix: c.fix });
    else findings.push({ check: c.check, ok: usable, problem: usable ? `${c.problem}; placement skips it while other choices have room` : c.problem, fix: c.fix });
  }
  return findings;
}

/** A region x metric: room now, room once other VMs release GPUs ('later'), or a limit too small ('never'). */
interface Choice {
  check: string;
  /** GPUs one placement takes there (it must fit GPUS_ALL_REGIONS too). */
  gpus: number;
  fit: 'now' | 'later' | 'never';
  problem?: string;
  fix?: string;
}

/** Whether `gpus` more fit the region's quota for one VM of `model`, and if not, why and what to request. */
function regionalChoice(target: GceTarget, check: string, region: string, metric: string, base: string, quotas: Map<string, Quota>, gpus: number, model: ProvisioningModel): Choice {
  const what = `${gpus} ${base.replace(/^NVIDIA_|_GPUS$/g, '')} GPU${gpus === 1 ? '' : 's'} on ${modelName(model)} VMs`;
  const asked = quotas.get(metric);
  if (!asked) return { check, gpus, fit: 'now', problem: `regions.get lists no ${metric} in ${region}: not checked` };
  // GCE: where a project has no preemptible quota, spot VMs use the standard quota.
  const fallback = metric !== base && asked.limit === 0;
  const quota = fallback ? (quotas.get(base) ?? { limit: 0, usage: 0 }) : asked;
  const said = fallback
    ? `${region} has no ${metric} quota (limit 0), and ${base}, which spot VMs use then, has ${fmt(Math.max(0, quota.limit - quota.usage))} of ${fmt(quota.limit)} free`
    : `${metric} in ${region} has ${fmt(Math.max(0, quota.limit - quota.usage))} of ${fmt(quota.limit)} free`;
  if (quota.limit - quota.usage >= gpus) return { check, gpus, fit: 'now' };
  if (quota.limit >= gpus) return { check, gpus, fit: 'later', problem: `${said} (${fmt(quota.usage)} in use now): ${what} need ${gpus}`, fix: quotaFix(target, metric, region, (fallback ? 0 : asked.usage) + gpus) };
  return { check, gpus, fit: 'never', problem: `${said}: ${what} need ${gpus}`, fix: quotaFix(target, metric, region, (fallback ? 0 : asked.usage) + gpus) };
}

function modelName(model: ProvisioningModel): string {
  if (model === ProvisioningModel.Spot) return 'spot';
  if (model === ProvisioningModel.FlexStart) return 'flex-start';
  return 'on-demand';
}

/** The console's name of a quota: "GPUs (all regions)", "Preemptible NVIDIA L4 GPUs". */
function displayName(metric: string): string {
  if (metric === GPUS_ALL_REGIONS) return 'GPUs (all regions)';
  const preemptible = metric.startsWith(PREEMPTIBLE);
  const words = (preemptible ? metric.slice(PREEMPTIBLE.length) : metric).replace(/_GPUS$/, '').split('_').join(' ');
  return `${preemptible ? 'Preemptible ' : ''}${words} GPUs`;
}

/** How to ask for at least `atLeast` of a quota: the console page and the gcloud command (and the emulator's switch). */
export function quotaFix(target: GceTarget, metric: string, region: string | undefined, atLeast: number): string {
  const quotaId = `${metric.replace(/_/g, '-')}-per-project${region ? '-region' : ''}`;
  const where = region ? ` in region ${region}` : '';
  const gcloud = `gcloud quotas preferences create --service=compute.googleapis.com --project=${target.project} --quota-id=${quotaId} --preferred-value=${atLeast}${region ? ` --dimensions=region=${region}` : ''}`;
  const console = `Google Cloud console, IAM & Admin > Quotas & System Limits (https://console.cloud.google.com/iam-admin/quotas?project=${target.project}), filter "${displayName(metric)}"${where}, Edit quota`;
  let fix = `request a ${metric} quota of at least ${atLeast}${where}: ${console}; or \`${gcloud}\``;
  if (target.emulatorEndpoint) {
    const path = region ? `projects/${target.project}/regions/${region}/quotas` : `projects/${target.project}/quotas`;
    fix += `. On the emulator: POST ${target.emulatorEndpoint}/emulator/v1/${path} {"metric": "${metric}", "limit": ${atLeast}}${region ? '' : `, or start it with --gpus-all-regions ${atLeast}`}`;
  }
  return fix;
}

/** Marks a finding whose API call failed for a reason that passes (workflows/checks.ts `transient`). */
function transientOf(err: unknown): { transient?: true } {
  return isTransient(err) ? { transient: true } : {};
}

/** What failed reaching the Compute API, and what to do about it. */
export function computeApiProblem(err: unknown, target: GceTarget): { problem: string; fix: string } {
  const e = err as { code?: number | string; httpStatusCode?: number; message?: string } | undefined;
  // google-gax 6 keeps what GCE answered in httpStatusCode and its gRPC mapping in code.
  const status = e?.httpStatusCode ?? e?.code;
  const said = apiMessage(err);
  const project = target.project;
  const where = target.emulatorEndpoint ?? 'compute.googleapis.com';
  if (/Could not load the default credentials|Could not refresh access token|invalid_grant|UNAUTHENTICATED|invalid authentication credentials/i.test(said) || status === 401 || status === 16) {
    return { problem: `no valid Google Cloud credentials for the Compute API (${said})`, fix: 'run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file; on a Google Cloud VM or GKE, attach a service account' };
  }
  if (/has not been used in project|it is disabled|SERVICE_DISABLED|accessNotConfigured/i.test(said)) {
    return { problem: `the Compute Engine API is not enabled in project ${project} (${said})`, fix: `\`gcloud services enable compute.googleapis.com --project=${project}\`` };
  }
  // Before the 403 below: GCE refuses a call over a per-minute rate quota with a 403 too
  // (reason rateLimitExceeded, which google-gax 6 keeps in the error's reason and raw body,
  // no longer in its message); that one passes, and is no missing permission.
  if (isRateLimited(err)) {
    return { problem: `the Compute API refused the call for the project's rate quota (${said})`, fix: 'retry in a minute; if it persists, other clients of the project use its read quota up' };
  }
  if (status === 403 || status === 7) {
    return { problem: `these credentials may not read project ${project} (${said})`, fix: `grant them roles/compute.instanceAdmin.v1 on the project: \`gcloud projects add-iam-policy-binding ${project} --member=<the worker's principal> --role=roles/compute.instanceAdmin.v1\`` };
  }
  if (status === 404 || status === 5) {
    return { problem: `no project ${project} (${said})`, fix: 'set STERNA_GCE_PROJECT to the project id (`gcloud projects list` shows them)' };
  }
  if (/ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|socket hang up|deadline/i.test(`${said} ${String(e?.code ?? '')}`)) {
    return {
      problem: `the Compute API at ${where} did not answer (${said})`,
      fix: target.emulatorEndpoint ? `start the emulator (\`npm run emulator -- --port ${new URL(target.emulatorEndpoint).port} --gpus-all-regions 16\`) or correct STERNA_GCE_ENDPOINT` : 'check this machine reaches compute.googleapis.com (network, proxy)',
    };
  }
  return { problem: `the Compute API failed for project ${project} (${said})`, fix: 'see the message; `gcloud compute project-info describe --project=' + project + '` makes the same call' };
}

/** The readable part of a Google API error: gax puts GCE's JSON error body in the message. */
function apiMessage(err: unknown): string {
  const message = (err as Error)?.message ?? String(err);
  try {
    return ((JSON.parse(message) as { error?: { message?: string } }).error?.message ?? message).slice(0, 300);
  } catch {
    return message.slice(0, 300);
  }
}

function quotaMap(quotas: readonly { metric?: string | null; limit?: number | null; usage?: number | null }[] | null | undefined): Map<string, Quota> {
  return new Map((quotas ?? []).filter((q) => q.metric).map((q) => [q.metric!, { limit: q.limit ?? 0, usage: q.usage ?? 0 }]));
}

function fmt(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function within(value: string, rule?: { allow?: string[]; deny?: string[] }): boolean {
  if (!rule) return true;
  if (rule.deny?.includes(value)) return false;
  return !rule.allow || rule.allow.includes(value);
}
