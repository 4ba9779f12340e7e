/**
 * Partial responses, as every Google API serves them: the `fields` query parameter or the
 * `X-Goog-FieldMask` header selects parts of the response, e.g.
 * `nextPageToken,items/*\/instances(name,status,scheduling/provisioningModel)`.
 *
 * The grammar (Google's "fields" syntax): a comma-separated list of selections; a selection
 * is a path of names joined by `/` (`*` matches every key of an object, as in a map such as
 * an aggregated list's `items`), optionally followed by a parenthesised sub-selection that
 * applies below the path (`.` joins names too, as in a FieldMask). Selecting a field that
 * holds an array applies the rest to each element. A malformed mask is a 400, as on GCE; a
 * well-formed name the response lacks selects nothing (the emulator has no schema to refuse
 * unknown names against, which GCE does).
 */
import { GceError, Reason } from './errors';

/** A selection tree: each name maps to what is selected below it (`true`: all of it). */
export type Selection = Map<string, Selection | true>;

export function parseFieldMask(text: string): Selection {
  const mask = text.replace(/\s+/g, '');
  let at = 0;
  const fail = (why: string): never => {
    throw new GceError(400, Reason.Invalid, `Invalid field selection ${mask}: ${why} at character ${at}`);
  };
  const name = (): string => {
    const match = /^(\*|[A-Za-z_][A-Za-z0-9_]*)/.exec(mask.slice(at));
    if (!match) return fail('expected a field name');
    at += match[0].length;
    return match[0];
  };
  const merge = (into: Selection, key: string, below: Selection | true) => {
    const had = into.get(key);
    if (had === true || below === true) into.set(key, true);
    else if (had) for (const [k, v] of below) merge(had, k, v);
    else into.set(key, below);
  };
  const list = (): Selection => {
    const selection: Selection = new Map();
    for (;;) {
      const path = [name()];
      while (mask[at] === '/' || mask[at] === '.') {
        at += 1;
        path.push(name());
      }
      let below: Selection | true = true;
      if (mask[at] === '(') {
        at += 1;
        below = list();
        if (mask[at] !== ')') fail('expected ")"');
        at += 1;
      }
      for (let i = path.length - 1; i > 0; i -= 1) below = new Map([[path[i], below]]);
      merge(selection, path[0], below);
      if (mask[at] !== ',') return selection;
      at += 1;
    }
  };
  if (!mask) fail('empty');
  const selection = list();
  if (at !== mask.length) fail('unexpected character');
  return selection;
}

/** `value` with only the selected parts. */
export function applyFieldMask(value: unknown, selection: Selection): unknown {
  if (Array.isArray(value)) return value.map((element) => applyFieldMask(element, selection));
  if (value === null || typeof value !== 'object') return value;
  const object = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, below] of selection) {
    const keys = key === '*' ? Object.keys(object) : [key];
    for (const k of keys) {
      if (!(k in object)) continue;
      out[k] = below === true ? object[k] : applyFieldMask(object[k], below);
    }
  }
  return out;
}
