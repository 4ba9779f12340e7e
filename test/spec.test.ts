import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { agentAttributes, encodeList } from '../activities/agent/script';
import { MAX_USER_LABELS } from '../workflows/labels';
import { deadlineMs } from '../workflows/pricing';
import { seededRandom } from '../workflows/random';
import { checkSpec, deadlineProblem, encodedListBytes, MAX_ENCODED_LIST_BYTES, parseSpec, type RunSpecInput } from '../workflows/spec';

const repo = join(__dirname, '..', '..');
const example = (): RunSpecInput => JSON.parse(readFileSync(join(repo, 'examples', 'run.json'), 'utf8'));

/** The paths of every problem, sorted: the exact fields a spec is refused for. */
function problemPaths(input: unknown): string[] {
  const check = checkSpec(input);
  return check.ok ? [] : [...new Set(check.problems.map((p) => p.path))].sort();
}

/** A spec that sets every string field there is (and is valid). */
function everyStringSpec(): Record<string, unknown> {
  return {
    name: 'nightly run',
    backend: 'gce',
    image: 'us-docker.pkg.dev/p/r/trainer:1.0',
    command: ['python', 'train.py', '--lr', '0.1'],
    setup: ['pip install -r requirements.txt'],
    env: { MODE: 'fast', EMPTY: '' },
    datasets: [{ uri: 'gs://sterna-data/train/part-0.csv', path: 'data/train.csv' }],
    checkpoint: { uri: 'gs://sterna-data/checkpoints/', interval: '5m' },
    resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }], machineType: 'g2-standard-8' },
    placement: { regions: { allow: ['us-central1'], deny: ['europe-west4'] }, zones: { allow: ['us-central1-a'], deny: ['us-central1-b'] } },
    pricing: { mode: 'auto', maxPricePerHour: 2, budgetUsd: 100 },
    time: { deadline: '2031-06-01T12:00:00+02:00', maxRunDuration: '2d', expectedDuration: '10h' },
    recovery: { zoneCooldown: '30m' },
    labels: { team: 'ml', 'cost-center': 'r_and_d', empty: '' },
  };
}

/** Every string in a JSON value, with its path; keys of `records` count as strings too. */
function stringLeaves(value: unknown, path: string[] = []): { path: string[]; key?: boolean }[] {
  if (typeof value === 'string') return [{ path }];
  if (Array.isArray(value)) return value.flatMap((v, i) => stringLeaves(v, [...path, String(i)]));
  if (value && typeof value === 'object') {
    const isRecord = ['env', 'labels'].includes(path.join('.'));
    return Object.entries(value).flatMap(([k, v]) => [...(isRecord ? [{ path: [...path, k], key: true }] : []), ...stringLeaves(v, [...path, k])]);
  }
  return [];
}

function withString(spec: Record<string, unknown>, leaf: { path: string[]; key?: boolean }, edit: (s: string) => string): { spec: unknown; path: string } {
  const copy = structuredClone(spec);
  const parent = leaf.path.slice(0, -1).reduce((node: Record<string, unknown>, k) => node[k] as Record<string, unknown>, copy);
  const last = leaf.path[leaf.path.length - 1];
  if (leaf.key) {
    const value = parent[last];
    delete parent[last];
    parent[edit(last)] = value;
    // A bad key is reported under its own (escaped) name.
    return { spec: copy, path: [...leaf.path.slice(0, -1), JSON.stringify(edit(last)).slice(1, -1)].join('.') };
  }
  parent[last] = edit(parent[last] as string);
  return { spec: copy, path: leaf.path.join('.') };
}

/**
 * GCE's label rules as Google documents them (Resource Manager, "Requirements for
 * labels"): keys 1-63 characters, values 0-63; only lowercase letters, numeric
 * characters, underscores and dashes, international characters allowed; keys start with
 * a lowercase letter or an international character; keys and values under 128 bytes.
 */
function gceAccepts(key: string, value: string): boolean {
  const lowercaseOrInternational = (c: string) => /^[\p{Ll}\p{Lo}]$/u.test(c);
  const allowed = (c: string) => lowercaseOrInternational(c) || /^\p{N}$/u.test(c) || c === '_' || c === '-';
  const keyChars = [...key];
  const valueChars = [...value];
  return (
    keyChars.length >= 1 &&
    keyChars.length <= 63 &&
    valueChars.length <= 63 &&
    lowercaseOrInternational(keyChars[0]) &&
    keyChars.every(allowed) &&
    valueChars.every(allowed) &&
    Buffer.byteLength(key) < 128 &&
    Buffer.byteLength(value) < 128
  );
}

