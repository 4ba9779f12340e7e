/** A long-running control-plane process, its own process group, logging to a file. */
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { guardProcessGroup, stopGuard, stopProcessGroup } from '../processes/process-guard';

export interface Service {
  name: string;
  pid: number;
  stop(): Promise<void>;
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
      await stopProcessGroup(child, exited, 5_000);
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
