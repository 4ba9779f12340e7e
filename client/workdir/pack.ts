/**
 * A working directory packed as a deterministic .tar.gz: the same tree gives the same
 * bytes on any machine with the same Node (and so zlib), whoever owns the files, whatever
 * their times and the umask they were made with. Entries go in path order, every time is
 * the epoch, owners are 0 with no names, modes are 0755 (directories and anything
 * executable by its owner) or 0644, hard links are packed as the files they are. The
 * pack's sha256 names it in the bucket (upload.ts), so an unchanged tree is uploaded once.
 *
 * A pack larger than `maxBytes` is refused while it is being made, with how big the tree
 * is and its largest paths to add to .sternaignore.
 */
import { createHash } from 'node:crypto';
import * as tar from 'tar';
import { EntryType, largestPaths, listWorkdir, type WorkdirListing } from './walk';

/** The default cap on a packed workdir: code and small files; data belongs in datasets. */
export const DEFAULT_MAX_WORKDIR_BYTES = 100 * 1000 * 1000;

export interface PackedWorkdir {
  /** The workdir's absolute path. */
  root: string;
  data: Buffer;
  /** Of `data`, lowercase hex. */
  sha256: string;
  /** Files, directories and symlinks packed. */
  entries: number;
  /** The files' bytes before compression. */
  rawBytes: number;
}

export interface PackOptions {
  /** The largest pack accepted (default DEFAULT_MAX_WORKDIR_BYTES). */
  maxBytes?: number;
}

/** A workdir whose pack is over the cap. */
export class WorkdirTooLargeError extends Error {
  override name = 'WorkdirTooLargeError';
  constructor(
    readonly root: string,
    readonly maxBytes: number,
    /** The files' bytes before compression. */
    readonly rawBytes: number,
    readonly largest: { path: string; bytes: number }[],
  ) {
    const biggest = largest.map((p) => `${p.path} (${sizeText(p.bytes)})`).join(', ');
    super(
      `workdir ${root} holds ${sizeText(rawBytes)} of files and packs to more than the ${sizeText(maxBytes)} cap; its largest paths: ${biggest}. ` +
        'Add what the command does not need to .sternaignore (same syntax as .gitignore), stage large data with datasets, or raise the cap',
    );
  }
}

/** "812 bytes", "45.3 kB", "312.4 MB", "2.1 GB" (powers of 1000, as the cap is given). */
export function sizeText(bytes: number): string {
  if (bytes < 1e3) return `${bytes} bytes`;
  const [unit, scale] = bytes < 1e6 ? ['kB', 1e3] : bytes < 1e9 ? ['MB', 1e6] : ['GB', 1e9];
  return `${(bytes / (scale as number)).toFixed(1)} ${unit as string}`;
}

/** Hard links would make the bytes depend on how the tree was made: never remembered, so each is packed as a file. */
class NoHardLinks extends Map<`${number}:${number}`, string> {
  override set(): this {
    return this;
  }
}

/** The canonical mode of an entry: its owner's execute bit is all that is kept. */
function canonicalMode(type: string, mode: number): number {
  if (type === 'Directory' || type === 'SymbolicLink') return 0o755;
  return mode & 0o100 ? 0o755 : 0o644;
}

/** Packs a listed workdir; throws WorkdirTooLargeError past `maxBytes`. */
export async function packListing(listing: WorkdirListing, options: PackOptions = {}): Promise<PackedWorkdir> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_WORKDIR_BYTES;
  const rawBytes = listing.entries.reduce((sum, e) => sum + (e.type === EntryType.File ? e.size : 0), 0);
  const tooLarge = () => new WorkdirTooLargeError(listing.root, maxBytes, rawBytes, largestPaths(listing.entries));
  const stream = tar.create(
    {
      cwd: listing.root,
      gzip: { level: 9 },
      portable: true,
      mtime: new Date(0),
      noDirRecurse: true,
      strict: true,
      linkCache: new NoHardLinks(),
      onWriteEntry(entry) {
        // Given as ./path, so that a name starting with "@" is a file, not an archive to append.
        entry.path = entry.path.replace(/^\.\//, '');
        if (entry.stat) entry.stat.mode = canonicalMode(entry.type ?? '', entry.stat.mode);
      },
    },
    listing.entries.map((e) => `./${e.path}`),
  );
  const hash = createHash('sha256');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    size += chunk.length;
    // Stopped at once: a tree of gigabytes is not compressed to learn that it is too large.
    if (size > maxBytes) throw tooLarge();
    hash.update(chunk);
    chunks.push(chunk);
  }
  return { root: listing.root, data: Buffer.concat(chunks), sha256: hash.digest('hex'), entries: listing.entries.length, rawBytes };
}

/** Lists and packs the workdir at `dir` (walk.ts for what is packed and what is refused). */
export async function packWorkdir(dir: string, options: PackOptions = {}): Promise<PackedWorkdir> {
  return packListing(await listWorkdir(dir), options);
}
