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
