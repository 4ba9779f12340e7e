/** A Temporal client from the standard environment (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, profiles, TLS, API key), with Sterna's payload encryption. */
import { connect as tcpConnect } from 'node:net';
import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import { loadClientConfigProfile, loadClientConnectConfig } from '@temporalio/envconfig';
import { callerIdentity, credentialsOf } from './credentials';
import { markPlaintext, plaintextAs, sternaClientDataConverter } from './encryption';
import { unreachable } from './errors';

export const DEFAULT_ADDRESS = '127.0.0.1:7233';

export interface ConnectOptions {
  /** host:port of the Temporal frontend; default TEMPORAL_ADDRESS (or the profile's), else 127.0.0.1:7233. */
  address?: string;
  /** Default TEMPORAL_NAMESPACE (or the profile's), else `default`. */
  namespace?: string;
  /**
   * The opt-out: send and store payloads (the spec, statuses, results) in plain text, as
   * `temporal workflow start` without a codec would. Without it, connecting fails when no
   * codec key is configured.
   */
  plaintextPayloads?: boolean;
}

/**
 * A client of the server the environment names (or `options`), whose payloads are
 * encrypted with the environment's keys (codec/data-converter.ts); a `PayloadEncryption`
 * SternaClientError when there are none, unless `plaintextPayloads` opts out.
 * Throws a `ServerUnreachable` SternaClientError naming the address and the reason when
 * no server answers. A refused connection or an unknown host is known at once, but the
 * gRPC client would only say "Failed to connect before the deadline", 10 s later; a
 * plain TCP connection first tells which.
 */
export async function connectFromEnvironment(options: ConnectOptions = {}): Promise<Client> {
  const dataConverter = options.plaintextPayloads ? undefined : sternaClientDataConverter();
  const { connection, namespace } = await connectionFromEnvironment(options);
  // Whose credentials these are, in the history of every request the client makes.
  const identity = callerIdentity(credentialsOf(loadClientConfigProfile()));
  const client = new Client({ connection, namespace, dataConverter, identity });
  return options.plaintextPayloads ? markPlaintext(client) : client;
}

/**
 * A client of another namespace on `client`'s connection: the same credentials, identity
 * and payload encryption (a platform admin's report across the teams' namespaces).
 */
export function inNamespace(client: Client, namespace: string): Client {
  if (namespace === client.options.namespace) return client;
  return plaintextAs(client, new Client({ connection: client.connection, namespace, dataConverter: client.options.dataConverter, identity: client.options.identity }));
}

/** The Temporal address the environment names (TEMPORAL_ADDRESS, a profile), else 127.0.0.1:7233. */
export function addressFromEnvironment(): string {
  return loadClientConnectConfig().connectionOptions.address ?? DEFAULT_ADDRESS;
}

/**
 * The connection alone, for what needs no payload codec (`sterna check` reads the
 * namespace's search attributes even where no key is configured yet). Throws as
 * `connectFromEnvironment` does.
 */
export async function connectionFromEnvironment(options: Pick<ConnectOptions, 'address' | 'namespace'> = {}): Promise<{ connection: Connection; namespace: string; address: string }> {
  const { connectionOptions, namespace: envNamespace } = loadClientConnectConfig();
  const address = options.address ?? connectionOptions.address ?? DEFAULT_ADDRESS;
  const namespace = options.namespace ?? envNamespace ?? 'default';
  const refused = await tcpRefusal(address);
  if (refused) throw unreachable(address, refused);
  try {
    const connection = await Connection.connect({ ...connectionOptions, address, interceptors: [sizeAwareRetry()] });
    return { connection, namespace, address };
  } catch (err) {
    throw unreachable(address, err);
  }
}

/**
 * The SDK's gRPC retry policy, except for a request over the server's size limit. The
 * SDK retries RESOURCE_EXHAUSTED, usually a rate limit worth waiting out; but "received
 * message larger than max" fails the same way every time, after some 40 s of backoff.
 * For a Connection built by hand: `Connection.connect({ interceptors: [sizeAwareRetry()] })`.
 */
export function sizeAwareRetry(): ReturnType<typeof makeGrpcRetryInterceptor> {
  const defaults = defaultGrpcRetryOptions();
  return makeGrpcRetryInterceptor({
    ...defaults,
    retryableDecider: (attempt, status) => !/larger than max/i.test(status.details) && defaults.retryableDecider(attempt, status),
  });
}

/** The error of a TCP connection to `host:port` that fails outright; undefined if it connects, hangs, or the address is not host:port. */
function tcpRefusal(address: string): Promise<Error | undefined> {
  const match = /^\[?([^\]/]+?)\]?:(\d+)$/.exec(address);
  if (!match) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const socket = tcpConnect({ host: match[1], port: Number(match[2]) });
    const done = (err?: Error) => {
      socket.destroy();
      resolve(err);
    };
    socket.setTimeout(2000, () => done());
    socket.once('connect', () => done());
    socket.once('error', (err) => done(err));
  });
}
