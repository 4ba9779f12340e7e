/**
 * The agent that runs on every VM (and in every GKE Job) and the metadata it reads.
 * The script is static; a run's inputs travel as metadata attributes (on GKE as
 * STERNA_ATTR_<name> environment variables), so no value from a spec is ever parsed by a
 * shell. Lists are a count line, then one line per item holding the item's UTF-8 in
 * base64: no value can split an item, add one or drop one, and the agent refuses a list
 * whose count does not match or whose items hold a NUL (which bash cannot carry).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentInputs } from '../../workflows/activity-contract';
import { parseSecretRef, SecretScheme, secretManagerPath } from '../../workflows/secrets';
import type { CheckpointRef, GpuReading } from '../../workflows/types';

export type { AgentInputs };

let cached: string | undefined;

/** The agent's bash source (kept as a real file so it can be linted and read). */
export function agentScript(): string {
  cached ??= readFileSync(join(__dirname, '..', '..', '..', 'activities', 'agent', 'sterna-agent.sh'), 'utf8');
  return cached;
}


/** Decoded by `decode_list` in sterna-agent.sh; sized by `encodedListBytes` in workflows/spec.ts. */
export function encodeList(items: readonly string[]): string {
  return `${items.length}\n${items.map((item) => `${Buffer.from(item, 'utf8').toString('base64')}\n`).join('')}`;
}

/** The instance attribute the run sets (TRUE) to ask the agent for a final checkpoint and a stop (sterna-agent.sh). */
export const MOVE_ATTRIBUTE = 'sterna-move';

/**
 * The container image the agent runs setup and the command in (GCE only: on GKE the pod
 * already runs in the spec's image, and the agent must not start a container in it).
 */
export const IMAGE_ATTRIBUTE = 'sterna-image';

/**
 * The agent's exits for setup and the container (sterna-agent.sh), beside 64-68 and 70
 * (workflows/run/endings.ts AGENT_EXITS, which says how each ends the run). Each comes with phase `failed`; only
 * SetupFailed also publishes `sterna/setup-exit` (the command's own exit code).
 */
export const AgentExit = {
  /** A setup command exited non-zero: the same on every VM. */
  SetupFailed: 71,
  /** The image could not be pulled: it does not exist, or the VM may not read it. */
  ImageUnavailable: 72,
  /** An image was given and the VM has neither docker (with its daemon up) nor podman. */
  NoContainerRuntime: 73,
  /** The container runtime refused to create the container (the agent's log says why). */
  ContainerFailed: 74,
} as const;

/** Metadata attributes the agent reads (`instance/attributes/<key>`). */
export function agentAttributes(inputs: AgentInputs): Record<string, string> {
  const attributes: Record<string, string> = {
    'sterna-run-id': inputs.runId,
    'sterna-attempt': String(inputs.attempt),
    'sterna-argv': encodeList(inputs.argv),
    'sterna-env': encodeList(Object.entries(inputs.env).map(([k, v]) => `${k}=${v}`)),
    'sterna-datasets': encodeList(inputs.datasets.flatMap((d) => [d.uri, d.path])),
    'sterna-checkpoint-uri': inputs.checkpointUri,
    'sterna-poll-seconds': String(inputs.pollSeconds),
  };
  // Only where each secret lives: the agent fetches the values itself (sterna-agent.sh).
  const fetched = Object.entries(inputs.secrets ?? {}).flatMap(([name, ref]) => {
    const parsed = parseSecretRef(ref);
    return parsed?.scheme === SecretScheme.GcpSecretManager ? [name, secretManagerPath(parsed)] : [];
  });
  if (fetched.length > 0) attributes['sterna-secrets'] = encodeList(fetched);
  // "<sha256> <uri>", as sterna-resume-from: the agent fetches, checks and unpacks it (fetch_workdir).
  if (inputs.workdir) attributes['sterna-workdir'] = `${inputs.workdir.sha256} ${inputs.workdir.uri}`;
  if (inputs.resumeFrom) attributes['sterna-resume-from'] = `${inputs.resumeFrom.sha256} ${inputs.resumeFrom.uri}`;
  if (inputs.dataCacheUri) attributes['sterna-data-cache'] = inputs.dataCacheUri;
  if (inputs.setup && inputs.setup.length > 0) attributes['sterna-setup'] = encodeList(inputs.setup);
  if (inputs.gang) {
    // A gang's node (workflows/run/gang.ts): rank 0 reads its own address on the VM.
    attributes['sterna-node-rank'] = String(inputs.gang.rank);
    attributes['sterna-num-nodes'] = String(inputs.gang.nodes);
    attributes['sterna-master-port'] = String(inputs.gang.masterPort);
    if (inputs.gang.masterAddr) attributes['sterna-master-addr'] = inputs.gang.masterAddr;
  }
  return attributes;
}

