/**
 * What a training VM may reach and act as (worker configuration; the insert body's
 * fields are built in activities/providers/gce-vm-access.ts). Least privilege by default.
 */

export const Scope = {
  StorageReadWrite: 'https://www.googleapis.com/auth/devstorage.read_write',
  LoggingWrite: 'https://www.googleapis.com/auth/logging.write',
  CloudPlatform: 'https://www.googleapis.com/auth/cloud-platform',
} as const;

export const DEFAULT_SCOPES: readonly string[] = [Scope.StorageReadWrite, Scope.LoggingWrite];

export interface VmAccess {
  /** The VMs' service account; GCE's `default` (the project's compute SA) when absent. Use a dedicated one. */
  serviceAccountEmail?: string;
  scopes: readonly string[];
  /** A network URL or `global/networks/<name>`; `global/networks/default` when absent. */
  network?: string;
  /**
   * The subnetwork: a name (taken in the VM's region), or a path with `{region}`, e.g.
   * `projects/host/regions/{region}/subnetworks/training` for a Shared VPC.
   */
  subnetwork?: string;
  externalIp: boolean;
  shieldedVm: boolean;
  secureBoot: boolean;
}

export const DEFAULT_VM_ACCESS: VmAccess = { scopes: DEFAULT_SCOPES, externalIp: false, shieldedVm: true, secureBoot: false };

