/**
 * A real Kubernetes control plane on loopback: etcd, kube-apiserver,
 * kube-controller-manager (the Job and garbage-collector controllers) and
 * kube-scheduler, each its own process. There is no kubelet: `node-agent.ts` plays
 * kubelet for fake GPU nodes. Everything the API server says is the API server's own.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { spawnService, waitFor, type Service } from './service';
import { binaryPath, ensureControlPlane, ensureEtcd } from './binaries';
import { freePort } from '../processes/ports';

export interface Cluster {
  /** https://127.0.0.1:<port> */
  server: string;
  token: string;
  kubeconfigPath: string;
  kubeConfig(): KubeConfig;
  stop(): Promise<void>;
}

async function anyPort(): Promise<number> {
  return (await freePort(0))!;
}

/** Starts the control plane with its state under `dir`; `stop()` ends every process. */
export async function startCluster(dir: string): Promise<Cluster> {
  await ensureControlPlane();
  const etcdBinary = await ensureEtcd();
  mkdirSync(dir, { recursive: true });
  const services: Service[] = [];
  const stop = async () => {
    for (const s of services.reverse()) await s.stop();
  };
  try {
    const [etcdClient, etcdPeer, apiPort] = [await anyPort(), await anyPort(), await anyPort()];
    services.push(
      spawnService('etcd', etcdBinary, [
        `--data-dir=${join(dir, 'etcd')}`,
        `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
        `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
        '--log-level=error',
      ], join(dir, 'etcd.log')),
    );
    // Service-account signing keys, and one static admin token (system:masters).
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
    writeFileSync(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const token = randomBytes(16).toString('hex');
    writeFileSync(join(dir, 'tokens.csv'), `${token},sterna-admin,sterna-admin,"system:masters"\n`);
    const server = `https://127.0.0.1:${apiPort}`;
    services.push(
      spawnService('kube-apiserver', binaryPath('kube-apiserver'), [
        `--etcd-servers=http://127.0.0.1:${etcdClient}`,
        `--secure-port=${apiPort}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--cert-dir=${join(dir, 'certs')}`,
        `--token-auth-file=${join(dir, 'tokens.csv')}`,
        '--authorization-mode=Node,RBAC',
        `--service-account-issuer=https://kubernetes.default.svc`,
        `--service-account-key-file=${join(dir, 'sa.pub')}`,
        `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
        '--service-cluster-ip-range=10.96.0.0/24',
        // Pods here get no service-account token volume: there is no kubelet to mount it.
        '--disable-admission-plugins=ServiceAccount',
        '--enable-priority-and-fairness=false',
        // Debian's etcd (3.4) sends no progress notifications, which the watch cache needs
        // to serve a watch from a fresh resourceVersion; watch etcd directly instead.
        '--watch-cache=false',
        '--v=0',
      ], join(dir, 'kube-apiserver.log')),
    );
    await waitFor('kube-apiserver', () => readyz(server, token), 90_000);
    const kubeconfigPath = join(dir, 'kubeconfig');
    writeFileSync(kubeconfigPath, kubeconfigYaml(server, token));
    const common = [`--kubeconfig=${kubeconfigPath}`, '--leader-elect=false', '--v=0'];
    services.push(
      spawnService('kube-controller-manager', binaryPath('kube-controller-manager'), [
        ...common,
        '--controllers=job-controller,garbage-collector-controller,pod-garbage-collector-controller,ttl-after-finished-controller',
        '--use-service-account-credentials=false',
        `--bind-address=127.0.0.1`,
        `--secure-port=${await anyPort()}`,
      ], join(dir, 'kube-controller-manager.log')),
      spawnService('kube-scheduler', binaryPath('kube-scheduler'), [...common, '--bind-address=127.0.0.1', `--secure-port=${await anyPort()}`], join(dir, 'kube-scheduler.log')),
    );
    const cluster: Cluster = {
      server,
      token,
      kubeconfigPath,
      kubeConfig() {
        const kc = new KubeConfig();
        kc.loadFromFile(kubeconfigPath);
        return kc;
      },
      stop,
    };
    return cluster;
  } catch (err) {
    await stop();
    throw err;
  }
}

async function readyz(server: string, token: string): Promise<boolean> {
  // The serving certificate is self-signed: the test cluster is reached on loopback only.
  const { request } = await import('node:https');
  return new Promise((resolve) => {
    const req = request(`${server}/readyz`, { headers: { Authorization: `Bearer ${token}` }, rejectUnauthorized: false, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

function kubeconfigYaml(server: string, token: string): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: sterna-test
  cluster:
    server: ${server}
    insecure-skip-tls-verify: true
users:
- name: sterna-admin
  user:
    token: ${token}
contexts:
- name: sterna-test
  context:
    cluster: sterna-test
    user: sterna-admin
    namespace: default
current-context: sterna-test
`;
}
