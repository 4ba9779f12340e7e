/**
 * The ProvisioningRequest API (autoscaling.x-k8s.io/v1) for the test control plane: GKE
 * serves it from the cluster autoscaler's CRD, and queued provisioning (DWS flex-start)
 * is one of its classes (`queued-provisioning.gke.io`).
 *
 * Source of the API: kubernetes/autoscaler, cluster-autoscaler/apis/config/crd/
 * autoscaling.x-k8s.io_provisioningrequests.yaml (read at commit 2ebce5cc850d451df40fe9bd685bcb52258668b2).
 * That module is not reachable here (the Go module proxy refuses
 * k8s.io/autoscaler/cluster-autoscaler/apis), so this is a structural schema written for
 * the same API rather than the generated file: the same group, version, kind, names and
 * scope, the status subresource, and the validation of every field Sterna writes or reads
 * (podSets 1..32 with count >= 1 and a podTemplateRef name, provisioningClassName,
 * parameters of at most 255 characters each, status.conditions keyed by type). The
 * immutability rules (CEL `self == oldSelf`) and descriptions are left out.
 */
import { ApiextensionsV1Api, type KubeConfig, type V1CustomResourceDefinition } from '@kubernetes/client-node';

export const PROVISIONING_REQUEST = { group: 'autoscaling.x-k8s.io', version: 'v1', plural: 'provisioningrequests', kind: 'ProvisioningRequest' } as const;

const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';

export function provisioningRequestCrd(): V1CustomResourceDefinition {
  const condition = {
    type: 'object',
    required: ['lastTransitionTime', 'message', 'reason', 'status', 'type'],
    properties: {
      lastTransitionTime: { type: 'string', format: 'date-time' },
      message: { type: 'string', maxLength: 32768 },
      observedGeneration: { type: 'integer', format: 'int64', minimum: 0 },
      reason: { type: 'string', minLength: 1, maxLength: 1024, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$' },
      status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
      type: { type: 'string', maxLength: 316 },
    },
  };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${PROVISIONING_REQUEST.plural}.${PROVISIONING_REQUEST.group}` },
    spec: {
      group: PROVISIONING_REQUEST.group,
      names: { kind: PROVISIONING_REQUEST.kind, listKind: 'ProvisioningRequestList', plural: PROVISIONING_REQUEST.plural, singular: 'provisioningrequest', shortNames: ['provreq', 'provreqs'] },
      scope: 'Namespaced',
      versions: [
        {
          name: PROVISIONING_REQUEST.version,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: 'object',
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: {
                  type: 'object',
                  required: ['podSets', 'provisioningClassName'],
                  properties: {
                    parameters: { type: 'object', maxProperties: 100, additionalProperties: { type: 'string', maxLength: 255 } },
                    podSets: {
                      type: 'array',
                      minItems: 1,
                      maxItems: 32,
                      items: {
                        type: 'object',
                        required: ['count', 'podTemplateRef'],
                        properties: {
                          count: { type: 'integer', format: 'int32', minimum: 1 },
                          podTemplateRef: { type: 'object', required: ['name'], properties: { name: { type: 'string', maxLength: 253, pattern: DNS_SUBDOMAIN } } },
                        },
                      },
                    },
                    provisioningClassName: { type: 'string', maxLength: 253, pattern: DNS_SUBDOMAIN },
                  },
                },
                status: {
                  type: 'object',
                  properties: {
                    conditions: { type: 'array', items: condition, x_kubernetes_list_type: 'map', x_kubernetes_list_map_keys: ['type'] },
                    provisioningClassDetails: { type: 'object', maxProperties: 64, additionalProperties: { type: 'string', maxLength: 32768 } },
                  },
                },
              },
            },
          },
        },
      ],
    },
  };
}

/** Installs the CRD (idempotently) and waits until the API server serves it. */
export async function installProvisioningRequestCrd(kc: KubeConfig, timeoutMs = 30_000): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const crd = provisioningRequestCrd();
  await api.createCustomResourceDefinition({ body: crd }).catch((err: { code?: number }) => {
    if (err?.code !== 409) throw err;
  });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const current = await api.readCustomResourceDefinition({ name: crd.metadata!.name! });
    if ((current.status?.conditions ?? []).some((c) => c.type === 'Established' && c.status === 'True')) return;
    if (Date.now() > deadline) throw new Error(`CRD ${crd.metadata!.name} not established within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
