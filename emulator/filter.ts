/**
 * Compute Engine list `filter` expressions, evaluated against a resource's JSON.
 *
 * Supported (the subset GCE documents for list methods):
 *   field = "value"   field != value   field : value (has)   field > / < / >= / <= value
 *   labels.key = value                 nested.field = value
 *   (a) AND (b)   a OR b   NOT a   -a   and juxtaposition (a) (b) meaning AND
 *   field eq regex / field ne regex    (the legacy regular-expression form, full match)
 * `=`/`!=` compare strings exactly, with `*` as a wildcard. A URL-valued field also
 * matches its last path segment (so `zone = "us-central1-a"` matches the zone URL).
 */
import { GceError, Reason } from './errors';

type Node =
  | { kind: 'and' | 'or'; left: Node; right: Node }
  | { kind: 'not'; inner: Node }
  | { kind: 'cmp'; field: string; op: string; value: string };

type Token = { type: 'lparen' | 'rparen' | 'word' | 'string' | 'op'; text: string };

const OPERATORS = ['!=', '>=', '<=', '=', ':', '>', '<'];

function tokenize(input: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < input.length) {
    const c = input[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === '(') {
      tokens.push({ type: 'lparen', text: c });
      i++;
    } else if (c === ')') {
      tokens.push({ type: 'rparen', text: c });
      i++;
    } else if (c === '"' || c === "'") {
      let j = i + 1;
      let text = '';
      while (j < input.length && input[j] !== c) {
        if (input[j] === '\\' && j + 1 < input.length) j++;
        text += input[j];
        j++;
      }
      if (j >= input.length) throw invalidFilter(input, 'unterminated string');
      tokens.push({ type: 'string', text });
      i = j + 1;
    } else {
      const op = OPERATORS.find((o) => input.startsWith(o, i));
      if (op) {
        tokens.push({ type: 'op', text: op });
        i += op.length;
        continue;
      }
      // A bare value right after an operator runs to the next space or ')' (it may hold ':' or '=').
      const afterOp = tokens[tokens.length - 1]?.type === 'op';
      let j = i;
      while (j < input.length && !/[\s()]/.test(input[j]) && (afterOp || !OPERATORS.some((o) => input.startsWith(o, j)))) j++;
      tokens.push({ type: 'word', text: input.slice(i, j) });
      i = j;
    }
  }
  return tokens;
}

function invalidFilter(filter: string, why: string): GceError {
  return new GceError(400, Reason.Invalid, `Invalid value for field 'filter': '${filter}'. Invalid list filter expression: ${why}.`);
}

class Parser {
  private pos = 0;
  constructor(
    private readonly tokens: Token[],
    private readonly source: string,
  ) {}

  parse(): Node | undefined {
    if (this.tokens.length === 0) return undefined;
    const node = this.orExpr();
    if (this.pos < this.tokens.length) throw invalidFilter(this.source, `unexpected '${this.tokens[this.pos].text}'`);
    return node;
  }

  private peek(): Token | undefined {
    return this.tokens[this.pos];
  }

  private isKeyword(word: string): boolean {
    const t = this.peek();
    return t?.type === 'word' && t.text.toUpperCase() === word;
  }

  private orExpr(): Node {
    let left = this.andExpr();
    while (this.isKeyword('OR')) {
      this.pos++;
      left = { kind: 'or', left, right: this.andExpr() };
    }
    return left;
  }

  private andExpr(): Node {
    let left = this.unary();
    for (;;) {
      if (this.isKeyword('AND')) {
        this.pos++;
        left = { kind: 'and', left, right: this.unary() };
        continue;
      }
      const t = this.peek();
      // Juxtaposition is an implicit AND: `(a = 1) (b = 2)`.
      if (t && (t.type === 'lparen' || (t.type === 'word' && !this.isKeyword('OR')))) {
        left = { kind: 'and', left, right: this.unary() };
        continue;
      }
      return left;
    }
  }

  private unary(): Node {
    if (this.isKeyword('NOT')) {
      this.pos++;
      return { kind: 'not', inner: this.unary() };
    }
    const t = this.peek();
    if (t?.type === 'word' && t.text.startsWith('-') && t.text.length > 1) {
      this.tokens[this.pos] = { type: 'word', text: t.text.slice(1) };
      return { kind: 'not', inner: this.unary() };
    }
    if (t?.type === 'lparen') {
      this.pos++;
      const inner = this.orExpr();
      if (this.peek()?.type !== 'rparen') throw invalidFilter(this.source, 'missing )');
      this.pos++;
      return inner;
    }
    return this.comparison();
  }

