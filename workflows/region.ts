/**
 * The region a zone is in, by GCE's naming (`<region>-<letter>`: us-central1-a is in
 * us-central1). Pure, with no imports, so the workflows, the providers, the emulator and
 * the catalog share this one definition.
 */
export function regionOf(zone: string): string {
  return zone.replace(/-[a-z]$/, '');
}
