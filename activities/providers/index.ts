/**
 * The clouds behind one interface (provider.ts): GCE through @google-cloud/compute. The
 * GKE provider (gke.ts) is imported only by a worker configured for GKE, so a GCE-only
 * worker never loads @kubernetes/client-node.
 */
export { GceProvider } from './gce';
export { computeClients } from './gce-clients';
