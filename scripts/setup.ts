/** `npm run setup`: makes sure everything the demo and the tests need is installed. */
import { ensurePrometheus } from '../config/prometheus';
import { ensureTemporalCli } from '../config/temporal-cli';

async function setup(): Promise<void> {
  console.log(`sterna: Temporal CLI ready at ${await ensureTemporalCli()}`);
  // The metrics test scrapes a worker with a real Prometheus server.
  console.log(`sterna: Prometheus ready at ${await ensurePrometheus()}`);
}

setup().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
