/**
 * Secret Manager, as much of it as a VM's agent uses, so that secret references resolve
 * in tests exactly as on GCP:
 *
 *   GET /v1/projects/P/secrets/S/versions/V:access    (V a number or "latest")
 *   Authorization: Bearer <the VM's token from its metadata server>
 *   -> { "name": "projects/P/secrets/S/versions/N", "payload": { "data": "<base64>" } }
 *
 * and the rules that make a misconfigured VM fail here as it would there: a token only
 * from a live VM's metadata server (401 otherwise), the VM's scopes must include
 * cloud-platform (Secret Manager accepts no narrower scope: 403
 * ACCESS_TOKEN_SCOPE_INSUFFICIENT), and a secret created with `accessors` (the IAM
 * members given roles/secretmanager.secretAccessor) answers only their service accounts.
 *
 * Secrets are set through the admin API and kept in memory only: they never reach the
 * emulator's state file or log.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { InstanceRecord } from './types';

export const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
const TOKEN_SECONDS = 3599;

interface StoredSecret {
  versions: Buffer[];
  /** Service-account emails allowed to read it; every one when absent. */
  accessors?: string[];
}

/** The service account a VM runs as: its first `serviceAccounts` entry (`default` is the project's compute SA). */
export function serviceAccountOf(i: InstanceRecord, projectNumber: string): { email: string; scopes: string[] } | undefined {
  const accounts = (i.resource.serviceAccounts ?? []) as { email?: string; scopes?: string[] }[];
  const first = accounts[0];
  if (!first) return undefined;
  const email = first.email && first.email !== 'default' ? first.email : `${projectNumber}-compute@developer.gserviceaccount.com`;
  return { email, scopes: first.scopes ?? [] };
}

/** Access tokens for VMs: an HMAC over the instance's identity with a key of this emulator process. */
export class AccessTokens {
  private readonly key = randomBytes(32);

  issue(i: InstanceRecord): { access_token: string; expires_in: number; token_type: 'Bearer' } {
    const who = Buffer.from(JSON.stringify([i.project, i.zone, i.name, i.id])).toString('base64url');
    return { access_token: `ya29.emulator.${who}.${this.sign(who)}`, expires_in: TOKEN_SECONDS, token_type: 'Bearer' };
  }

  /** The instance a token was issued to (project, zone, name, id), if the token is genuine. */
  verify(token: string): { project: string; zone: string; name: string; id: string } | undefined {
    const match = /^ya29\.emulator\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(token);
    if (!match) return undefined;
    const expected = Buffer.from(this.sign(match[1]));
    const given = Buffer.from(match[2]);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
    const [project, zone, name, id] = JSON.parse(Buffer.from(match[1], 'base64url').toString('utf8')) as string[];
    return { project, zone, name, id };
  }

  private sign(text: string): string {
    return createHmac('sha256', this.key).update(text).digest('base64url');
  }
}

export class SecretStore {
  private readonly secrets = new Map<string, StoredSecret>();

  /** Adds a version (1, 2, ...) to the secret, creating it; `accessors` replaces who may read it. */
  addVersion(project: string, secret: string, value: Buffer, accessors?: string[]): number {
    const key = `${project}/${secret}`;
    const stored = this.secrets.get(key) ?? { versions: [] };
    stored.versions.push(value);
    if (accessors) stored.accessors = [...accessors];
    this.secrets.set(key, stored);
    return stored.versions.length;
  }

  lookup(project: string, secret: string): StoredSecret | undefined {
    return this.secrets.get(`${project}/${secret}`);
  }
}

export interface SecretManagerContext {
  store: SecretStore;
  tokens: AccessTokens;
  projectNumber: string;
  findInstance(project: string, zone: string, name: string): InstanceRecord | undefined;
}

type Reply = { status: number; body: unknown };

function error(code: number, status: string, message: string, reason?: string): Reply {
  return { status: code, body: { error: { code, message, status, ...(reason ? { details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason, domain: 'googleapis.com' }] } : {}) } } };
}

const ACCESS_PATH = /^\/v1\/projects\/([^/]+)\/secrets\/([^/]+)\/versions\/([^/:]+):access$/;

export function handleSecretManager(ctx: SecretManagerContext, method: string, pathname: string, authorization: string | undefined): Reply {
  const match = ACCESS_PATH.exec(pathname);
  if (!match) return error(404, 'NOT_FOUND', `The requested URL ${pathname.slice(0, 200)} was not found on this server.`);
  if (method !== 'GET') return error(405, 'METHOD_NOT_ALLOWED', 'Only versions.access (GET ...:access) is served.');
  const [, project, secret, version] = match;
  const caller = ctx.tokens.verify(/^Bearer (.+)$/.exec(authorization ?? '')?.[1] ?? '');
  const instance = caller && ctx.findInstance(caller.project, caller.zone, caller.name);
  if (!caller || !instance || instance.id !== caller.id) {
    return error(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.');
  }
  const account = serviceAccountOf(instance, ctx.projectNumber);
  if (!account?.scopes.includes(CLOUD_PLATFORM_SCOPE)) {
    return error(403, 'PERMISSION_DENIED', 'Request had insufficient authentication scopes.', 'ACCESS_TOKEN_SCOPE_INSUFFICIENT');
  }
  const resource = `projects/${project}/secrets/${secret}/versions/${version}`;
  const stored = ctx.store.lookup(project, secret);
  const denied = error(403, 'PERMISSION_DENIED', `Permission 'secretmanager.versions.access' denied for resource '${resource}' (or it may not exist).`, 'IAM_PERMISSION_DENIED');
  if (stored?.accessors && !stored.accessors.includes(account.email)) return denied;
  const number = version === 'latest' ? stored?.versions.length ?? 0 : /^[1-9][0-9]{0,8}$/.test(version) ? Number(version) : 0;
  const value = stored?.versions[number - 1];
  if (!value) return error(404, 'NOT_FOUND', `Secret Version [${resource}] not found.`);
  return { status: 200, body: { name: `projects/${ctx.projectNumber}/secrets/${secret}/versions/${number}`, payload: { data: value.toString('base64') } } };
}
