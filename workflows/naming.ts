/**
 * Idempotent names and ownership labels. A retried create must find the resource it made
 * before, so every name is a pure function of the run, its execution and the attempt.
 * GCE names match `[a-z]([-a-z0-9]{0,61}[a-z0-9])?`; label values allow `[a-z0-9_-]{0,63}`.
 *
 * The execution token comes from the server (the first run id of the continue-as-new
 * chain), never from the workflow's input: a reused workflow id or a forged continued
 * state gets another token, so it can neither adopt nor release what an earlier
 * execution created.
 */

/** FNV-1a, 32 bit: a short deterministic digest that keeps truncated names unique. */
export function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(36).padStart(7, '0');
}

function slug(text: string, max: number): string {
  const cleaned = text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return cleaned.slice(0, max).replace(/-+$/, '');
}

/** The labels Sterna puts on everything it creates; no spec may set them. */
export const OwnerLabel = { Run: 'sterna-run', Execution: 'sterna-exec', Attempt: 'sterna-attempt' } as const;

/** A gang's node carries its rank here (run/gang.ts): labels.ts's spare Sterna label. */
export const RankLabel = 'sterna-rank';

/** Who a resource belongs to: the run, the execution chain and the attempt. */
export interface Owner {
  /** `sterna-run`: runKey(workflow id). */
  run: string;
  /** `sterna-exec`: executionToken(first execution run id). */
  execution: string;
  attempt: number;
}

/** The `sterna-run` label value: readable, unique per workflow id, at most 63 chars. */
export function runKey(workflowId: string): string {
  const base = slug(workflowId, 63 - 8);
  return base ? `${base}-${fnv1a(workflowId)}` : fnv1a(workflowId);
}

/** The `sterna-exec` label value: a digest of the chain's first run id (two FNV passes, 14 chars). */
export function executionToken(firstExecutionRunId: string): string {
  return `${fnv1a(firstExecutionRunId)}${fnv1a(`${firstExecutionRunId}/sterna`)}`;
}

/** What a gang's node names add to its attempt's name (`-n63`, run/gang.ts). */
const NODE_SUFFIX_CHARS = 4;

/**
 * The VM / Job name for one attempt: `st-<run>-<hash>-<exec>-a<attempt>`. A gang's
 * (`nodes` > 1) leaves room for its nodes' `-n<rank>`; one node's is as it always was.
 */
export function resourceName(workflowId: string, execution: string, attempt: number, nodes = 1): string {
  const suffix = `-${fnv1a(workflowId)}-${execution.slice(0, 7)}-a${attempt}`;
  const base = slug(workflowId, 63 - 3 - suffix.length - (nodes > 1 ? NODE_SUFFIX_CHARS : 0));
  return `st-${base || 'run'}${suffix}`;
}

export function ownerLabels(owner: Owner): Record<string, string> {
  return { [OwnerLabel.Run]: owner.run, [OwnerLabel.Execution]: owner.execution, [OwnerLabel.Attempt]: String(owner.attempt) };
}

export function resourceLabels(owner: Owner, specLabels: Record<string, string>): Record<string, string> {
  return { ...specLabels, ...ownerLabels(owner) };
}

/** True only when the labels name exactly this run, execution and attempt. */
export function isOwnedBy(labels: Record<string, string> | null | undefined, owner: Owner): boolean {
  if (!labels) return false;
  return labels[OwnerLabel.Run] === owner.run && labels[OwnerLabel.Execution] === owner.execution && labels[OwnerLabel.Attempt] === String(owner.attempt);
}