/**
 * Kubernetes' label rules (kubernetes.io, "Labels and Selectors", syntax and character
 * set) for a key without a prefix (GCE keys cannot hold the "/" a prefix needs): the name
 * is 1-63 characters, alphanumeric ([a-z0-9A-Z]) at both ends, with "-", "_", "." and
 * alphanumerics between; a value is empty or follows the same rule.
 */
function k8sAccepts(key: string, value: string): boolean {
  const alphanumeric = (c: string) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  const name = (s: string) => s.length >= 1 && s.length <= 63 && alphanumeric(s[0]) && alphanumeric(s[s.length - 1]) && [...s].every((c) => alphanumeric(c) || c === '-' || c === '_' || c === '.');
  return name(key) && (value === '' || name(value));
}

/**
 * Random label-like strings: mostly GCE's characters at lengths near the limits, with
 * the ends (where the two rule sets differ) often set to a letter or digit and
 * sometimes to "-", "_", "." or an uppercase or international letter; strangers mixed in.
 */
function labelFuzzer(seed: number): () => string {
  const random = seededRandom(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const common = [...'abcdefghijklmnopqrstuvwxyz0123456789_-'];
  const alphanumeric = [...'abcxyz0189'];
  const strangers = ['A', 'Z', '.', '/', ' ', 'é', 'ß', 'ж', '中', '٣', 'Ⅻ', '\u0000', '\n', '=', ':', '😀'];
  const edges = ['-', '_', '.', 'A', 'é', '1'];
  const lengths = [0, 1, 2, 3, 7, 30, 61, 62, 63, 64, 65];
  return () => {
    const length = random() < 0.6 ? pick(lengths) : Math.floor(random() * 70);
    const strangeRate = random() < 0.7 ? 0 : pick([0.02, 0.1, 0.5]);
    const chars = Array.from({ length }, () => (random() < strangeRate ? pick(strangers) : pick(common)));
    if (length > 0) chars[0] = random() < 0.85 ? pick(alphanumeric) : pick(edges);
    if (length > 1) chars[length - 1] = random() < 0.85 ? pick(alphanumeric) : pick(edges);
    return chars.join('');
  };
}

describe('run spec', () => {
  it('accepts the example spec and fills the defaults', () => {
    const spec = parseSpec(example());
    assert.equal(spec.backend, 'gce');
    assert.equal(spec.checkpoint.interval, 2);
    assert.equal(spec.resources.diskSizeGb, 100);
    assert.equal(spec.recovery.maxRestartsOnError, 2);
  });

  it('accepts a spec that uses every string field', () => {
    const check = checkSpec(everyStringSpec());
    assert.ok(check.ok, JSON.stringify(!check.ok && check.problems));
  });

  it('reads durations in seconds, minutes, hours and days', () => {
    const spec = parseSpec({ ...example(), time: { maxRunDuration: '1h30m', deadlineAfter: '2d', expectedDuration: 90 } });
    assert.equal(spec.time.maxRunDuration, 5400);
    assert.equal(spec.time.deadlineAfter, 172800);
    assert.equal(spec.time.expectedDuration, 90);
  });

  it('names every bad field at once, as a non-retryable InvalidSpec failure', () => {
    const bad = {
      ...example(),
      command: [],
      datasets: [{ uri: 'http://example.com/x', path: '../escape' }],
      resources: { accelerators: [{ type: 'tpu-v5', count: 0 }] },
      pricing: { mode: 'cheap' },
      labels: { Team: 'X' },
      surprise: true,
    };
    assert.throws(
      () => parseSpec(bad),
      (err: unknown) => {
        assert.ok(err instanceof ApplicationFailure);
        assert.equal(err.type, 'InvalidSpec');
        assert.equal(err.nonRetryable, true);
        for (const field of ['command', 'datasets.0.uri', 'datasets.0.path', 'resources.accelerators.0.type', 'resources.accelerators.0.count', 'pricing.mode', 'labels.Team']) {
          assert.match(err.message, new RegExp(`${field.replace(/\./g, '\\.')}: `), `names ${field}`);
        }
        assert.match(err.message, /surprise/);
        return true;
      },
    );
  });

  it('needs an expected duration for a deadline-aware auto run', () => {
    assert.deepEqual(problemPaths({ ...example(), pricing: { mode: 'auto' }, time: { deadlineAfter: '6h' } }), ['time.expectedDuration']);
  });

  describe('refuses, naming the field', () => {
    const spot = { mode: 'spot' } as const;
    const many = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']));
    const cases: [string, Partial<Record<keyof RunSpecInput, unknown>>, string[]][] = [
      // Item 6: durations and times that would overflow Date arithmetic in the workflow.
      ['deadlineAfter: 1e20', { pricing: spot, time: { deadlineAfter: 1e20 } }, ['time.deadlineAfter']],
      ['deadlineAfter: "99999999999999d"', { pricing: spot, time: { deadlineAfter: '99999999999999d' } }, ['time.deadlineAfter']],
      ['a duration of 10^400 days', { pricing: spot, time: { deadlineAfter: `1${'0'.repeat(400)}d` } }, ['time.deadlineAfter']],
      ['maxRunDuration over 366 days', { time: { maxRunDuration: '367d' } }, ['time.maxRunDuration']],
      ['expectedDuration 0', { time: { expectedDuration: 0 } }, ['time.expectedDuration']],
      ['a negative duration', { time: { maxRunDuration: -5 } }, ['time.maxRunDuration']],
      ['a duration that is not one', { time: { maxRunDuration: '2 weeks' } }, ['time.maxRunDuration']],
      ['a boolean duration', { time: { maxRunDuration: true } }, ['time.maxRunDuration']],
      ['zoneCooldown of 1000 days', { recovery: { zoneCooldown: '1000d' } }, ['recovery.zoneCooldown']],
      ['checkpoint interval below 1 s', { checkpoint: { uri: 'gs://sterna-examples/ckpt', interval: 0.5 } }, ['checkpoint.interval']],
      ['a deadline in the year 9999', { pricing: spot, time: { deadline: '9999-12-31T23:59:59Z' } }, ['time.deadline']],
      ['a deadline in 1970', { pricing: spot, time: { deadline: '1970-01-01T00:00:00Z' } }, ['time.deadline']],
      ['a deadline without a time zone', { pricing: spot, time: { deadline: '2030-01-01T00:00:00' } }, ['time.deadline']],
      ['a deadline on 31 February', { pricing: spot, time: { deadline: '2030-02-31T00:00:00Z' } }, ['time.deadline']],
      ['pollSeconds 0', { recovery: { pollSeconds: 0 } }, ['recovery.pollSeconds']],
      ['maxPreemptions 1e15', { recovery: { maxPreemptions: 1e15 } }, ['recovery.maxPreemptions']],
      ['maxRestartsOnError 2^53', { recovery: { maxRestartsOnError: 2 ** 53 } }, ['recovery.maxRestartsOnError']],
      ['budgetUsd 1e300', { pricing: { mode: 'spot', budgetUsd: 1e300 } }, ['pricing.budgetUsd']],
      ['maxPricePerHour 1e9', { pricing: { mode: 'spot', maxPricePerHour: 1e9 } }, ['pricing.maxPricePerHour']],
      // Item 7: NUL and control characters.
      ['a NUL in an env value', { env: { X: 'x\u0000INJECTED=1\u0000/bin/sh\u0000-c\u0000touch pwned' } }, ['env.X']],
      ['a NUL in a dataset URI', { datasets: [{ uri: 'gs://sterna-examples/a\u0000file:///etc/hostname', path: 'a' }] }, ['datasets.0.uri']],
      ['a newline in an argv item', { command: ['python', 'train.py\n--evil'] }, ['command.1']],
      ['an empty program name', { command: ['', 'x'] }, ['command.0']],
      ['an env name with "="', { env: { 'A=B': '1' } }, ['env.A=B']],
      ['an env name Sterna sets', { env: { STERNA_RUN_ID: 'mine' } }, ['env.STERNA_RUN_ID']],
      // Item 8: sizes, escapes, file://, labels.
      ['a 200 KB argument', { command: ['python', 'x'.repeat(200_000)] }, ['command']],
      ['a 200 KB environment', { env: { BIG: 'x'.repeat(200_000) } }, ['env']],
      ['10000 small env entries', { env: Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`V${i}`, 'x'.repeat(8)])) }, ['env']],
      ['".." in a dataset URI', { datasets: [{ uri: 'gs://sterna-examples/../../etc/passwd', path: 'a' }] }, ['datasets.0.uri']],
      ['"." in a checkpoint URI', { checkpoint: { uri: 'gs://sterna-examples/./ckpt' } }, ['checkpoint.uri']],
      ['".." at the end of a URI', { checkpoint: { uri: 'gs://sterna-examples/ckpt/..' } }, ['checkpoint.uri']],
      ['"//" in a URI', { checkpoint: { uri: 'gs://sterna-examples//etc' } }, ['checkpoint.uri']],
      ['a wildcard in a URI', { datasets: [{ uri: 'gs://sterna-examples/**', path: 'all' }] }, ['datasets.0.uri']],
      ['a file:// dataset', { datasets: [{ uri: 'file:///etc/hostname', path: 'h' }] }, ['datasets.0.uri']],
      ['a file:// checkpoint', { checkpoint: { uri: 'file:///tmp/ckpt' } }, ['checkpoint.uri']],
      ['a bucket named ".."', { checkpoint: { uri: 'gs://../x' } }, ['checkpoint.uri']],
      ['".." in a dataset path', { datasets: [{ uri: 'gs://sterna-examples/a', path: 'data/../../x' }] }, ['datasets.0.path']],
      ['"." as a dataset path', { datasets: [{ uri: 'gs://sterna-examples/a', path: '.' }] }, ['datasets.0.path']],
      ['an absolute dataset path', { datasets: [{ uri: 'gs://sterna-examples/a', path: '/etc/passwd' }] }, ['datasets.0.path']],
      ['61 labels', { labels: many(MAX_USER_LABELS + 1) }, ['labels']],
      ['a label key Sterna sets', { labels: { 'sterna-run': 'mine' } }, ['labels.sterna-run']],
      ['any sterna- label key', { labels: { 'sterna-exec': 'x', 'sterna-anything': 'y' } }, ['labels.sterna-anything', 'labels.sterna-exec']],
      ['a label value ending in "-" (Kubernetes refuses)', { labels: { team: 'ml-' } }, ['labels.team']],
      ['a label value starting with "_" (Kubernetes refuses)', { labels: { team: '_ml' } }, ['labels.team']],
      ['a label value with "." (GCE refuses)', { labels: { team: 'ml.core' } }, ['labels.team']],
      ['a label key ending in "_" (Kubernetes refuses)', { labels: { team_: 'ml' } }, ['labels.team_']],
      ['an uppercase label key (GCE refuses)', { labels: { Team: 'ml' } }, ['labels.Team']],
      ['a 64-character label value', { labels: { team: 'a'.repeat(64) } }, ['labels.team']],
    ];
    for (const [what, overrides, paths] of cases) {
      it(what, () => assert.deepEqual(problemPaths({ ...example(), ...overrides }), paths));
    }
  });

  it('accepts values at every bound', () => {
    const check = checkSpec({
      ...example(),
      pricing: { mode: 'spot', budgetUsd: 10_000_000, maxPricePerHour: 10_000 },
      time: { deadline: '2099-12-31T23:59:59Z', maxRunDuration: '366d', expectedDuration: 31_622_400 },
      recovery: { maxPreemptions: 1000, maxRestartsOnError: 100, zoneCooldown: 0, pollSeconds: 60 },
      labels: Object.fromEntries(Array.from({ length: MAX_USER_LABELS }, (_, i) => [`k${i}`, 'v'.repeat(63)])),
      checkpoint: { uri: 'gs://sterna-examples/ckpt', interval: 1 },
    });
    assert.ok(check.ok, JSON.stringify(!check.ok && check.problems));
  });

  it('accepts exactly the labels both GCE and Kubernetes accept (fuzzed against both rule sets)', () => {
    let accepted = 0;
    let refused = 0;
    for (const seed of [1, 2, 3, 4, 5]) {
      const next = labelFuzzer(seed);
      for (let n = 0; n < 4000; n++) {
        const key = next();
        const value = next();
        if (key === '__proto__') continue;
        const expected = gceAccepts(key, value) && k8sAccepts(key, value) && !key.startsWith('sterna-');
        const paths = problemPaths({ ...example(), labels: { [key]: value } });
        const where = `seed ${seed} #${n}: ${JSON.stringify(key)}: ${JSON.stringify(value)}`;
        if (expected) {
          accepted++;
          assert.deepEqual(paths, [], `refused ${where}`);
        } else {
          refused++;
          assert.deepEqual(paths, [`labels.${JSON.stringify(key).slice(1, -1)}`], `accepted ${where}`);
        }
      }
    }
    // Both outcomes in bulk, or the fuzzing proves little.
    assert.ok(accepted > 2000 && refused > 2000, `${accepted} accepted, ${refused} refused`);
  });

  it('refuses a control character in every string field, naming that field', () => {
    const spec = everyStringSpec();
    const leaves = stringLeaves(spec);
    assert.ok(leaves.length >= 25, `found ${leaves.length} string fields`);
    for (const bad of ['\u0000', '\n', '\r', '\t', '\u001b', '\u007f', '\u0085', '\u2028', '\u202e', '\ud800']) {
      for (const leaf of leaves) {
        const { spec: edited, path } = withString(spec, leaf, (s) => `${s.slice(0, 1)}${bad}${s.slice(1)}`);
        const paths = problemPaths(edited);
        assert.deepEqual(paths, [path], `${JSON.stringify(bad)} in ${leaf.key ? 'the key ' : ''}${leaf.path.join('.')}`);
      }
    }
  });

  it('measures argv and env exactly as the agent is sent them, and refuses one byte more than fits', () => {
    const random = seededRandom(7);
    const pieces = ['a', 'é', '€', '😀', '=', '\n', '', ' ', '-x'];
    for (let n = 0; n < 200; n++) {
      const items = Array.from({ length: Math.floor(random() * 6) }, () => Array.from({ length: Math.floor(random() * 9) }, () => pieces[Math.floor(random() * pieces.length)]).join(''));
      assert.equal(Buffer.byteLength(encodeList(items)), encodedListBytes(items), JSON.stringify(items));
    }
    const attributes = agentAttributes({ runId: 'r', attempt: 1, argv: ['python', 'é'], env: { A: '1' }, datasets: [], checkpointUri: 'gs://b/c', pollSeconds: 1 });
    assert.equal(Buffer.byteLength(attributes['sterna-argv']), encodedListBytes(['python', 'é']));
    // One item of n bytes is 2 + 4 * ceil(n / 3) + 1 bytes encoded: 73725 fits (98303), 73726 does not (98307).
    assert.equal(encodedListBytes(['x'.repeat(73_725)]), MAX_ENCODED_LIST_BYTES - 1);
    assert.equal(encodedListBytes(['x'.repeat(73_726)]), MAX_ENCODED_LIST_BYTES + 3);
    assert.deepEqual(problemPaths({ ...example(), command: ['x'.repeat(73_725)] }), []);
    assert.deepEqual(problemPaths({ ...example(), command: ['x'.repeat(73_726)] }), ['command']);
  });

  it('keeps every accepted duration and deadline inside valid Date arithmetic', () => {
    const random = seededRandom(42);
    const nows = [Date.parse('2000-01-01T00:00:00Z'), Date.now(), Date.parse('2099-12-31T23:59:59Z')];
    const anyDuration = () => {
      const r = random();
      if (r < 0.2) return 31_622_400 * random() * 2;
      if (r < 0.4) return `${Math.floor(random() * 800)}d${Math.floor(random() * 30)}h`;
      if (r < 0.5) return [1e20, -1, 0, 1e-9, Number.MAX_SAFE_INTEGER, 31_622_400, 31_622_401][Math.floor(random() * 7)];
      return random() * 1e6;
    };
    let accepted = 0;
    for (let n = 0; n < 2000; n++) {
      const year = 1990 + Math.floor(random() * 150);
      const deadline = random() < 0.5 ? `${year}-0${1 + Math.floor(random() * 9)}-1${Math.floor(random() * 9)}T00:00:00Z` : undefined;
      const check = checkSpec({
        ...example(),
        pricing: { mode: 'spot' },
        time: deadline ? { deadline, maxRunDuration: anyDuration() } : { deadlineAfter: anyDuration(), maxRunDuration: anyDuration() },
        recovery: { zoneCooldown: anyDuration() },
      });
      if (!check.ok) continue;
      accepted++;
      for (const now of nows) {
        const at = deadlineMs(check.spec, now);
        if (at !== undefined) assert.doesNotThrow(() => new Date(at).toISOString(), `deadline ${String(at)}`);
        assert.doesNotThrow(() => new Date(now + check.spec.time.maxRunDuration! * 1000).toISOString());
        assert.doesNotThrow(() => new Date(now + check.spec.recovery.zoneCooldown * 1000).toISOString());
      }
    }
    assert.ok(accepted > 200, `only ${accepted} specs accepted: the test would prove little`);
  });

  it('checks a deadline against the start time when one is given', () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    const at = (deadline: string) => checkSpec({ ...example(), pricing: { mode: 'spot' }, time: { deadline } }, { nowMs: now });
    assert.ok(at('2030-06-01T00:00:00Z').ok);
    const past = at('2029-12-31T00:00:00Z');
    assert.deepEqual(!past.ok && past.problems, [{ path: 'time.deadline', message: '2029-12-31T00:00:00Z is not in the future' }]);
    assert.match(deadlineProblem('2031-06-01T00:00:00Z', now) ?? '', /more than 366d away/);
    assert.match(deadlineProblem('9999-01-01T00:00:00Z', now) ?? '', /between/);
    assert.match(deadlineProblem(42, now) ?? '', /expected string/);
    // Without a start time (a continued run) a passed deadline is not a spec error.
    assert.ok(checkSpec({ ...example(), pricing: { mode: 'spot' }, time: { deadline: '2029-12-31T00:00:00Z' } }).ok);
  });
});
