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

export const sternaSearchAttributes = [
  SternaPhase,
  SternaZone,
  SternaAccelerator,
  SternaCostUsd,
  SternaPreemptions,
  SternaTeam,
] as const;

/** `Name=Type` pairs, as `temporal server start-dev --search-attribute` expects them. */
export function searchAttributeFlags(): string[] {
  return sternaSearchAttributes.flatMap((key) => ['--search-attribute', `${key.name}=${key.type}`]);
}

const CLI_TYPE_NAMES: Record<string, string> = { KEYWORD: 'Keyword', DOUBLE: 'Double', INT: 'Int', TEXT: 'Text', BOOL: 'Bool', DATETIME: 'Datetime', KEYWORD_LIST: 'KeywordList' };

/**
 * The `temporal operator search-attribute create` lines that register the list on a
 * production namespace (the CLI takes one --type per call, so one line per type).
 */
export function searchAttributeCreateCommands(namespace = '<namespace>'): string[] {
  const byType = new Map<string, string[]>();
  for (const key of sternaSearchAttributes) byType.set(key.type, [...(byType.get(key.type) ?? []), key.name]);
  return [...byType].map(
    ([type, names]) => `temporal operator search-attribute create --namespace ${namespace} ${names.map((n) => `--name ${n}`).join(' ')} --type ${CLI_TYPE_NAMES[type]}`,
  );
}
