/**
 * What of a working directory goes into its pack: every file, directory and symlink under
 * it, in a fixed order, less what its `.gitignore` and `.sternaignore` files exclude
 * (at any depth, with git's rules: a deeper file's patterns win over a shallower one's,
 * `.sternaignore` over `.gitignore` in the same directory, and nothing under an excluded
 * directory comes back). `.git` is never packed.
 *
 * Refused, each named with how to fix it: a symlink that leaves the tree (absolute, or
 * resolving outside it), a file or directory that cannot be read, a FIFO, socket or device,
 * and the two top-level names the agent keeps for itself in the work directory it unpacks
 * into (`.sterna`, its state, and `checkpoints`, STERNA_CHECKPOINT_DIR).
 */
import { lstat, open, readdir, readFile, readlink, realpath } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';
import ignore, { type Ignore } from 'ignore';

export const IGNORE_FILES = ['.gitignore', '.sternaignore'] as const;

/** Top-level names the agent uses in the directory the workdir is unpacked into (sterna-agent.sh). */
export const RESERVED_NAMES: Readonly<Record<string, string>> = {
  '.sterna': 'its own state',
  checkpoints: 'the run\'s checkpoints (STERNA_CHECKPOINT_DIR)',
};

export const EntryType = { File: 'file', Directory: 'directory', Symlink: 'symlink' } as const;
export type EntryType = (typeof EntryType)[keyof typeof EntryType];

export interface WorkdirEntry {
  /** Relative to the workdir, with "/" between segments. */
  path: string;
  type: EntryType;
  /** Bytes of a file; 0 for the others. */
  size: number;
}

export interface WorkdirListing {
  /** The workdir's absolute path. */
  root: string;
  /** Sorted by path. */
  entries: WorkdirEntry[];
}

/** A workdir that cannot be packed as it is: `problems` say which paths and how to fix each. */
export class WorkdirProblemError extends Error {
  override name = 'WorkdirProblemError';
  constructor(
    readonly root: string,
    readonly problems: string[],
  ) {
    super(`workdir ${root} cannot be packed: ${problems.join('; ')}`);
  }
}

/** At most this many problems are collected before the walk gives up. */
const MAX_PROBLEMS = 20;

interface RuleSet {
  /** The directory the patterns are relative to ('' for the root). */
  base: string;
  rules: Ignore;
}

function errnoOf(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e.code ? `${e.code}: ${e.message.replace(/^\w+: /, '')}` : String(err);
}

/** Git's precedence: the deepest rule set that says anything about `path` decides. */
function ignored(path: string, isDir: boolean, sets: readonly RuleSet[]): boolean {
  for (let i = sets.length - 1; i >= 0; i--) {
    const { base, rules } = sets[i];
    const rel = base === '' ? path : path.slice(base.length + 1);
    const verdict = rules.test(isDir ? `${rel}/` : rel);
    if (verdict.ignored) return true;
    if (verdict.unignored) return false;
  }
  return false;
}