/** Parses what the agent publishes (guest attributes `sterna/<key>`, or status files). */
export function parseAgentValues(values: Record<string, string>): {
  phase?: string;
  step?: number;
  totalSteps?: number;
  gpu?: GpuReading;
  stagedBytes?: number;
  reusedBytes?: number;
  totalBytes?: number;
  checkpoint?: CheckpointRef;
  checkpointMs?: number;
  checkpointInterval?: number;
  exitCode?: number;
  /** The agent saw GCE's preemption notice on its metadata server. */
  noticed?: boolean;
  /** The agent stopped the trainer for the move the run asked for (run/flex-cut.ts). */
  moving?: boolean;
  /** The setup command running (or the one that failed), 1-based, of how many. */
  setupStep?: { step: number; of: number };
  /** The failed setup command's own exit code (with exit AgentExit.SetupFailed). */
  setupExitCode?: number;
} {
  const int = (v: string | undefined) => (v !== undefined && /^\d+$/.test(v.trim()) ? Number(v.trim()) : undefined);
  const seconds = (v: string | undefined) => (v !== undefined && /^\d{1,9}(\.\d{1,6})?$/.test(v.trim()) ? Number(v.trim()) : undefined);
  let checkpoint: CheckpointRef | undefined;
  const raw = values.checkpoint;
  if (raw) {
    // "<step> <sha256> <uri>": the URI goes last so it may contain spaces.
    const match = /^(\d+) ([0-9a-f]{64}) (.+)$/.exec(raw.trim());
    if (match) checkpoint = { step: Number(match[1]), sha256: match[2], uri: match[3] };
  }
  return {
    phase: values.phase,
    step: int(values.step),
    totalSteps: int(values['total-steps']),
    gpu: parseGpu(values.gpu),
    stagedBytes: int(values['staged-bytes']),
    reusedBytes: int(values['reused-bytes']),
    totalBytes: int(values['total-bytes']),
    checkpoint,
    checkpointMs: checkpoint ? int(values['checkpoint-ms']) : undefined,
    checkpointInterval: seconds(values['checkpoint-interval']),
    exitCode: int(values.exit),
    noticed: values.preempted === 'TRUE' ? true : undefined,
    moving: values.moving === 'TRUE' ? true : undefined,
    setupStep: parseSetupStep(values['setup-step']),
    setupExitCode: int(values['setup-exit']),
  };
}

/** sterna/setup-step: "<i>/<n>", the setup command running (sterna-agent.sh `run_setup`). */
function parseSetupStep(raw: string | undefined): { step: number; of: number } | undefined {
  const match = raw === undefined ? null : /^(\d{1,3})\/(\d{1,3})$/.exec(raw.trim());
  if (!match) return undefined;
  const [step, of] = [Number(match[1]), Number(match[2])];
  return step >= 1 && step <= of ? { step, of } : undefined;
}

/** sterna/gpu: "<mean utilisation %> <memory used MiB> <memory total MiB> <GPUs>" (sterna-agent.sh `publish_gpu`). */
export function parseGpu(raw: string | undefined): GpuReading | undefined {
  const match = raw === undefined ? null : /^(\d{1,3}) (\d{1,12}) (\d{1,12}) (\d{1,3})$/.exec(raw.trim());
  if (!match) return undefined;
  const [utilisation, memoryUsedMiB, memoryTotalMiB, gpus] = match.slice(1).map(Number);
  if (utilisation > 100 || gpus === 0) return undefined;
  return { utilisation, memoryUsedMiB, memoryTotalMiB, gpus };
}
