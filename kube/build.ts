/**
 * `npm run kube:build`: builds (once per machine) the Kubernetes control plane the GKE
 * tests run on, and installs etcd if it is missing; prints where the binaries are.
 * The test helper does the same on first use; this lets CI or a developer do it ahead.
 */
import { ensureControlPlane, ensureEtcd } from './binaries';

async function main(): Promise<void> {
  const dir = await ensureControlPlane();
  const etcd = await ensureEtcd();
  process.stdout.write(`control plane: ${dir}\netcd: ${etcd}\n`);
}

main().catch((err: Error) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
