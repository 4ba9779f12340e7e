/** A long-running control-plane process, its own process group, logging to a file. */
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';

export interface Service {
  name: string;
  pid: number;
  stop(): Promise<void>;
}

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

export function spawnService(name: string, binary: string, args: string[], logFile: string): Service {
  const fd = openSync(logFile, 'a');
  const child = spawn(binary, args, { stdio: ['ignore', fd, fd], detached: true });
  closeSync(fd);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const guard = child.pid === undefined ? undefined : guardProcessGroup(child.pid);
  return {
    name,
    pid: child.pid!,
    async stop() {
      stopGuard(guard);
      if (child.exitCode !== null || child.signalCode !== null) return;
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        return;
      }
      const kill = setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          /* gone */
        }
      }, 5_000);
      await exited;
      clearTimeout(kill);
    },
  };
}

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} not ready after ${timeoutMs} ms`);
}
