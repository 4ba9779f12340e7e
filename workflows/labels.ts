/**
 * Labels that both GCE and Kubernetes accept: the one validator for the labels a spec
 * gives and for every label Sterna derives.
 *
 *   GCE keys    [a-z][a-z0-9_-]{0,62}         (international lowercase letters too)
 *   GCE values  [a-z0-9_-]{0,63}
 *   k8s names   1-63 of [A-Za-z0-9_.-], alphanumeric first and last
 *   k8s values  empty, or as names
 *
 * so a key is a lowercase letter, then [a-z0-9_-], ending with a letter or digit; a
 * value is empty or [a-z0-9_-] with a letter or digit at both ends; both at most 63.
 */

/** GCE allows 64 labels per resource. */
export const GCE_MAX_LABELS = 64;
/** Every key starting with this is Sterna's (sterna-run, sterna-attempt, sterna-exec...). */
export const STERNA_LABEL_PREFIX = 'sterna-';
/** Labels Sterna may put on each resource: sterna-run, sterna-attempt, sterna-exec and, on a gang's nodes, sterna-rank. */
export const STERNA_RESERVED_LABELS = 4;
/** What a spec may add. */
export const MAX_USER_LABELS = GCE_MAX_LABELS - STERNA_RESERVED_LABELS;

export const LABEL_KEY_RULE = '1-63 of a-z, 0-9, "_", "-", starting with a letter and ending with a letter or digit';
export const LABEL_VALUE_RULE = 'empty, or 1-63 of a-z, 0-9, "_", "-", starting and ending with a letter or digit';

export function isLabelKey(key: string): boolean {
  return /^[a-z](?:[a-z0-9_-]{0,61}[a-z0-9])?$/.test(key);
}

export function isLabelValue(value: string): boolean {
  return /^(?:[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?)?$/.test(value);
}

/** Why a set of labels cannot go on a resource: per key, or (no key) for the set as a whole. */
export function labelProblems(labels: Record<string, string>, options: { userLabels: boolean }): { key?: string; message: string }[] {
  const problems: { key?: string; message: string }[] = [];
  for (const [key, value] of Object.entries(labels)) {
    if (!isLabelKey(key)) problems.push({ key, message: `label keys: ${LABEL_KEY_RULE}` });
    else if (options.userLabels && key.startsWith(STERNA_LABEL_PREFIX)) problems.push({ key, message: `label keys starting with ${STERNA_LABEL_PREFIX} are set by Sterna` });
    if (!isLabelValue(value)) problems.push({ key, message: `label values: ${LABEL_VALUE_RULE}` });
  }
  const count = Object.keys(labels).length;
  const max = options.userLabels ? MAX_USER_LABELS : GCE_MAX_LABELS;
  if (count > max) {
    problems.push({ message: options.userLabels ? `${count} labels; at most ${MAX_USER_LABELS} (GCE allows ${GCE_MAX_LABELS} and Sterna adds its own)` : `${count} labels; GCE allows at most ${GCE_MAX_LABELS}` });
  }
  return problems;
}
