/** What the log tests share: a trainer that prints, and reading what it printed back. */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LogEvent, LogLine } from '../../client/logs';

/**
 * A trainer that prints numbered lines (every fifth also a warning on stderr), checkpoints
 * every ten, resumes from its checkpoint, and on SIGTERM says so, checkpoints and exits.
 * It also records every line it printed, per attempt and stream, in TRUTH_DIR (outside
 * the VM): what the log must hold. Its last line has no newline.
 */
export const PRINTER = `
const fs = require('fs'), path = require('path');
const total = Number(process.argv[2]);
const attempt = process.env.STERNA_ATTEMPT;
let n = process.env.STERNA_RESUME_FROM ? JSON.parse(fs.readFileSync(process.env.STERNA_RESUME_FROM, 'utf8')).n : 0;
const record = (stream, text) => fs.appendFileSync(path.join(process.env.TRUTH_DIR, 'attempt-' + attempt + '.' + stream), text + '\\n');
const say = (text) => { process.stdout.write(text + '\\n'); record('out', text); };
const warn = (text) => { process.stderr.write(text + '\\n'); record('err', text); };
function checkpoint() {
  const f = path.join(process.env.STERNA_CHECKPOINT_DIR, 'step-' + n + '.json');
  fs.writeFileSync(f + '.tmp', JSON.stringify({ n }));
  fs.renameSync(f + '.tmp', f);
  fs.writeFileSync(process.env.STERNA_PROGRESS_FILE, n + '/' + total);
}
process.on('SIGTERM', () => { say('SIGTERM at line ' + n); checkpoint(); process.exit(143); });
say('attempt ' + attempt + ' starts at line ' + n + ' \\u2014 ünïcode');
const timer = setInterval(() => {
  n++;
  say('line ' + n + ' ' + 'x'.repeat((n % 7) * 10));
  if (n % 5 === 0) warn('warning at line ' + n);
  if (n % 10 === 0) checkpoint();
  if (n >= total) {
    clearInterval(timer);
    checkpoint();
    process.stdout.write('done');
    record('out', 'done');
  }
}, 40);
`;

export function truth(dir: string, attempt: number, stream: 'out' | 'err'): string[] {
  const file = join(dir, `attempt-${attempt}.${stream}`);
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').slice(0, -1) : [];
}

export async function collect(events: AsyncIterable<LogEvent>): Promise<LogEvent[]> {
  const all: LogEvent[] = [];
  for await (const e of events) all.push(e);
  return all;
}

export const lines = (events: LogEvent[]) => events.filter((e): e is { kind: 'line' } & LogLine => e.kind === 'line');
export const texts = (events: LogEvent[], attempt: number, stream: string) => lines(events).filter((l) => l.attempt === attempt && l.stream === stream).map((l) => l.text);

