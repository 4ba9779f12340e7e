/**
 * What counts as text in a spec, and how long it is once sent. Pure (no Buffer): it
 * runs inside the workflow sandbox as well as in the client and the CLI.
 */

/**
 * The first character that has no place in a spec string: C0 and C1 control characters
 * (NUL, newline, ESC...) and DEL, which split lists, forge log lines or drive terminals;
 * Unicode line separators and bidirectional controls, which make text display other
 * than it is; and unpaired surrogates, which are not text (UTF-8 cannot carry them).
 */
export function forbiddenCharacter(text: string): { index: number; description: string } | undefined {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
    }
    const hex = `U+${c.toString(16).toUpperCase().padStart(4, '0')}`;
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return { index: i, description: `the control character ${hex}` };
    if (c === 0x2028 || c === 0x2029) return { index: i, description: `the line separator ${hex}` };
    if ((c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069)) return { index: i, description: `the bidirectional control ${hex}` };
    if (c >= 0xd800 && c <= 0xdfff) return { index: i, description: `an unpaired surrogate ${hex}` };
  }
  return undefined;
}

/** Bytes of UTF-8. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return bytes;
}
