/**
 * What a training VM may reach and act as: its service account and OAuth scopes, its
 * network, whether it has an external IP, Shielded VM. Least privilege by default:
 *
 *   scopes       storage read/write (datasets, checkpoints) and logging write, not
 *                cloud-platform; a run with Secret Manager references also gets
 *                cloud-platform, the only scope Secret Manager accepts, so what bounds it
 *                is the service account's IAM roles (README: "IAM roles")
 *   external IP  none: the VM reaches Google APIs through Private Google Access and the
 *                internet (pip, Hugging Face) through Cloud NAT
 *   Shielded VM  vTPM and integrity monitoring; Secure Boot only when asked, because
 *                GPU drivers built at boot are unsigned kernel modules it refuses to load
 */
import type { protos } from '@google-cloud/compute';
import { type AgentInputs, parseSecretRef, SecretScheme } from '../../workflows/api';
import { Scope, type VmAccess } from '../../config/vm-access';

type IInstance = protos.google.cloud.compute.v1.IInstance;

function needsSecretManager(agent: AgentInputs): boolean {
  return Object.values(agent.secrets ?? {}).some((ref) => parseSecretRef(ref)?.scheme === SecretScheme.GcpSecretManager);
}

export function subnetworkIn(subnetwork: string, region: string): string {
  return subnetwork.includes('/') ? subnetwork.replaceAll('{region}', region) : `regions/${region}/subnetworks/${subnetwork}`;
}

/** The insert body's identity, network and Shielded VM fields for a VM in `region`. */
export function vmAccessFields(access: VmAccess, region: string, agent: AgentInputs): Pick<IInstance, 'networkInterfaces' | 'serviceAccounts' | 'shieldedInstanceConfig'> {
  const scopes = new Set(access.scopes);
  if (needsSecretManager(agent)) scopes.add(Scope.CloudPlatform);
  return {
    networkInterfaces: [
      {
        network: access.network ?? 'global/networks/default',
        ...(access.subnetwork ? { subnetwork: subnetworkIn(access.subnetwork, region) } : {}),
        ...(access.externalIp ? { accessConfigs: [{ name: 'External NAT', type: 'ONE_TO_ONE_NAT' }] } : {}),
      },
    ],
    serviceAccounts: [{ email: access.serviceAccountEmail ?? 'default', scopes: [...scopes] }],
    ...(access.shieldedVm ? { shieldedInstanceConfig: { enableSecureBoot: access.secureBoot, enableVtpm: true, enableIntegrityMonitoring: true } } : {}),
  };
}
