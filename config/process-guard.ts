/** Child process groups that must not outlive the Node process that started them. */
import { spawn, type ChildProcess } from 'node:child_process';

/**
 * Ends process group `pgid` if this Node process dies without stopping it (a test run
 * killed by a timeout or SIGKILL runs no `after` hook): a detached shell polls both
 * pids once a second and exits by itself as soon as the group is gone. The caller
 * kills the returned pid when it stops the group normally.
 */
export function guardProcessGroup(pgid: number): number | undefined {
  const script =
    'while kill -0 "-$2" 2>/dev/null; do ' +
    'if ! kill -0 "$1" 2>/dev/null; then kill -TERM "-$2" 2>/dev/null; sleep 5; kill -KILL "-$2" 2>/dev/null; exit 0; fi; ' +
    'sleep 1; done';
  const guard = spawn('/bin/sh', ['-c', script, 'sterna-guard', String(process.pid), String(pgid)], { stdio: 'ignore', detached: true });
  guard.on('error', () => undefined);
  guard.unref();
  return guard.pid;
}

export function stopGuard(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    /* already gone */
  }
}

/** SIGTERM to the child's process group, SIGKILL after `graceMs`; resolves once it exited. */
export async function stopProcessGroup(child: ChildProcess, exited: Promise<unknown>, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid!, 'SIGTERM');
  } catch {
    return;
  }
  const killTimer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }, graceMs);
  await exited;
  clearTimeout(killTimer);
}
