/**
 * What a V8 CPU profile (`node --cpu-prof`, one `.cpuprofile` file per thread) says about
 * where a process spent its CPU: self time by package (the `node_modules/<package>` a
 * frame's script is in, `sterna` for this repository's own code, `node:` for Node's
 * internals) and by function. bench:scale writes the worker's with `--cpu-profile DIR`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The parts of Chrome DevTools' `Profiler.Profile` this reads. */
interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTime {
  name: string;
  seconds: number;
  /** Share of the thread's sampled time. */
  share: number;
}

export interface ThreadProfile {
  file: string;
  /** Time on the CPU: every sample but V8's `(idle)` (shares are of this). */
  sampledSeconds: number;
  idleSeconds: number;
  /** V8's own frames stand for themselves: `(garbage collector)`, `(program)` (native code outside JavaScript). */
  byPackage: SelfTime[];
  byFunction: SelfTime[];
}

/** The package a script URL belongs to: the last `node_modules/<name>` (scoped names whole), else Node's or Sterna's. */
export function packageOf(url: string): string {
  if (url === '') return '(native)';
  if (url.startsWith('node:')) return 'node:internal';
  const at = url.lastIndexOf('/node_modules/');
  if (at < 0) return 'sterna';
  const [first, second] = url.slice(at + '/node_modules/'.length).split('/');
  return first.startsWith('@') ? `${first}/${second}` : first;
}

function ranked(totals: Map<string, number>, sampled: number, top: number): SelfTime[] {
  return [...totals.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, micros]) => ({ name, seconds: Math.round(micros / 1e4) / 100, share: Math.round((micros / sampled) * 1000) / 1000 }));
}

/** One thread's profile: each sample's time charged to the frame it landed in. */
export function summarizeProfile(profile: CpuProfile, file: string, top = 25): ThreadProfile {
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let sampled = 0;
  let idle = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    // timeDeltas[i] is the time from the previous sample to this one: charged to this one, as DevTools does.
    const micros = profile.timeDeltas[i] ?? 0;
    const frame = frames.get(profile.samples[i]);
    if (!frame || micros <= 0) continue;
    if (frame.functionName === '(idle)' && frame.url === '') {
      idle += micros;
      continue;
    }
    sampled += micros;
    const special = frame.functionName.startsWith('(') && frame.url === '';
    const pkg = special ? frame.functionName : packageOf(frame.url);
    const where = frame.url === '' ? '' : ` ${frame.url.replace(/^.*\/node_modules\//, '').replace(/^file:\/\/.*\/build\//, '')}:${frame.lineNumber + 1}`;
    const fn = special ? frame.functionName : `${frame.functionName || '(anonymous)'}${where}`;
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + micros);
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + micros);
  }
  return { file, sampledSeconds: Math.round(sampled / 1e4) / 100, idleSeconds: Math.round(idle / 1e4) / 100, byPackage: ranked(byPackage, sampled, top), byFunction: ranked(byFunction, sampled, top) };
}

/** Every `.cpuprofile` in `dir`, most time on the CPU first (at 2,000 runs the workflow thread's, then the main thread's: the thread id is in the file name). */
export function summarizeProfiles(dir: string, top = 25): ThreadProfile[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.cpuprofile'))
    .map((name) => summarizeProfile(JSON.parse(readFileSync(join(dir, name), 'utf8')) as CpuProfile, name, top))
    .sort((a, b) => b.sampledSeconds - a.sampledSeconds);
}
