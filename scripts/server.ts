/**
 * `npm run server`: Sterna's Temporal server (temporal-server/), with a persistent SQLite file
 * under .state/, the web UI on :8233 and the frontend on :7233, and the codec server
 * (:8234) that lets the UI show the runs' encrypted payloads decoded. Stops on Ctrl-C.
 *
 * With no payload key configured it creates one at ~/.config/sterna/codec-keys (outside
 * the repository), which the worker and the CLI on this machine then find by default.
 */
import { join } from 'node:path';
import { addKeyToFile, defaultKeyFile, loadCodecKeys } from '../config/codec-keys';
import { codecServerConfig } from '../config/codec-server-config';
import { startCodecServer } from '../config/codec-server';
import { sternaPayloadCodec } from '../config/data-converter';
import { startTemporalServer } from '../config/temporal-server-process';
import { sternaSearchAttributes } from '../workflows/search-attributes';

const stateDir = join(__dirname, '..', '..', '.state');

async function main(): Promise<void> {
  if (!loadCodecKeys()) {
    const id = addKeyToFile(defaultKeyFile());
    console.log(`created payload key ${id} in ${defaultKeyFile()} (mode 600; see docs/security.md, "Encrypted payloads")`);
  }
  const codec = await startCodecServer({ codec: sternaPayloadCodec(), ...codecServerConfig() });
  const server = await startTemporalServer({
    port: 7233,
    uiPort: 8233,
    dbFile: join(stateDir, 'temporal.sqlite'),
    logFile: join(stateDir, 'temporal-server.log'),
    uiCodecEndpoint: codec.url,
  }).catch(async (err: Error) => {
    await codec.close();
    throw err;
  });
  console.log(`Temporal server ready at ${server.address} (namespace ${server.namespace})`);
  console.log(`Web UI: ${server.uiUrl} (payloads decoded through the codec server at ${codec.url})`);
  console.log(`Search attributes: ${sternaSearchAttributes.map((k) => `${k.name}=${k.type}`).join(', ')}`);
  const stop = () => void Promise.all([server.stop(), codec.close()]).then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
