/**
 * What the run asks of its activities, built from its spec and state: the capacity
 * request, each attempt's provision request, and the state a fresh run starts from. Pure,
 * so the driver stays wiring and a server-less test can read every field.
 */
import type { CapacityRequest, ProvisionRequest } from '../activity-contract';
import { resourceLabels, runKey, type Owner } from '../naming';
import { deadlineMs, flexStartMaxWaitSeconds, modelsOf } from '../pricing';
import { parseSpec, specWarnings, type RunSpec, type RunSpecInput } from '../spec';
import { ProvisioningModel, type Backend, type Offer } from '../types';
import { intervalForOffer } from './checkpoint-interval';
import { gangSize } from './gang';
import { dataCacheUri } from './data-placement';
import { resourceReleaseByMs } from './resource-limit';
import { initialState, record, TimelineKind, type Attempt, type RunState } from './state';

export function capacityRequest(spec: RunSpec): { backend: Backend; request: CapacityRequest } {
  const { backend, resources, placement } = spec;
  return {
    backend,
    request: {
      accelerators: resources.accelerators,
      machineType: resources.machineType,
      regions: placement.regions,
      zones: placement.zones,
      // Flex-start offers only for a spec that may use them; every other run asks as it always did.
      provisioningModels: modelsOf(spec).includes(ProvisioningModel.FlexStart) ? [ProvisioningModel.Spot, ProvisioningModel.OnDemand, ProvisioningModel.FlexStart] : [ProvisioningModel.Spot, ProvisioningModel.OnDemand],
      // A gang's offers are for all its nodes; a single node's request is as it always was.
      ...(resources.nodes > 1 ? { nodes: resources.nodes } : {}),
    },
  };
}

/** `nowMs` bounds the resource's own lifetime (its VM-side limit, resource-limit.ts). */
export function provisionRequest(spec: RunSpec, state: RunState, attempt: Attempt, owner: Owner, nowMs: number): ProvisionRequest {
  return {
    name: attempt.ref.name,
    offer: attempt.offer,
    owner,
    labels: resourceLabels(owner, spec.labels),
    diskSizeGb: spec.resources.diskSizeGb,
    image: spec.image,
    releaseBy: new Date(resourceReleaseByMs(state, spec, nowMs)).toISOString(),
    ...(attempt.runDurationSeconds !== undefined ? { flexStart: { maxWaitSeconds: flexStartMaxWaitSeconds(spec), maxRunDurationSeconds: attempt.runDurationSeconds } } : {}),
    agent: {
      runId: state.runId,
      attempt: attempt.attempt,
      argv: spec.command,
      env: { ...spec.env, STERNA_CHECKPOINT_INTERVAL: String(attempt.checkpointInterval?.seconds ?? intervalForOffer(spec, state, attempt.offer, nowMs).seconds) },
      secrets: spec.secrets,
      datasets: spec.datasets,
      ...(spec.workdir ? { workdir: spec.workdir } : {}),
      // Each run checkpoints under its own prefix, so runs sharing a bucket never mix.
      checkpointUri: `${spec.checkpoint.uri.replace(/\/+$/, '')}/${runKey(state.runId)}`,
      resumeFrom: state.lastCheckpoint,
      pollSeconds: spec.recovery.pollSeconds,
      ...(spec.placement.dataCache ? { dataCacheUri: dataCacheUri(spec.placement.dataCache, attempt.offer.region, state.runId) } : {}),
      // Only when given: a run without setup asks for exactly what it always did.
      ...(spec.setup && spec.setup.length > 0 ? { setup: spec.setup } : {}),
    },
  };
}

/** The activity's summary in the web UI. */
export function provisionSummary(offer: Offer): string {
  const model = { SPOT: 'spot', STANDARD: 'on-demand', FLEX_START: 'flex-start' }[offer.provisioningModel];
  const nodes = gangSize(offer) > 1 ? ` on each of ${gangSize(offer)} nodes` : '';
  return `provision ${offer.machineType} (${offer.accelerator} x${offer.acceleratorCount}${nodes}) ${model} in ${offer.zone}`;
}

/** A fresh run's state: limits from the spec at `nowMs`, and the spec's warnings on its timeline. */
export function startingState(spec: RunSpec, workflowId: string, nowMs: number): RunState {
  const state = initialState(workflowId, nowMs, spec.pricing.budgetUsd, deadlineMs(spec, nowMs));
  for (const warning of specWarnings(spec)) record(state, nowMs, { kind: TimelineKind.Warning, event: `warning: ${warning.path} ${warning.message}` });
  return state;
}

/** A fresh run's spec and state; only a fresh start checks the deadline against now (a continued run's may have passed). */
export function freshRun(input: RunSpecInput, workflowId: string, nowMs: number): { spec: RunSpec; state: RunState } {
  const spec = parseSpec(input, { nowMs });
  return { spec, state: startingState(spec, workflowId, nowMs) };
}
