/**
 * The Compute clients the GCE provider and the pre-run checks (activities/check) call,
 * built on the descriptors those six services reach rather than on all of Compute.
 *
 * Each generated client loads its package's descriptors for every Compute API version
 * (v1, v1beta, v1small; 2,143 v1 types alone) into one protobufjs Root. Measured
 * (bench/client-footprint/main.ts, with the first five services): that Root is about 35 MB of
 * the worker's heap and 80 MB of its RSS; those five services reached 192 of the v1 types,
 * and their Root was 2 MB. Projects (projects.get, for GPUS_ALL_REGIONS) brings it to 219.
 *
 * The clients are the package's own, and every call goes through them unchanged. They are
 * handed a google-gax module (the constructor's `gaxInstance` parameter) whose
 * `GrpcClient` loads only the closure of these services' types. Nothing outside Compute v1
 * is cut: `google.protobuf` (Any), `google.rpc` and the API annotations stay whole. A type
 * the closure missed would fail every call that needs it, so the tests build this Root
 * with every reference resolved, and every provider test calls through it.
 */
import { createRequire } from 'node:module';
import * as gax from 'google-gax';
import { AcceleratorTypesClient, InstancesClient, ProjectsClient, RegionsClient, ZoneOperationsClient, ZonesClient } from '@google-cloud/compute/build/src/v1';

/** The Compute v1 services Sterna calls: the descriptors kept are the types these reach. */
export const COMPUTE_SERVICES = ['Instances', 'ZoneOperations', 'Regions', 'Zones', 'AcceleratorTypes', 'Projects'] as const;

export type ComputeClientOptions = ConstructorParameters<typeof InstancesClient>[0];

export interface ComputeClients {
  instances: InstancesClient;
  operations: ZoneOperationsClient;
  regions: RegionsClient;
  zones: ZonesClient;
  acceleratorTypes: AcceleratorTypesClient;
  /** projects.get: the project-wide quotas (GPUS_ALL_REGIONS), read by the pre-run checks. */
  projects: ProjectsClient;
}

type Json = gax.protobuf.INamespace & { nested?: Record<string, JsonType> };
type JsonType = Json & {
  fields?: Record<string, { type: string; keyType?: string }>;
  methods?: Record<string, { requestType: string; responseType: string }>;
};

/** The package's descriptors, as its clients load them (the same module, so no second copy). */
export function packageDescriptors(): Json {
  return createRequire(require.resolve('@google-cloud/compute/build/src/v1'))('../../protos/protos.json') as Json;
}

/** The package's descriptors with Compute cut to COMPUTE_SERVICES and the v1 types they reach. */
export function computeDescriptors(): Json {
  const all = packageDescriptors();
  const compute = all.nested?.google?.nested?.cloud?.nested?.compute as Json | undefined;
  const v1 = compute?.nested?.v1;
  const types = v1?.nested;
  if (!compute?.nested || !v1 || !types) throw new Error('@google-cloud/compute: its descriptors have no google.cloud.compute.v1; this module needs updating for the installed version');
  const kept = new Set<string>();
  const reach = (name: string): void => {
    // Scalars and types outside v1 (google.protobuf.Any) are not v1's to keep.
    const type = types[name];
    if (!type || kept.has(name)) return;
    kept.add(name);
    for (const field of Object.values(type.fields ?? {})) {
      reach(field.type);
      if (field.keyType) reach(field.keyType);
    }
    for (const method of Object.values(type.methods ?? {})) {
      reach(method.requestType);
      reach(method.responseType);
    }
  };
  for (const service of COMPUTE_SERVICES) {
    if (!types[service]?.methods) throw new Error(`@google-cloud/compute: no v1 service ${service} in its descriptors`);
    reach(service);
  }
  const cutV1: Json = { ...v1, nested: Object.fromEntries(Object.entries(types).filter(([name]) => kept.has(name))) };
  return withNested(all, ['google', 'cloud', 'compute'], { ...compute, nested: { v1: cutV1 } });
}

/** `root` with the namespace at `path` replaced (the rest shared, not copied). */
function withNested(root: Json, path: string[], replacement: Json): Json {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path;
  return { ...root, nested: { ...root.nested, [head]: withNested(root.nested![head], rest, replacement) } };
}

