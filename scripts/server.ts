/**
 * `npm run server`: the embedded Temporal dev server, with a persistent SQLite file
 * under .state/, the web UI on :8233 and the frontend on :7233. Stops on Ctrl-C.
 */
import { join } from 'node:path';
import { startDevServer } from '../config/dev-server';
import { sternaSearchAttributes } from '../workflows/search-attributes';

const stateDir = join(__dirname, '..', '..', '.state');

async function main(): Promise<void> {
  const server = await startDevServer({
    dbFile: join(stateDir, 'temporal.sqlite'),
    logFile: join(stateDir, 'temporal-server.log'),
  });
  console.log(`Temporal dev server ready at ${server.address} (namespace ${server.namespace})`);
  console.log(`Web UI: ${server.uiUrl}`);
  console.log(`Search attributes: ${sternaSearchAttributes.map((k) => `${k.name}=${k.type}`).join(', ')}`);
  const stop = () => void server.stop().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
