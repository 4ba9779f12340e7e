/**
 * What the checks before a run (activities/check, `sterna check`) report: one finding per
 * thing checked. Plain JSON, so it can be an activity's result and `sterna check --json`'s
 * output as it is; pure, so workflow code may read it.
 *
 *   { check: 'quota:GPUS_ALL_REGIONS', ok: false,
 *     problem: "the project's GPUS_ALL_REGIONS quota is 0 (0 in use): no GPU VM can start in any region",
 *     fix: 'request at least 1 ...' }
 *
 * `ok: false` means a run of the spec cannot succeed as things stand (it would fail or never
 * start). `ok: true` with a `problem` is a warning: the run can start, but part of what the
 * spec allows cannot be used (a region without quota for spot VMs), or was not checked.
 */

export interface Finding {
  /** What was checked, as `<kind>[:<subject>...]`, e.g. `quota:us-central1:PREEMPTIBLE_NVIDIA_L4_GPUS`, `bucket:gs://b`. */
  check: string;
  ok: boolean;
  /** What is wrong, naming the resource and the figures. */
  problem?: string;
  /** What the user runs or does to fix it (a command, a console page, a quota to request). */
  fix?: string;
  /**
   * The check could not be made for a reason that passes (the service did not answer, a
   * 5xx, a rate limit, a timeout): not an answer about the run, so it does not stop one.
   */
  transient?: boolean;
  /**
   * The answer is about the credentials that checked, not the training VMs' own (a bucket
   * permission: the VMs act as their service account): `sterna check` fails on it, a run
   * goes on and meets the VMs' answer.
   */
  checkersOwn?: boolean;
}

/** The findings `sterna check` fails on: every one not ok. */
export function blockingFindings(findings: readonly Finding[]): Finding[] {
  return findings.filter((f) => !f.ok);
}

/**
 * The findings that stop a run before it creates anything: every one not ok that is an
 * answer about the run. A check the service could not answer for now does not (an API
 * outage delays a run, never fails it), nor one about the checker's own credentials rather
 * than the VMs': the run meets the real answer later, as it would have unchecked.
 */
export function findingsThatStopARun(findings: readonly Finding[]): Finding[] {
  return findings.filter((f) => !f.ok && f.transient !== true && f.checkersOwn !== true);
}

/**
 * One message for a run that fails its checks, e.g. as its named failure's message: each
 * blocking finding's problem and fix, in order.
 */
export function checksFailureMessage(findings: readonly Finding[], blocking = blockingFindings(findings)): string {
  if (blocking.length === 0) return 'every check passed';
  return blocking.map((f) => `${f.check}: ${f.problem ?? 'failed'}${f.fix ? ` (to fix: ${f.fix})` : ''}`).join('; ');
}
