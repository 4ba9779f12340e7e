/** A Temporal client from the standard environment (TEMPORAL_ADDRESS, profiles, TLS). */
import { Client, Connection } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';

export async function connectClient(): Promise<Client> {
  const { connectionOptions, namespace } = loadClientConnectConfig();
  const connection = await Connection.connect({ address: '127.0.0.1:7233', ...connectionOptions });
  return new Client({ connection, namespace: namespace ?? 'default' });
}
