/**
 * Every relative link in the documentation (README.md, bench/README.md and docs/) points
 * at a file or folder that exists in the repository and, when it names a heading
 * (`page.md#heading`), at a heading that page has. Pages move often (issue 37 split the
 * README into docs/); a link left behind is found here, not by a reader. Pure: reads the
 * Markdown files, nothing else.
 */
import { strict as assert } from 'node:assert';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

const REPO_ROOT = join(__dirname, '..', '..');

interface Link {
  file: string;
  line: number;
  target: string;
}

/** The documentation's Markdown files, as paths from the repository root. */
function docFiles(): string[] {
  const files = ['README.md', 'bench/README.md'];
  const walk = (dir: string): void => {
    for (const name of readdirSync(join(REPO_ROOT, dir)).sort()) {
      const path = join(dir, name);
      if (statSync(join(REPO_ROOT, path)).isDirectory()) walk(path);
      else if (name.endsWith('.md')) files.push(path);
    }
  };
  walk('docs');
  return files;
}

/** Inline links and images outside code: `[text](target)`, `![alt](target)`; a title after the target is dropped. */
export function linksIn(file: string, text: string): Link[] {
  const links: Link[] = [];
  let fenced = false;
  text.split('\n').forEach((raw, i) => {
    if (/^\s*```/.test(raw)) {
      fenced = !fenced;
      return;
    }
    if (fenced) return;
    const line = raw.replace(/`[^`]*`/g, '');
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ file, line: i + 1, target: m[1] });
  });
  return links;
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const heading = !fenced && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** What is wrong with one link, or undefined: `read` gives a repository file's text (undefined when there is none). */
export function problemOf(link: Link, read: (path: string) => string | undefined, isDir: (path: string) => boolean): string | undefined {
  const { target } = link;
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // https:, mailto: ...: not checked here
  const [path, anchor] = target.split('#', 2);
  const resolved = path === '' ? link.file : join(dirname(link.file), decodeURIComponent(path));
  if (relative(REPO_ROOT, join(REPO_ROOT, resolved)).startsWith('..')) return `${target} leaves the repository`;
  const text = read(resolved);
  if (text === undefined && !isDir(resolved)) return `${target}: no file or folder ${resolved}`;
  if (anchor !== undefined && anchor !== '') {
    if (text === undefined || !resolved.endsWith('.md')) return `${target}: an anchor into something that is not a Markdown page`;
    if (!anchorsOf(text).has(anchor)) return `${target}: ${resolved} has no heading #${anchor}`;
  }
  return undefined;
}

function readRepo(path: string): string | undefined {
  const full = join(REPO_ROOT, path);
  return existsSync(full) && statSync(full).isFile() ? readFileSync(full, 'utf8') : undefined;
}

function isRepoDir(path: string): boolean {
  const full = join(REPO_ROOT, path);
  return existsSync(full) && statSync(full).isDirectory();
}

describe('documentation links', () => {
  it('finds the links of a page, outside code, and tells a broken one from a good one', () => {
    const page = ['# A page', '', 'See [b](b.md#the-part), [c](c.md), [web](https://example.com) and ![pic](p.png).', '`[not](a-link.md)`', '```', '[nor](this.md)', '```'].join('\n');
    const links = linksIn('docs/a.md', page);
    assert.deepEqual(
      links.map((l) => l.target),
      ['b.md#the-part', 'c.md', 'https://example.com', 'p.png'],
    );
    const files: Record<string, string> = { 'docs/b.md': '# B\n\n## The part\n', 'docs/p.png': '' };
    const problems = links.map((l) => problemOf(l, (p) => files[p], () => false));
    assert.deepEqual(problems, [undefined, 'c.md: no file or folder docs/c.md', undefined, undefined]);
    assert.equal(problemOf({ file: 'docs/a.md', line: 1, target: 'b.md#no-such-part' }, (p) => files[p], () => false), 'b.md#no-such-part: docs/b.md has no heading #no-such-part');
    assert.equal(problemOf({ file: 'README.md', line: 1, target: '../shared/DESIGN.md' }, () => 'x', () => false), '../shared/DESIGN.md leaves the repository');
  });

  it('makes the anchors GitHub makes', () => {
    assert.deepEqual([...anchorsOf('# Watching runs: progress, GPU utilisation, metrics\n## The sterna CLI\'s errors\n## Files\n## Files\n')], [
      'watching-runs-progress-gpu-utilisation-metrics',
      'the-sterna-clis-errors',
      'files',
      'files-1',
    ]);
  });

  it('has every relative link of README.md, bench/README.md and docs/ resolve inside the repository', () => {
    const files = docFiles();
    assert.ok(files.length > 10, `found the documentation pages (${files.join(', ')})`);
    const links = files.flatMap((file) => linksIn(file, readRepo(file)!));
    assert.ok(links.length > 50, `found the links (${links.length})`);
    const broken = links.flatMap((link) => {
      const problem = problemOf(link, readRepo, isRepoDir);
      return problem ? [`${link.file}:${link.line}: ${problem}`] : [];
    });
    assert.deepEqual(broken, []);
  });
});