let cut: gax.protobuf.Root | undefined;

/** The cut Root, built once per process (every provider's clients share it). */
function cutRoot(): gax.protobuf.Root {
  cut ??= gax.protobuf.Root.fromJSON(computeDescriptors());
  return cut;
}

class CutGrpcClient extends gax.fallback.GrpcClient {
  override loadProtoJSON(): gax.protobuf.Root {
    return cutRoot();
  }
}

const cutGax = { ...gax, fallback: { ...gax.fallback, GrpcClient: CutGrpcClient } };

type ClientConfig = { interfaces: Record<string, { retry_codes?: Record<string, string[]>; methods: Record<string, { retry_codes_name?: string; timeout_millis?: number }> }> };

/** How long Sterna waits for one Compute call before it abandons it and tries again (transient.ts). */
export const READ_TIMEOUT_MS = 30_000;
/** GCE's operations.wait answers within about two minutes even when the operation is not done. */
export const WAIT_TIMEOUT_MS = 150_000;

/**
 * The client configuration of `service`: google-gax retries none of its methods, and each
 * method's call ends when Sterna stops waiting for it.
 *
 * No retry: google-gax 6 reports a REST error with the gRPC code it maps the HTTP status
 * to (a 503 or a refused connection is UNAVAILABLE, a 504 DEADLINE_EXCEEDED), so its own
 * retry now matches them and re-sends every idempotent Compute call (get, list,
 * getGuestAttributes, wait) for up to 600 s; gax 5's REST errors carried HTTP statuses,
 * which its retry never matched. Sterna rides out transient errors in one place,
 * transient.ts: bounded, jittered, aware of GCE's rate quotas, and under the caller's own
 * deadline (`withDeadline`). A second loop underneath would hide an outage inside one call
 * for ten minutes and keep calling after that deadline gave up, so these clients have none.
 *
 * The timeout: google-gax 6 arms an `AbortSignal.timeout` for each call's deadline and never
 * disarms it when the answer comes, and its listener holds the call's callback and so the
 * decoded answer until the timer fires. With the package's deadline (600 s) a worker kept
 * every answer of the last ten minutes (at 2,000 runs, 650 MB of its heap: docs/benchmarks/scale.md).
 * The deadline Sterna gives a call itself (30 s; `wait` 150 s; an insert its own, per call)
 * is the one google-gax gets, so it holds an answer no longer than Sterna would have waited.
 */
export function callConfig(service: (typeof COMPUTE_SERVICES)[number]): ClientConfig {
  const file = `./${service.replace(/(?<=[a-z])([A-Z])/g, '_$1').toLowerCase()}_client_config.json`;
  const config = createRequire(require.resolve('@google-cloud/compute/build/src/v1'))(file) as ClientConfig;
  const name = `google.cloud.compute.v1.${service}`;
  const methods = config.interfaces[name]?.methods;
  if (!methods) throw new Error(`@google-cloud/compute: no client configuration for ${name} in ${file}`);
  const timeoutOf = (method: string) => (service === 'ZoneOperations' && method === 'Wait' ? WAIT_TIMEOUT_MS : READ_TIMEOUT_MS);
  return {
    interfaces: {
      [name]: { retry_codes: { none: [] }, methods: Object.fromEntries(Object.keys(methods).map((method) => [method, { retry_codes_name: 'none', timeout_millis: timeoutOf(method) }])) },
    },
  };
}

export function computeClients(options: ComputeClientOptions): ComputeClients {
  const settings = (service: (typeof COMPUTE_SERVICES)[number]): ComputeClientOptions => ({ ...options, clientConfig: callConfig(service) });
  return {
    instances: new InstancesClient(settings('Instances'), cutGax),
    operations: new ZoneOperationsClient(settings('ZoneOperations'), cutGax),
    regions: new RegionsClient(settings('Regions'), cutGax),
    zones: new ZonesClient(settings('Zones'), cutGax),
    acceleratorTypes: new AcceleratorTypesClient(settings('AcceleratorTypes'), cutGax),
    projects: new ProjectsClient(settings('Projects'), cutGax),
  };
}
