/**
 * Secret references: a spec names where a secret lives, never the secret itself, and the
 * value is fetched inside the VM or pod, into the trainer's environment only. So no
 * secret enters workflow history, VM metadata, labels, Job specs, logs or the status.
 *
 *   gcp-secret-manager://projects/P/secrets/S/versions/V   GCE: the agent fetches it with
 *                                                         the VM's service account
 *   k8s://SECRET/KEY                                      GKE: a secretKeyRef in the pod
 *
 * Pure (runs in the workflow sandbox as well as in the client and the CLI).
 */

export const SecretScheme = { GcpSecretManager: 'gcp-secret-manager', Kubernetes: 'k8s' } as const;
export type SecretScheme = (typeof SecretScheme)[keyof typeof SecretScheme];

/** The backend that can resolve each kind of reference. */
export const SECRET_BACKEND: Record<SecretScheme, 'gce' | 'gke'> = { [SecretScheme.GcpSecretManager]: 'gce', [SecretScheme.Kubernetes]: 'gke' };

/** Project id (6-30, GCP's rule) or number; secret id (1-255); version number or latest. */
const GCP_SECRET = /^gcp-secret-manager:\/\/projects\/([a-z][a-z0-9-]{4,28}[a-z0-9]|[1-9][0-9]{0,19})\/secrets\/([A-Za-z0-9_-]{1,255})\/versions\/(latest|[1-9][0-9]{0,18})$/;
/** Secret name: a DNS-1123 subdomain; key: Kubernetes' config-map key rule. */
const K8S_SECRET = /^k8s:\/\/([a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?)\/([-._a-zA-Z0-9]{1,253})$/;

export const SECRET_REF_RULE =
  'a reference such as "gcp-secret-manager://projects/my-project/secrets/hf-token/versions/latest" (GCE) or "k8s://my-secret/token" (GKE), never the secret itself';

export type SecretRef =
  | { scheme: typeof SecretScheme.GcpSecretManager; project: string; secret: string; version: string }
  | { scheme: typeof SecretScheme.Kubernetes; name: string; key: string };

export function parseSecretRef(ref: string): SecretRef | undefined {
  const gcp = GCP_SECRET.exec(ref);
  if (gcp) return { scheme: SecretScheme.GcpSecretManager, project: gcp[1], secret: gcp[2], version: gcp[3] };
  const k8s = K8S_SECRET.exec(ref);
  if (k8s && k8s[2] !== '.' && k8s[2] !== '..') return { scheme: SecretScheme.Kubernetes, name: k8s[1], key: k8s[2] };
  return undefined;
}

/** The Secret Manager resource path the agent reads: projects/P/secrets/S/versions/V. */
export function secretManagerPath(ref: Extract<SecretRef, { scheme: 'gcp-secret-manager' }>): string {
  return `projects/${ref.project}/secrets/${ref.secret}/versions/${ref.version}`;
}

/**
 * Environment names that usually hold secrets: *_TOKEN, *_KEY, *PASSWORD*, *SECRET*,
 * credentials... A match in `spec.env` is a warning, not an error: `MAX_KEY=5` is fine.
 */
const SECRET_LOOKING = /(^|_)(TOKEN|KEY|APIKEY|PAT|CREDENTIALS?|AUTH)$|PASSWORD|PASSWD|SECRET|PRIVATE_KEY|ACCESS_KEY/i;

export function looksSecret(envName: string): boolean {
  return SECRET_LOOKING.test(envName);
}
