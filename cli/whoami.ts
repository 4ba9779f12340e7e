/**
 * `sterna whoami [--json]`: the namespace and identity every other command acts as, from
 * Temporal's environment configuration (client/identity.ts), and whether the server lets
 * them read that namespace.
 */
import type { Command } from 'commander';
import { whoami, type Whoami } from '../client/identity';
import { ExitCode } from './report';

export function whoamiLines(w: Whoami): string[] {
  const c = w.credentials;
  const who =
    c.kind === 'api-key'
      ? c.jwt
        ? `API key: a JWT for ${c.jwt.subject ?? '(no subject)'}${c.jwt.issuer ? ` from ${c.jwt.issuer}` : ''}${c.jwt.expiresAt ? `, ${c.jwt.expired ? 'EXPIRED' : 'expires'} ${c.jwt.expiresAt}` : ''}`
        : 'API key (not a JWT: its permissions are the server\'s to say)'
      : c.kind === 'mtls'
        ? `client certificate ${c.certificate.subject} (issuer ${c.certificate.issuer}, valid to ${c.certificate.validTo})`
        : 'no credentials';
  const lines = [
    `namespace   ${w.namespace}`,
    `server      ${w.address}${w.tls ? ' (TLS)' : ''}, profile ${w.profile}`,
    `credentials ${who}`,
  ];
  if (w.permissionsHere) lines.push(`permissions ${w.permissionsHere.length > 0 ? w.permissionsHere.join(', ') : `none for ${w.namespace}`} (as the token says; the server decides)`);
  lines.push(`identity    ${w.identity} (what Temporal records in the histories of what you do)`);
  if (w.server) lines.push(w.server.namespaceReadable ? `access      the server lets these credentials read ${w.namespace}` : `access      ${w.server.problem}`);
  return lines;
}

export function addWhoamiCommand(program: Command): void {
  program
    .command('whoami')
    .description('the namespace, credentials and identity sterna acts as (Temporal\'s environment configuration: TEMPORAL_PROFILE, TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS files), and whether the server lets them read the namespace')
    .option('--json', 'print {profile, address, namespace, tls, credentials, identity, permissionsHere, server}')
    .action(async (opts: { json?: boolean }) => {
      const w = await whoami();
      if (opts.json) console.log(JSON.stringify(w));
      else for (const line of whoamiLines(w)) console.log(line);
      if (w.server && !w.server.namespaceReadable) process.exitCode = ExitCode.Failed;
    });
}
