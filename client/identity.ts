/**
 * Who the client acts as, and where: the namespace and credentials Temporal's environment
 * configuration gives it (@temporalio/envconfig: the TEMPORAL_PROFILE profile of the TOML
 * config file, overridden by TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
 * TEMPORAL_TLS_* variables), read the way every Temporal SDK and the `temporal` CLI read
 * them. `sterna whoami` prints it (docs/tenancy.md).
 *
 * A JSON Web Token's claims are decoded to say whose it is and which permissions it
 * carries; nothing here verifies it: the server does, on every call. So the answer also
 * says whether the server lets these credentials read the namespace.
 */
import { loadClientConfigProfile } from '@temporalio/envconfig';
import { connectionFromEnvironment, DEFAULT_ADDRESS } from './connect';
import { callerIdentity, credentialsOf, type Credentials } from './credentials';

export type { Credentials, TokenClaims } from './credentials';

export interface Whoami {
  /** The environment configuration profile (TEMPORAL_PROFILE, else `default`). */
  profile: string;
  address: string;
  namespace: string;
  tls: boolean;
  credentials: Credentials;
  /** The identity Temporal records in the history of what this client does (credentials.ts callerIdentity). */
  identity: string;
  /** The permissions of the token that bear on this namespace (its own and `temporal-system`'s). */
  permissionsHere?: string[];
  /** The server's answer: may these credentials read the namespace? A reason when not. */
  server?: { namespaceReadable: true } | { namespaceReadable: false; problem: string };
}

/** What the environment configuration says, without asking the server. */
export function whoamiFromEnvironment(env: NodeJS.ProcessEnv = process.env): Whoami {
  const profile = loadClientConfigProfile();
  const namespace = profile.namespace ?? 'default';
  const credentials = credentialsOf(profile);
  const tls = profile.tls ? profile.tls.disabled !== true : profile.apiKey !== undefined;
  const permissions = credentials.kind === 'api-key' ? credentials.jwt?.permissions : undefined;
  return {
    profile: env.TEMPORAL_PROFILE ?? 'default',
    address: profile.address ?? DEFAULT_ADDRESS,
    namespace,
    tls,
    credentials,
    identity: callerIdentity(credentials),
    ...(permissions ? { permissionsHere: permissions.filter((p) => p.startsWith(`${namespace}:`) || p.startsWith('temporal-system:')) } : {}),
  };
}

/** The environment's answer, and the server's: whether these credentials may read the namespace (DescribeNamespace). */
export async function whoami(): Promise<Whoami> {
  const local = whoamiFromEnvironment();
  // A token the server cannot accept (expired, unknown key) is refused already at connect.
  const connected = await connectionFromEnvironment().catch((err: unknown) => err as Error);
  if (connected instanceof Error) return { ...local, server: { namespaceReadable: false, problem: connected.message } };
  const { connection } = connected;
  try {
    await connection.workflowService.describeNamespace({ namespace: local.namespace });
    return { ...local, server: { namespaceReadable: true } };
  } catch (err) {
    const e = err as { code?: number; details?: string; message?: string };
    const reason = e.code === 7 ? `permission denied: these credentials may not read namespace ${local.namespace}` : e.code === 5 ? `the server has no namespace ${local.namespace}` : e.code === 16 ? 'unauthenticated: the server did not accept the credentials' : (e.details ?? e.message ?? String(err));
    return { ...local, server: { namespaceReadable: false, problem: reason } };
  } finally {
    await connection.close();
  }
}
