/**
 * A VM's guest: the instance's `startup-script` run by bash as its own process group
 * (detached, so it is not the emulator's to take down: VMs outlive the emulator as
 * real VMs outlive their API clients). A small wrapper records the script's exit
 * status in the instance directory, where a restarted emulator can still read it.
 *
 *   <dir>/startup-script        the script from metadata
 *   <dir>/vm-boot.sh            the wrapper (the process group leader)
 *   <dir>/serial-port.log       stdout and stderr (served as serial port output)
 *   <dir>/startup-script.exit   the exit status, once the script has exited
 *   <dir>/guest-bin/            the guest OS's `poweroff` and `shutdown` (first on PATH), and a
 *                               stand-in `nvidia-smi` on a VM with GPUs (gpu-telemetry.ts)
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NVIDIA_SMI_SOURCE } from './gpu-telemetry';

export const SERIAL_LOG = 'serial-port.log';
const SCRIPT = 'startup-script';
const WRAPPER = 'vm-boot.sh';
const EXIT_FILE = 'startup-script.exit';

// The wrapper traps TERM with a handler (not an ignore, which the script would inherit)
// so that it outlives the script's own SIGTERM handling and can record its status.
const WRAPPER_SOURCE = `#!/bin/bash
# Written by the Sterna GCE emulator: runs the startup script as the guest agent would
# and records its exit status. SIGTERM is the ACPI soft-off of a stop or preemption.
trap ':' TERM
bash ./${SCRIPT}
status=$?
echo "$status" > ./${EXIT_FILE}.tmp && mv -f ./${EXIT_FILE}.tmp ./${EXIT_FILE}
`;

/** Directory of the guest's own commands, put first on its PATH. */
export const GUEST_BIN = 'guest-bin';

// A guest that powers itself off ends in ACPI power-off, and GCE then stops the VM. The
// emulator's guest has no OS to do that: its poweroff asks the VM's host (the metadata
// server's private endpoint) instead, and can never reach the machine running the emulator.
const POWEROFF_SOURCE = `#!/bin/bash
# Written by the Sterna GCE emulator: the guest OS's power-off, as the VM's host sees it.
exec curl -sf -X POST -H 'Metadata-Flavor: Google' "http://\${GCE_METADATA_HOST}/emulator/v1/guest/poweroff" >/dev/null
`;

export interface SpawnedVm {
  pid: number;
  pgid: number;
}

/** Starts the guest. `env` is the whole environment (no variable of the emulator leaks in). */
export function startVm(dir: string, startupScript: string, env: Record<string, string>, options: { gpus?: boolean } = {}): SpawnedVm {
  writeFileSync(join(dir, SCRIPT), startupScript, { mode: 0o755 });
  writeFileSync(join(dir, WRAPPER), WRAPPER_SOURCE, { mode: 0o755 });
  mkdirSync(join(dir, GUEST_BIN), { recursive: true });
  for (const command of ['poweroff', 'shutdown', 'halt']) writeFileSync(join(dir, GUEST_BIN, command), POWEROFF_SOURCE, { mode: 0o755 });
  if (options.gpus) writeFileSync(join(dir, GUEST_BIN, 'nvidia-smi'), NVIDIA_SMI_SOURCE, { mode: 0o755 });
  const log = openSync(join(dir, SERIAL_LOG), 'a');
  try {
    const child = spawn('bash', [join(dir, WRAPPER)], { cwd: dir, env, detached: true, stdio: ['ignore', log, log] });
    if (child.pid === undefined) throw new Error(`could not start bash for ${dir}`);
    // Reap the wrapper when it exits, but never keep the emulator's event loop alive for it.
    child.on('error', () => undefined);
    child.unref();
    return { pid: child.pid, pgid: child.pid };
  } finally {
    closeSync(log);
  }
}

/** The startup script's exit status, if it has exited. */
export function readExitCode(dir: string): number | undefined {
  const file = join(dir, EXIT_FILE);
  if (!existsSync(file)) return undefined;
  const n = Number(readFileSync(file, 'utf8').trim());
  return Number.isInteger(n) ? n : undefined;
}

/**
 * True while any process of the group is alive. Zombies do not count: in a container
 * whose init does not reap, a killed guest would otherwise look alive forever.
 */
export function groupAlive(pgid: number | undefined): boolean {
  if (!pgid) return false;
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  if (process.platform !== 'linux') return true;
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      } catch {
        continue;
      }
      // pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') return true;
    }
    return false;
  } catch {
    return true;
  }
}

/** Sends a signal to the whole group; false if it no longer exists. */
export function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): boolean {
  if (!pgid) return false;
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** The tail of the serial log from byte `start`, as `instances.getSerialPortOutput` serves it. */
export function readSerial(dir: string, start: number, maxBytes = 1024 * 1024): { contents: string; start: number; next: number } {
  const file = join(dir, SERIAL_LOG);
  if (!existsSync(file)) return { contents: '', start: 0, next: 0 };
  const data = readFileSync(file);
  const from = Math.max(0, Math.min(start, data.length), data.length - maxBytes);
  return { contents: data.subarray(from).toString('utf8'), start: from, next: data.length };
}
