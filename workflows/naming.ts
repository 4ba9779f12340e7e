/**
 * Idempotent names. A retried create must find the resource it made before, so every
 * name is a pure function of the workflow id and the attempt number. GCE names match
 * `[a-z]([-a-z0-9]{0,61}[a-z0-9])?`; label values allow `[a-z0-9_-]{0,63}`.
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

/** The `sterna-run` label value: readable, unique per workflow id, at most 63 chars. */
export function runKey(workflowId: string): string {
  const base = slug(workflowId, 63 - 8);
  return base ? `${base}-${fnv1a(workflowId)}` : fnv1a(workflowId);
}

/** The VM / Job name for one attempt of a run: `st-<run>-<hash>-a<attempt>`. */
export function resourceName(workflowId: string, attempt: number): string {
  const suffix = `-${fnv1a(workflowId)}-a${attempt}`;
  const base = slug(workflowId, 63 - 3 - suffix.length);
  return `st-${base || 'run'}${suffix}`;
}

export function resourceLabels(workflowId: string, attempt: number, specLabels: Record<string, string>): Record<string, string> {
  return { ...specLabels, 'sterna-run': runKey(workflowId), 'sterna-attempt': String(attempt) };
}
