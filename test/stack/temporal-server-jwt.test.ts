/**
 * Sterna's own Temporal server (temporal-server/) with Temporal's JWT authorization
 * switched on: the default claim mapper reads the `permissions` claim of a token signed by
 * a key from the JWKS this test serves, and the default authorizer decides. A team's
 * write permission is confined to its namespace; the system admin may act anywhere.
 */
import { strict as assert } from 'node:assert';
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { startTemporalServer, type TemporalServer } from '../../processes/temporal-server-process';
import { uniqueTaskQueue } from '../helpers/temporal';

/** gRPC's status code for a caller without the permission (grpc-js is not a direct dependency here). */
const PERMISSION_DENIED = 7;

interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

function newSigningKey(kid: string): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid, privateKey, publicKey };
}

const base64url = (value: object | Buffer) => (Buffer.isBuffer(value) ? value : Buffer.from(JSON.stringify(value))).toString('base64url');

/** An RS256 JWT as an identity provider would issue it. */
function token(key: SigningKey, subject: string, permissions: string[], expiresInSeconds = 3600): string {
  const now = Math.floor(Date.now() / 1000);
  const signingInput = `${base64url({ alg: 'RS256', typ: 'JWT', kid: key.kid })}.${base64url({ sub: subject, permissions, iat: now, exp: now + expiresInSeconds })}`;
  return `${signingInput}.${base64url(sign('sha256', Buffer.from(signingInput), key.privateKey))}`;
}

/** The gRPC status a failed call ended with (the client wraps it in a ServiceError). */
function grpcCode(err: unknown): number | undefined {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (typeof e.code === 'number') return e.code;
  }
  return undefined;
}

describe('Sterna Temporal server: JWT authorization', function () {
  this.timeout(30 * 60_000);
  const issuer = newSigningKey('sterna-test-key');
  const stranger = newSigningKey('sterna-test-key'); // same key id, a key the server never saw
  let jwks: Server;
  let server: TemporalServer;
  const connections: Connection[] = [];

  before(async () => {
    jwks = createServer((req, res) => {
      if (req.url !== '/jwks.json') return void res.writeHead(404).end();
      const jwk = { ...issuer.publicKey.export({ format: 'jwk' }), kid: issuer.kid, alg: 'RS256', use: 'sig' };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
    server = await startTemporalServer({
      headless: true,
      namespaces: ['team-a', 'team-b'],
      jwt: { jwksUrl, adminToken: token(issuer, 'admin', ['temporal-system:admin']) },
    });
  });

  after(async () => {
    await Promise.allSettled(connections.map((c) => c.close()));
    await server?.stop();
    await new Promise((resolve) => jwks?.close(resolve));
  });

  /** A client of `namespace` that presents `bearer` (none when undefined). */
  async function clientFor(namespace: string, bearer: string | undefined): Promise<Client> {
    // tls: false: this server serves plain gRPC, and an API key alone would make the client ask for TLS.
    const connection = await Connection.connect({ address: server.address, apiKey: bearer, tls: false });
    connections.push(connection);
    return new Client({ connection, namespace });
  }

  /**
   * Connects and starts a workflow (no worker needs to run it): the start itself is what is
   * authorized. A token the claim mapper cannot read (expired, unknown key) is refused
   * already at connect, whose first call (GetSystemInfo) it also checks.
   */
  async function tryStart(namespace: string, bearer: string | undefined): Promise<number | 'started'> {
    const taskQueue = uniqueTaskQueue('jwt');
    try {
      const client = await clientFor(namespace, bearer);
      await client.workflow.start('anyWorkflow', { taskQueue, workflowId: taskQueue });
      return 'started';
    } catch (err) {
      const code = grpcCode(err);
      if (code === undefined) throw err;
      return code;
    }
  }

  it('lets team-a:write start workflows in team-a but not in team-b', async () => {
    const teamA = token(issuer, 'alice', ['team-a:write']);
    assert.equal(await tryStart('team-a', teamA), 'started');
    assert.equal(await tryStart('team-b', teamA), PERMISSION_DENIED);
    assert.equal(await tryStart('default', teamA), PERMISSION_DENIED);
  });

  it('lets temporal-system:admin start workflows in any namespace', async () => {
    const admin = token(issuer, 'admin', ['temporal-system:admin']);
    for (const namespace of ['team-a', 'team-b', 'default']) assert.equal(await tryStart(namespace, admin), 'started', namespace);
  });

  it('refuses a read-only token, no token, an expired token and a token signed by an unknown key', async () => {
    assert.equal(await tryStart('team-a', token(issuer, 'reader', ['team-a:read'])), PERMISSION_DENIED);
    assert.equal(await tryStart('team-a', undefined), PERMISSION_DENIED);
    assert.equal(await tryStart('team-a', token(issuer, 'late', ['team-a:write'], -60)), PERMISSION_DENIED);
    assert.equal(await tryStart('team-a', token(stranger, 'mallory', ['temporal-system:admin'])), PERMISSION_DENIED);
  });

  it('lets team-a read its own workflows and not team-b\'s', async () => {
    const teamA = token(issuer, 'alice', ['team-a:read']);
    const list = async (namespace: string) => {
      try {
        const client = await clientFor(namespace, teamA);
        for await (const _ of client.workflow.list()) void _;
        return 'listed';
      } catch (err) {
        return grpcCode(err);
      }
    };
    assert.equal(await list('team-a'), 'listed');
    assert.equal(await list('team-b'), PERMISSION_DENIED);
  });
});
