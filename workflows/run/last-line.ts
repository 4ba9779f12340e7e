/**
 * The live attempt's last printed line: what the agent publishes as `sterna/last-line`
 * (sterna-agent.sh `publish_last_line`: secrets replaced by ***, control characters and
 * invalid UTF-8 gone, at most 160 characters), kept by the run for its current details in
 * the web UI and `sterna status`. The agent bounds it already; it is bounded again here,
 * where it is read (activities/agent/script.ts) and where the run keeps it, because an
 * observation is a signal anyone allowed to signal the run can send.
 */
import type { RunState } from './state';

/** At most this many characters (Unicode code points), as the agent cuts it. */
export const LAST_LINE_CHARS = 160;

/**
 * The line as it may be kept and shown: control characters (C0, DEL, C1) and lone
 * surrogates out, spaces trimmed, at most LAST_LINE_CHARS characters (the last one `…`
 * when cut); undefined when nothing is left.
 */
export function boundLastLine(raw: string | undefined): string | undefined {
  if (typeof raw !== 'string') return undefined;
  // Code points, so a character outside the BMP is never cut in half.
  const chars = Array.from(raw).filter((c) => !isControlOrLoneSurrogate(c.codePointAt(0)!));
  while (chars.length > 0 && chars[0] === ' ') chars.shift();
  while (chars.length > 0 && chars[chars.length - 1] === ' ') chars.pop();
  if (chars.length === 0) return undefined;
  return chars.length <= LAST_LINE_CHARS ? chars.join('') : `${chars.slice(0, LAST_LINE_CHARS - 1).join('')}…`;
}

function isControlOrLoneSurrogate(code: number): boolean {
  return code < 0x20 || (code >= 0x7f && code <= 0x9f) || (code >= 0xd800 && code <= 0xdfff);
}

/** Keeps the live attempt's line (the reducer calls it with the live attempt only): one line, the newest. */
export function absorbLastLine(state: RunState, attempt: number, raw: string | undefined, nowMs: number): void {
  const text = boundLastLine(raw);
  if (text === undefined) return;
  if (state.lastLine?.attempt === attempt && state.lastLine.text === text) return;
  state.lastLine = { attempt, text, atMs: nowMs };
}

/** The line of `attempt`, if the run kept one for it (a line of an earlier attempt is not shown as the current one). */
export function lastLineOf(state: RunState, attempt: number | undefined): string | undefined {
  return attempt !== undefined && state.lastLine?.attempt === attempt ? state.lastLine.text : undefined;
}

/**
 * The line as Markdown inline code: fenced with more backticks than it holds in a row
 * (padded with a space where it starts or ends with one), and no `$$`, which the web UI's
 * Markdown reads as math even in code (a zero-width space goes between two dollar signs).
 */
export function markdownCode(text: string): string {
  const safe = text.replace(/\$(?=\$)/g, '$\u200b');
  const longest = Math.max(0, ...(safe.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  const pad = safe.startsWith('`') || safe.endsWith('`') ? ' ' : '';
  return `${fence}${pad}${safe}${pad}${fence}`;
}
