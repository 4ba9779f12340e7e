/**
 * How a benchmark's command line ends. Its children are process groups that a guard ends
 * when this process dies (processes/process-guard.ts), so a signal only has to exit; a bad
 * flag is reported in one line, anything else with its stack, and both exit 2.
 */
import { ScaleOptionError } from '../scale/options';

export function runBenchCli(name: string, main: () => Promise<void>): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      console.error(`${name}: ${signal}: exiting; the worker, emulator and dev server stop with it`);
      process.exit(130);
    });
  }
  main().catch((err: Error) => {
    console.error(`${name}: ${err instanceof ScaleOptionError ? err.message : (err.stack ?? err.message)}`);
    process.exitCode = 2;
  });
}
