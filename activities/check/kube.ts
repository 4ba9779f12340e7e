/**
 * The Kubernetes checks before a GKE run: the API server answers with the worker's
 * kubeconfig credentials, and the namespace runs go to exists. One call, a namespace read,
 * through @kubernetes/client-node as the GKE provider makes its calls.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Finding } from '../../workflows/checks';

export interface KubeTarget {
  /** Loads the worker's kubeconfig (a file that cannot be read is a finding). */
  kubeConfig: () => KubeConfig;
  namespace: string;
  /** Where the kubeconfig comes from, for messages. */
  source?: string;
}

export async function checkKube(target: KubeTarget): Promise<Finding[]> {
  const { namespace } = target;
  let kubeConfig: KubeConfig;
  try {
    kubeConfig = target.kubeConfig();
  } catch (err) {
    return [{ check: 'kubernetes:api', ok: false, problem: `cannot load the kubeconfig${target.source ? ` ${target.source}` : ''}: ${((err as Error)?.message ?? String(err)).slice(0, 300)}`, fix: 'point STERNA_GKE_KUBECONFIG at a kubeconfig (`gcloud container clusters get-credentials <cluster> --location=<location>` writes one)' }];
  }
  const server = kubeConfig.getCurrentCluster()?.server ?? '(no current cluster)';
  const api = 'kubernetes:api';
  const ns = `kubernetes:namespace:${namespace}`;
  try {
    await kubeConfig.makeApiClient(CoreV1Api).readNamespace({ name: namespace });
    return [{ check: api, ok: true }, { check: ns, ok: true }];
  } catch (err) {
    const code = (err as { code?: number | string })?.code;
    const message = ((err as Error)?.message ?? String(err)).slice(0, 300);
    if (code === 404) {
      return [{ check: api, ok: true }, { check: ns, ok: false, problem: `the cluster at ${server} has no namespace ${namespace}`, fix: `\`kubectl create namespace ${namespace}\`, or set STERNA_GKE_NAMESPACE to an existing one` }];
    }
    if (code === 403) {
      // Authenticated, but may not read namespaces (a worker's role is often namespaced): a warning.
      return [{ check: api, ok: true }, { check: ns, ok: true, problem: `could not confirm namespace ${namespace} exists: these credentials may not get namespaces (403)`, fix: `\`kubectl get namespace ${namespace}\` as a cluster administrator` }];
    }
    if (code === 401) {
      return [{ check: api, ok: false, problem: `the Kubernetes API at ${server} refused the kubeconfig's credentials (401)`, fix: 'refresh them: `gcloud container clusters get-credentials <cluster> --location=<location>`, or point STERNA_GKE_KUBECONFIG at a valid kubeconfig' }];
    }
    return [{ check: api, ok: false, transient: true, problem: `the Kubernetes API at ${server} did not answer (${message})`, fix: 'check the cluster is up and reachable from here, and STERNA_GKE_KUBECONFIG names its kubeconfig (`kubectl --kubeconfig <file> get namespace` makes the same call)' }];
  }
}