async function ruleSetOf(dir: string, base: string, problems: string[]): Promise<RuleSet | undefined> {
  let rules: Ignore | undefined;
  for (const name of IGNORE_FILES) {
    let text: string;
    try {
      text = await readFile(join(dir, name), 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') problems.push(`${join(base, name) || name} cannot be read (${errnoOf(err)}); make it readable`);
      continue;
    }
    // Case-sensitive, as git is on Linux (core.ignorecase false).
    rules ??= ignore({ ignorecase: false });
    rules.add(text);
  }
  return rules ? { base, rules } : undefined;
}

function within(root: string, path: string): boolean {
  return path === root || path.startsWith(root + sep);
}

/** Every entry of the workdir that goes into its pack; throws WorkdirProblemError with every problem found. */
export async function listWorkdir(dir: string): Promise<WorkdirListing> {
  const given = resolve(dir);
  let root: string;
  try {
    root = await realpath(given);
    if (!(await lstat(root)).isDirectory()) throw new WorkdirProblemError(given, [`${given} is not a directory; give the directory the command runs in`]);
  } catch (err) {
    if (err instanceof WorkdirProblemError) throw err;
    throw new WorkdirProblemError(given, [`${given} cannot be read (${errnoOf(err)}); give an existing, readable directory`]);
  }
  const entries: WorkdirEntry[] = [];
  const problems: string[] = [];
  const say = (problem: string) => {
    if (problems.length < MAX_PROBLEMS) problems.push(problem);
  };

  async function visit(abs: string, rel: string, inherited: readonly RuleSet[]): Promise<void> {
    const own = await ruleSetOf(abs, rel, problems);
    const sets = own ? [...inherited, own] : inherited;
    let names: string[];
    try {
      names = (await readdir(abs)).sort();
    } catch (err) {
      say(`directory ${rel || '.'} cannot be read (${errnoOf(err)}); make it readable, or add ${rel}/ to .sternaignore`);
      return;
    }
    for (const name of names) {
      if (problems.length >= MAX_PROBLEMS) return;
      const path = rel === '' ? name : `${rel}/${name}`;
      const full = join(abs, name);
      let stat;
      try {
        stat = await lstat(full);
      } catch (err) {
        say(`${path} cannot be read (${errnoOf(err)})`);
        continue;
      }
      if (name === '.git' && stat.isDirectory()) continue;
      if (ignored(path, stat.isDirectory(), sets)) continue;
      if (rel === '' && RESERVED_NAMES[name] !== undefined) {
        say(`${path} is where the agent keeps ${RESERVED_NAMES[name]} in the directory the command runs in; rename it, or add /${name} to .sternaignore`);
        continue;
      }
      if (stat.isSymbolicLink()) {
        const problem = await symlinkProblem(root, full, path);
        if (problem) say(problem);
        else entries.push({ path, type: EntryType.Symlink, size: 0 });
      } else if (stat.isDirectory()) {
        entries.push({ path, type: EntryType.Directory, size: 0 });
        await visit(full, path, sets);
      } else if (stat.isFile()) {
        // Opened now, so an unreadable file is named here rather than halfway through the pack.
        try {
          await (await open(full, 'r')).close();
          entries.push({ path, type: EntryType.File, size: stat.size });
        } catch (err) {
          say(`${path} cannot be read (${errnoOf(err)}); make it readable, or add it to .sternaignore`);
        }
      } else {
        const kind = stat.isFIFO() ? 'a FIFO (named pipe)' : stat.isSocket() ? 'a socket' : 'a device';
        say(`${path} is ${kind}, which a pack cannot carry; add it to .sternaignore`);
      }
    }
  }

  await visit(root, '', []);
  if (problems.length > 0) throw new WorkdirProblemError(root, problems);
  entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { root, entries };
}

/** Why the symlink at `full` (`path` in the tree) would point outside the unpacked tree, or undefined. */
async function symlinkProblem(root: string, full: string, path: string): Promise<string | undefined> {
  let target: string;
  try {
    target = await readlink(full);
  } catch (err) {
    return `symlink ${path} cannot be read (${errnoOf(err)})`;
  }
  const fix = `replace it with the file itself, stage what it points to with datasets, or add ${path} to .sternaignore`;
  if (isAbsolute(target)) return `symlink ${path} points to the absolute path ${target}, which is not in the workdir once unpacked; make it relative, ${fix}`;
  if (!within(root, resolve(dirname(full), target))) return `symlink ${path} -> ${target} leaves the workdir; ${fix}`;
  // Lexically inside, but through another link (perhaps an ignored one) it may still leave.
  const real = await realpath(full).catch(() => undefined);
  if (real !== undefined && !within(root, real)) return `symlink ${path} -> ${target} resolves to ${real}, outside the workdir; ${fix}`;
  return undefined;
}

/** For a size message: the biggest top-level entries and files, as "path (N MB)". */
export function largestPaths(entries: readonly WorkdirEntry[], count = 5): { path: string; bytes: number }[] {
  const top = new Map<string, number>();
  for (const e of entries) {
    const [first] = e.path.split('/');
    const key = first === e.path && e.type !== EntryType.Directory ? first : `${first}/`;
    top.set(key, (top.get(key) ?? 0) + e.size);
  }
  const files = entries.filter((e) => e.type === EntryType.File && e.path.includes('/')).map((e) => ({ path: e.path, bytes: e.size }));
  const all = [...[...top].map(([path, bytes]) => ({ path, bytes })), ...files].filter((p) => p.bytes > 0);
  all.sort((a, b) => b.bytes - a.bytes || (a.path < b.path ? -1 : 1));
  return all.slice(0, count);
}
