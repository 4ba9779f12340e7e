/** `npm run setup`: makes sure everything the demo and the tests need is installed. */
import { ensurePodman } from '../config/podman';
import { ensurePrometheus } from '../config/prometheus';
import { ensureTemporalCli } from '../config/temporal-cli';
import { ensureTemporalServer } from '../config/temporal-server';

async function setup(): Promise<void> {
  console.log(`sterna: Temporal CLI ready at ${await ensureTemporalCli()}`);
  // Sterna's own Temporal server (temporal-server/): the server the demo, `npm run server` and the tests run.
  console.log(`sterna: Temporal server ready at ${await ensureTemporalServer()}`);
  // The metrics test scrapes a worker with a real Prometheus server.
  console.log(`sterna: Prometheus ready at ${await ensurePrometheus()}`);
  // The container tests run a run's image with a real OCI runtime: podman and runc.
  console.log(`sterna: podman ready at ${(await ensurePodman()).podman}`);
}

setup().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
