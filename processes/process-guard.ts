/** Child process groups that must not outlive the Node process that started them. */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';

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

/**
 * Starts `binary` as its own process group, its output appended to `logFile` (or
 * dropped), guarded so it dies with this Node process (guardProcessGroup).
 */
export function spawnGuarded(binary: string, args: string[], logFile?: string): { child: ChildProcess; exited: Promise<number | null>; guard: number | undefined } {
  let logFd: number | 'ignore' = 'ignore';
  if (logFile) {
    mkdirSync(dirname(logFile), { recursive: true });
    logFd = openSync(logFile, 'a');
  }
  const child = spawn(binary, args, { stdio: ['ignore', logFd, logFd], detached: true });
  if (typeof logFd === 'number') closeSync(logFd);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const guard = child.pid === undefined ? undefined : guardProcessGroup(child.pid);
  return { child, exited, guard };
}
