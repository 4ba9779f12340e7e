/**
 * Whose credentials the environment configuration holds, read without asking the server:
 * a JSON Web Token's claims (decoded, not verified: the server verifies them on every
 * call) or a client certificate's subject; and the identity a client built from them gives
 * Temporal, which the server records in the history of every request it makes (starts,
 * signals, updates, cancels).
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { ClientConfigProfile } from '@temporalio/envconfig';

export type Credentials =
  | { kind: 'api-key'; jwt?: TokenClaims }
  | { kind: 'mtls'; certificate: { subject: string; issuer: string; validTo: string } }
  | { kind: 'none' };

/** What a JWT says of itself (not verified here). */
export interface TokenClaims {
  subject?: string;
  issuer?: string;
  /** The `permissions` claim Temporal's default claim mapper reads, e.g. `team-a:write`. */
  permissions?: string[];
  expiresAt?: string;
  expired: boolean;
}

/** The claims of a JWT, or undefined when the key is not one (an opaque Temporal Cloud API key). */
export function claimsOf(apiKey: string, nowMs = Date.now()): TokenClaims | undefined {
  const parts = apiKey.split('.');
  if (parts.length !== 3) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as Record<string, unknown>;
    if (!claims || typeof claims !== 'object') return undefined;
    const exp = typeof claims.exp === 'number' ? claims.exp * 1000 : undefined;
    const permissions = Array.isArray(claims.permissions) ? claims.permissions.filter((p): p is string => typeof p === 'string') : undefined;
    return {
      ...(typeof claims.sub === 'string' ? { subject: claims.sub } : {}),
      ...(typeof claims.iss === 'string' ? { issuer: claims.iss } : {}),
      ...(permissions ? { permissions } : {}),
      ...(exp !== undefined ? { expiresAt: new Date(exp).toISOString() } : {}),
      expired: exp !== undefined && exp <= nowMs,
    };
  } catch {
    return undefined;
  }
}

/** The client certificate's subject, issuer and expiry. */
export function certificateOf(profile: ClientConfigProfile): { subject: string; issuer: string; validTo: string } | undefined {
  const source = profile.tls?.clientCert;
  if (!source) return undefined;
  const pem = 'path' in source ? readFileSync(source.path) : Buffer.from(source.data);
  const cert = new X509Certificate(pem);
  return { subject: cert.subject.replace(/\n/g, ', '), issuer: cert.issuer.replace(/\n/g, ', '), validTo: cert.validTo };
}

/** The credentials a profile carries. */
export function credentialsOf(profile: ClientConfigProfile): Credentials {
  if (profile.apiKey) {
    const jwt = claimsOf(profile.apiKey);
    return { kind: 'api-key', ...(jwt ? { jwt } : {}) };
  }
  const certificate = certificateOf(profile);
  return certificate ? { kind: 'mtls', certificate } : { kind: 'none' };
}

/**
 * The identity a client gives Temporal: whose credentials these are (a token's subject, a
 * certificate's common name), then the SDK's own `pid@host`, e.g. `alice (4121@laptop)`;
 * `pid@host` alone without either. The caller declares it and the server does not check
 * it against the credentials, but only credentials that may write the namespace can make
 * a request there at all.
 */
export function callerIdentity(credentials: Credentials): string {
  const process_ = `${process.pid}@${hostname()}`;
  const who = credentials.kind === 'api-key' ? credentials.jwt?.subject : credentials.kind === 'mtls' ? commonName(credentials.certificate.subject) : undefined;
  return who ? `${who.replace(/\p{Cc}/gu, '').slice(0, 128)} (${process_})` : process_;
}

/** CN of a subject as certificateOf writes it ("C=US, O=Org, CN=alice"). */
function commonName(subject: string): string | undefined {
  return /(?:^|, )CN=([^,]+)/.exec(subject)?.[1];
}
