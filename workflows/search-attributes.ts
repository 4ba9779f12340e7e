/**
 * Every search attribute Sterna upserts, in one list: the dev-server launcher registers
 * them with `--search-attribute`, tests rely on them, and the README derives the
 * `temporal operator search-attribute create` line for a production cluster from it.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const SternaPhase = defineSearchAttributeKey('SternaPhase', SearchAttributeType.KEYWORD);
export const SternaZone = defineSearchAttributeKey('SternaZone', SearchAttributeType.KEYWORD);
export const SternaAccelerator = defineSearchAttributeKey('SternaAccelerator', SearchAttributeType.KEYWORD);
export const SternaCostUsd = defineSearchAttributeKey('SternaCostUsd', SearchAttributeType.DOUBLE);
export const SternaPreemptions = defineSearchAttributeKey('SternaPreemptions', SearchAttributeType.INT);
export const SternaTeam = defineSearchAttributeKey('SternaTeam', SearchAttributeType.KEYWORD);
/** The run's current attempt number: the reaper deletes an older attempt's leftover, never this one. */
export const SternaAttempt = defineSearchAttributeKey('SternaAttempt', SearchAttributeType.INT);
/** The run's GPU utilisation, percent, time-weighted over its training so far (nvidia-smi on its VMs). */
export const SternaGpuUtil = defineSearchAttributeKey('SternaGpuUtil', SearchAttributeType.INT);
/** On a reaper pass: the resources it deleted (`<backend>/<zone>/<name>`). */
export const SternaReaped = defineSearchAttributeKey('SternaReaped', SearchAttributeType.KEYWORD_LIST);

export const sternaSearchAttributes = [
  SternaPhase,
  SternaZone,
  SternaAccelerator,
  SternaCostUsd,
  SternaPreemptions,
  SternaTeam,
  SternaAttempt,
  SternaReaped,
  SternaGpuUtil,
] as const;

/** The Temporal CLI's name of each search attribute type (KEYWORD -> Keyword). */
export const CLI_TYPE_NAMES: Record<string, string> = { KEYWORD: 'Keyword', DOUBLE: 'Double', INT: 'Int', TEXT: 'Text', BOOL: 'Bool', DATETIME: 'Datetime', KEYWORD_LIST: 'KeywordList' };

/** `Name=Type` pairs, as `temporal server start-dev --search-attribute` expects them (it refuses `KEYWORD_LIST`). */
export function searchAttributeFlags(): string[] {
  return sternaSearchAttributes.flatMap((key) => ['--search-attribute', `${key.name}=${CLI_TYPE_NAMES[key.type] ?? key.type}`]);
}

/**
 * The `temporal operator search-attribute create` lines that register the list (or `keys`
 * of it) on a production namespace (the CLI takes one --type per call, so one line per type).
 */
export function searchAttributeCreateCommands(namespace = '<namespace>', keys: readonly { name: string; type: string }[] = sternaSearchAttributes): string[] {
  const byType = new Map<string, string[]>();
  for (const key of keys) byType.set(key.type, [...(byType.get(key.type) ?? []), key.name]);
  return [...byType].map(
    ([type, names]) => `temporal operator search-attribute create --namespace ${namespace} ${names.map((n) => `--name ${n}`).join(' ')} --type ${CLI_TYPE_NAMES[type]}`,
  );
}