  private comparison(): Node {
    const field = this.peek();
    if (field?.type !== 'word') throw invalidFilter(this.source, 'expected a field name');
    this.pos++;
    let op = this.peek();
    if (op?.type === 'word' && (op.text === 'eq' || op.text === 'ne')) op = { type: 'op', text: op.text };
    if (op?.type !== 'op') throw invalidFilter(this.source, `expected an operator after '${field.text}'`);
    this.pos++;
    const value = this.peek();
    if (!value || (value.type !== 'word' && value.type !== 'string')) throw invalidFilter(this.source, `expected a value after '${field.text} ${op.text}'`);
    this.pos++;
    if (!/^[A-Za-z_][A-Za-z0-9_.-]*$/.test(field.text)) throw invalidFilter(this.source, `bad field name '${field.text}'`);
    return { kind: 'cmp', field: field.text, op: op.text, value: value.text };
  }
}

export type Predicate = (resource: unknown) => boolean;

/** Compiles a filter; throws a GCE 400 for an expression it cannot parse. */
export function compileFilter(filter: string | undefined | null): Predicate {
  if (!filter || filter.trim() === '') return () => true;
  if (filter.length > 4096) throw invalidFilter(filter.slice(0, 64), 'too long');
  const node = new Parser(tokenize(filter), filter).parse();
  if (!node) return () => true;
  return (resource) => evaluate(node, resource);
}

function fieldValue(resource: unknown, path: string): unknown {
  // labels.<key> may itself contain dots in neither GCE nor here; split on the first segment only for maps.
  let value: unknown = resource;
  const parts = path.split('.');
  for (let i = 0; i < parts.length; i++) {
    if (value === null || typeof value !== 'object') return undefined;
    const obj = value as Record<string, unknown>;
    if (parts[i] === 'labels' && i + 1 < parts.length) return (obj.labels as Record<string, unknown> | undefined)?.[parts.slice(i + 1).join('.')];
    value = obj[parts[i]];
  }
  return value;
}

function wildcard(pattern: string): RegExp {
  return new RegExp(`^${pattern.split('*').map(escapeRegExp).join('.*')}$`);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function matchesString(actual: string, expected: string): boolean {
  if (expected.includes('*') ? wildcard(expected).test(actual) : actual === expected) return true;
  // URL-valued fields (zone, machineType, targetLink) also match by their last segment.
  return /^https?:\/\//.test(actual) && !expected.includes('/') && actual.slice(actual.lastIndexOf('/') + 1) === expected;
}

function scalars(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) return value.flatMap(scalars);
  if (typeof value === 'object') return [];
  return [String(value)];
}

function evaluate(node: Node, resource: unknown): boolean {
  switch (node.kind) {
    case 'and':
      return evaluate(node.left, resource) && evaluate(node.right, resource);
    case 'or':
      return evaluate(node.left, resource) || evaluate(node.right, resource);
    case 'not':
      return !evaluate(node.inner, resource);
    case 'cmp':
      return compare(node, fieldValue(resource, node.field));
  }
}

function compare(node: { op: string; value: string }, raw: unknown): boolean {
  const values = scalars(raw);
  switch (node.op) {
    case '=':
      return values.some((v) => matchesString(v, node.value));
    case '!=':
      return !values.some((v) => matchesString(v, node.value));
    case ':':
      if (node.value === '*') return raw !== undefined && raw !== null;
      return values.some((v) => v.includes(node.value)) || (typeof raw === 'object' && raw !== null && node.value in (raw as object));
    case 'eq':
    case 'ne': {
      let re: RegExp;
      try {
        re = new RegExp(`^(?:${node.value})$`);
      } catch {
        throw new GceError(400, Reason.Invalid, `Invalid value for field 'filter': invalid regular expression '${node.value}'`);
      }
      const hit = values.some((v) => re.test(v));
      return node.op === 'eq' ? hit : !hit;
    }
    default: {
      const n = Number(node.value);
      return values.some((v) => {
        const a = Number.isFinite(Number(v)) && Number.isFinite(n) ? Number(v) : v;
        const b = typeof a === 'number' ? n : node.value;
        if (node.op === '>') return a > b;
        if (node.op === '<') return a < b;
        if (node.op === '>=') return a >= b;
        return a <= b;
      });
    }
  }
}
