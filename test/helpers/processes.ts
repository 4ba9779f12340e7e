/** Child processes that tests start, and stop again on every path. */
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';

export interface Spawned {
  child: ChildProcess;
  exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export function spawnLogged(command: string, args: string[], options: { env?: NodeJS.ProcessEnv; logFile: string; cwd?: string }): Spawned {
  const fd = openSync(options.logFile, 'a');
  const child = spawn(command, args, { env: options.env, cwd: options.cwd, stdio: ['ignore', fd, fd], detached: true });
  closeSync(fd);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    exited,
    async kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      try {
        process.kill(-child.pid!, signal);
      } catch {
        return;
      }
      await exited;
    },
  };
}

/** Polls until `check` returns a value (not undefined), or fails after `timeoutMs`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 60_000, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
}
