/**
 * The agent that runs on every VM (and in every GKE Job) and the metadata it reads.
 * The script is static; a run's inputs travel as metadata attributes, lists encoded
 * base64 + NUL-separated, so no value from a spec is ever parsed by a shell.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CheckpointRef } from '../../workflows/types';

let cached: string | undefined;

/** The agent's bash source (kept as a real file so it can be linted and read). */
export function agentScript(): string {
  cached ??= readFileSync(join(__dirname, '..', '..', '..', 'activities', 'agent', 'sterna-agent.sh'), 'utf8');
  return cached;
}

export interface AgentInputs {
  runId: string;
  attempt: number;
  argv: string[];
  env: Record<string, string>;
  datasets: { uri: string; path: string }[];
  checkpointUri: string;
  resumeFrom?: CheckpointRef;
  pollSeconds: number;
}

function encodeList(items: string[]): string {
  return Buffer.from(items.map((item) => `${item}\0`).join(''), 'utf8').toString('base64');
}

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
  if (inputs.resumeFrom) attributes['sterna-resume-from'] = `${inputs.resumeFrom.sha256} ${inputs.resumeFrom.uri}`;
  return attributes;
}

/** Parses what the agent publishes (guest attributes `sterna/<key>`, or status files). */
export function parseAgentValues(values: Record<string, string>): {
  phase?: string;
  step?: number;
  stagedBytes?: number;
  totalBytes?: number;
  checkpoint?: CheckpointRef;
  exitCode?: number;
} {
  const int = (v: string | undefined) => (v !== undefined && /^\d+$/.test(v.trim()) ? Number(v.trim()) : undefined);
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
    stagedBytes: int(values['staged-bytes']),
    totalBytes: int(values['total-bytes']),
    checkpoint,
    exitCode: int(values.exit),
  };
}
