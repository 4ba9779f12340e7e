/**
 * A run's working directory as the CLI and the client pack it (client/workdir): what goes
 * in (ignore files at any depth, git's precedence), that the same tree gives the same
 * bytes whoever made it and when, what is refused (symlinks that leave the tree,
 * unreadable files, FIFOs, the agent's own names, a pack over the cap) and that an unchanged
 * tree is uploaded once, to a local bucket and through the GCS JSON API (the emulator's).
 */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as tar from 'tar';
import { SternaClientError } from '../../client';
import { ClientErrorKind } from '../../client/errors';
import { listWorkdir, packWorkdir, prepareWorkdir, uploadWorkdir, WorkdirProblemError, WorkdirTooLargeError, workdirObjectUri } from '../../client/workdir';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

interface TarEntry {
  path: string;
  type: string;
  mode: number;
  mtime: number | null;
  uid: number | null;
  gid: number | null;
  uname: string;
  gname: string;
  linkpath: string;
  body: string;
}

/** Every entry of a .tar.gz, in its order, with the header fields that must be fixed. */
async function readPack(data: Buffer): Promise<TarEntry[]> {
  const entries: TarEntry[] = [];
  const parser = new tar.Parser({
    onReadEntry(entry) {
      const chunks: Buffer[] = [];
      entry.on('data', (c: Buffer) => chunks.push(c));
      entry.on('end', () =>
        entries.push({
          path: entry.path,
          type: entry.type,
          mode: entry.mode ?? -1,
          mtime: entry.mtime?.getTime() ?? null,
          uid: entry.uid ?? null,
          gid: entry.gid ?? null,
          uname: entry.uname ?? '',
          gname: entry.gname ?? '',
          linkpath: entry.linkpath ?? '',
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
    },
  });
  await new Promise<void>((resolve, reject) => {
    parser.on('end', resolve);
    parser.on('error', reject);
    parser.end(data);
  });
  return entries;
}

function write(root: string, path: string, text: string | Buffer, mode = 0o644): void {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), text);
  chmodSync(join(root, path), mode);
}

/** A small project: code, data, what git and .sternaignore leave out, nested rules. */
function project(root: string): void {
  write(root, 'train.py', 'print("hi")\n', 0o755);
  write(root, 'data/words.txt', 'alpha beta gamma\n');
  write(root, '.gitignore', '*.log\nbuild/\n__pycache__/\n');
  // .sternaignore can take back what git ignores, and leave out what git keeps.
  write(root, '.sternaignore', '!keep.log\nnotes/\n');
  write(root, 'debug.log', 'noise');
  write(root, 'keep.log', 'wanted');
  write(root, 'build/out.bin', 'built');
  write(root, 'notes/todo.md', 'private');
  write(root, 'pkg/__pycache__/x.pyc', 'cache');
  write(root, 'pkg/mod.py', 'x = 1\n');
  // A deeper .gitignore wins over the root's for its own directory.
  write(root, 'pkg/.gitignore', '!special.log\nlocal.txt\n');
  write(root, 'pkg/special.log', 'kept by pkg/.gitignore');
  write(root, 'pkg/local.txt', 'left out by pkg/.gitignore');
  write(root, '.git/HEAD', 'ref: refs/heads/main\n');
  symlinkSync('data/words.txt', join(root, 'words'));
}

describe('a workdir, packed', function () {
  this.timeout(60_000);
  let scratch: string;
  before(() => {
    scratch = mkdtempSync(join(tmpdir(), 'sterna-workdir-pack-'));
    chmodSync(scratch, 0o755);
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  it('honours .gitignore and .sternaignore at any depth, with git\'s precedence, and never packs .git', async () => {
    const root = join(scratch, 'ignores');
    project(root);
    const { entries } = await listWorkdir(root);
    assert.deepEqual(
      entries.map((e) => `${e.type} ${e.path}`),
      [
        'file .gitignore',
        'file .sternaignore',
        'directory data',
        'file data/words.txt',
        'file keep.log',
        'directory pkg',
        'file pkg/.gitignore',
        'file pkg/mod.py',
        'file pkg/special.log',
        'file train.py',
        'symlink words',
      ],
    );
    const packed = await packWorkdir(root);
    const inPack = await readPack(packed.data);
    assert.deepEqual(inPack.map((e) => e.path.replace(/\/$/, '')), entries.map((e) => e.path), 'the pack holds exactly the listing, in its order');
    assert.equal(inPack.find((e) => e.path === 'data/words.txt')?.body, 'alpha beta gamma\n');
    assert.equal(inPack.find((e) => e.path === 'words')?.linkpath, 'data/words.txt', 'a symlink inside the tree stays a symlink');
    assert.equal(packed.entries, entries.length);
    assert.equal(packed.rawBytes, entries.reduce((sum, e) => sum + e.size, 0));
    assert.equal(packed.sha256, createHash('sha256').update(packed.data).digest('hex'));
  });

  it('gives the same bytes for the same tree, whoever made it, when and with what umask; another byte gives another pack', async () => {
    const a = join(scratch, 'same-a');
    const b = join(scratch, 'same-b');
    project(a);
    project(b);
    // b: other times, other owners, group-writable modes, a file without its owner's write bit.
    for (const path of ['train.py', 'data/words.txt', 'pkg/mod.py', 'data']) {
      utimesSync(join(b, path), 1_234_567, 1_234_567);
      chownSync(join(b, path), 4321, 4321);
    }
    chmodSync(join(b, 'train.py'), 0o775);
    chmodSync(join(b, 'data/words.txt'), 0o464);
    chmodSync(join(b, 'data'), 0o775);
    const [packA, packB] = [await packWorkdir(a), await packWorkdir(b)];
    assert.equal(packB.sha256, packA.sha256);
    assert.ok(packB.data.equals(packA.data));
    for (const e of await readPack(packA.data)) {
      // No owner is written at all (GNU tar lists 0/0), nor a directory's time.
      assert.deepEqual([e.mtime, e.uid, e.gid, e.uname, e.gname], [e.type === 'Directory' ? null : 0, null, null, '', ''], `${e.path}: fixed time, no owner`);
      const want = e.type === 'Directory' || e.type === 'SymbolicLink' || e.path === 'train.py' ? 0o755 : 0o644;
      assert.equal(e.mode, want, `${e.path}: mode ${e.mode.toString(8)}`);
    }
    writeFileSync(join(b, 'data/words.txt'), 'alpha beta gammA\n');
    assert.notEqual((await packWorkdir(b)).sha256, packA.sha256);
  });

  it('refuses symlinks that leave the tree (relative, absolute, or through an ignored link), naming each and how to fix it', async () => {
    const root = join(scratch, 'links');
    write(root, 'ok.txt', 'ok');
    write(root, '.sternaignore', 'hidden\n');
    symlinkSync('../../etc', join(root, 'up'));
    symlinkSync('/etc/hostname', join(root, 'absolute'));
    symlinkSync('/etc', join(root, 'hidden'));
    symlinkSync('hidden/hostname', join(root, 'through'));
    symlinkSync('ok.txt', join(root, 'fine'));
    await assert.rejects(listWorkdir(root), (err: unknown) => {
      assert.ok(err instanceof WorkdirProblemError);
      assert.deepEqual(
        err.problems.map((p) => p.split(' ').slice(0, 2).join(' ')),
        ['symlink absolute', 'symlink through', 'symlink up'],
      );
      assert.match(err.problems[0], /absolute path \/etc\/hostname.*make it relative/);
      assert.match(err.problems[1], /resolves to \/etc\/hostname, outside the workdir/);
      assert.match(err.problems[2], /leaves the workdir; .*add up to \.sternaignore/);
      return true;
    });
    // The client's error says the same, as a WorkdirRefused: nothing was uploaded.
    await assert.rejects(prepareWorkdir(root, 'gs://never-written/x', { storage: { localBucketsDir: join(scratch, 'never') } }), (err: unknown) => {
      assert.ok(err instanceof SternaClientError);
      assert.equal(err.kind, ClientErrorKind.WorkdirRefused);
      return true;
    });
    assert.ok(!existsSync(join(scratch, 'never')));
  });

  it('refuses a pack over the cap, saying how big the tree is, the cap and its largest paths', async () => {
    const root = join(scratch, 'big');
    write(root, 'train.py', 'print(1)\n');
    write(root, 'data/shard-1.bin', randomBytes(400_000));
    write(root, 'data/shard-2.bin', randomBytes(300_000));
    write(root, 'weights.pt', randomBytes(200_000));
    await assert.rejects(packWorkdir(root, { maxBytes: 250_000 }), (err: unknown) => {
      assert.ok(err instanceof WorkdirTooLargeError);
      assert.equal(err.maxBytes, 250_000);
      assert.equal(err.rawBytes, 900_009);
      assert.deepEqual(err.largest.map((p) => p.path), ['data/', 'data/shard-1.bin', 'data/shard-2.bin', 'weights.pt', 'train.py']);
      assert.match(err.message, /holds 900\.0 kB of files and packs to more than the 250\.0 kB cap; its largest paths: data\/ \(700\.0 kB\), data\/shard-1\.bin \(400\.0 kB\)/);
      assert.match(err.message, /\.sternaignore/);
      return true;
    });
    // Under the cap once the data is left out.
    write(root, '.sternaignore', 'data/\n*.pt\n');
    assert.ok((await packWorkdir(root, { maxBytes: 250_000 })).data.length < 1000);
  });

  it('refuses the agent\'s own top-level names and FIFOs, and names a file it cannot read', async () => {
    const root = join(scratch, 'refused');
    write(root, 'train.py', 'print(1)\n');
    write(root, 'checkpoints/step-1.pt', 'stale');
    write(root, '.sterna/x', 'y');
    write(root, 'sub/checkpoints/fine.txt', 'a deeper checkpoints/ is the user\'s own');
    write(root, 'secret.key', 'k', 0o000);
    execFileSync('mkfifo', [join(root, 'pipe')]);
    const problems = async (dir: string) => listWorkdir(dir).then(() => [], (err: WorkdirProblemError) => err.problems);
    const found = await problems(root);
    assert.match(found.find((p) => p.startsWith('.sterna '))!, /keeps its own state in the directory the command runs in; rename it, or add \/\.sterna to \.sternaignore/);
    assert.match(found.find((p) => p.startsWith('checkpoints '))!, /STERNA_CHECKPOINT_DIR/);
    assert.match(found.find((p) => p.startsWith('pipe '))!, /a FIFO \(named pipe\)/);
    if (process.getuid?.() === 0) {
      // root reads any file: the unreadable file is read by an unprivileged user, as a user's CLI runs.
      // The walker, its one dependency and the node that runs it, copied where that user can read them: the
      // repository may sit under a directory only root can enter, and so may the node (Sterna's cached Node.js
      // build lives in root's ~/.cache when the machine's own node is older).
      const walker = join(scratch, 'walker');
      cpSync(join(__dirname, '..', '..', 'client', 'workdir', 'walk.js'), join(walker, 'walk.js'));
      cpSync(dirname(require.resolve('ignore/package.json')), join(walker, 'node_modules', 'ignore'), { recursive: true });
      cpSync(process.execPath, join(walker, 'node'));
      execFileSync('chmod', ['-R', 'a+rX', walker]);
      const script = `require(${JSON.stringify(join(walker, 'walk.js'))}).listWorkdir(${JSON.stringify(root)}).then(() => console.log('[]'), (e) => console.log(JSON.stringify(e.problems)))`;
      chmodSync(scratch, 0o755);
      for (const path of ['', 'checkpoints', '.sterna', 'sub', 'sub/checkpoints']) chmodSync(join(root, path), 0o755);
      // In the walker's own directory: Node 24 looks for the package.json above the working
      // directory, and the repository's clone may sit where user nobody cannot read.
      const asNobody = JSON.parse(execFileSync(join(walker, 'node'), ['-e', script], { uid: 65534, gid: 65534, cwd: walker, encoding: 'utf8' })) as string[];
      assert.match(asNobody.find((p) => p.startsWith('secret.key '))!, /cannot be read \(EACCES.*make it readable, or add it to \.sternaignore/);
    } else {
      assert.match(found.find((p) => p.startsWith('secret.key '))!, /cannot be read \(EACCES/);
    }
    rmSync(join(root, 'pipe'));
    rmSync(join(root, 'secret.key'));
    write(root, '.sternaignore', '/checkpoints\n/.sterna\n');
    assert.deepEqual(await problems(root), [], 'all fixed as the messages say');
  });
});

describe('a packed workdir, uploaded once per content', function () {
  this.timeout(60_000);
  let scratch: string;
  let emu: TestEmulator;
  let buckets: string;
  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'sterna-workdir-upload-'));
    buckets = join(scratch, 'buckets');
    mkdirSync(join(buckets, 'team-bucket'), { recursive: true });
    mkdirSync(join(buckets, 'read-only-bucket'), { recursive: true });
    emu = await startTestEmulator({ bucketsDir: buckets, buckets: { 'read-only-bucket': { readOnly: true } } });
    project(join(scratch, 'tree'));
  });
  after(async () => {
    await emu?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('to a local bucket: written at <checkpoint prefix>/workdirs/<sha256>.tar.gz, and not again when unchanged', async () => {
    const storage = { localBucketsDir: buckets };
    const first = await prepareWorkdir(join(scratch, 'tree'), 'gs://team-bucket/sterna/', { storage });
    assert.equal(first.uri, `gs://team-bucket/sterna/workdirs/${first.sha256}.tar.gz`);
    assert.equal(first.uploaded, true);
    const file = join(buckets, 'team-bucket', 'sterna', 'workdirs', `${first.sha256}.tar.gz`);
    assert.equal(createHash('sha256').update(readFileSync(file)).digest('hex'), first.sha256);
    const written = statSync(file).mtimeMs;
    const again = await prepareWorkdir(join(scratch, 'tree'), 'gs://team-bucket/sterna', { storage });
    assert.deepEqual([again.uri, again.sha256, again.uploaded], [first.uri, first.sha256, false]);
    assert.equal(statSync(file).mtimeMs, written, 'not written again');
  });

  it('through the GCS JSON API: looked up, uploaded, not again; a bucket it may not write is a WorkdirUploadFailed', async () => {
    const tree = join(scratch, 'api-tree');
    cpSync(join(scratch, 'tree'), tree, { recursive: true, verbatimSymlinks: true });
    write(tree, 'extra.txt', 'only in this tree');
    const packed = await packWorkdir(tree);
    const storage = { storageEndpoint: emu.endpoint };
    const first = await uploadWorkdir(packed, 'gs://team-bucket/api', storage);
    assert.equal(first.uri, workdirObjectUri('gs://team-bucket/api', packed.sha256));
    assert.equal(first.uploaded, true);
    assert.ok(readFileSync(join(buckets, 'team-bucket', 'api', 'workdirs', `${packed.sha256}.tar.gz`)).equals(packed.data));
    assert.equal((await uploadWorkdir(packed, 'gs://team-bucket/api', storage)).uploaded, false);
    await assert.rejects(uploadWorkdir(packed, 'gs://read-only-bucket/api', storage), (err: unknown) => {
      assert.ok(err instanceof SternaClientError);
      assert.equal(err.kind, ClientErrorKind.WorkdirUploadFailed);
      assert.match(err.message, /gs:\/\/read-only-bucket\/api\/workdirs\/[0-9a-f]{64}\.tar\.gz: no permission to take the upload \(HTTP 403\)/);
      assert.match(err.hint, /roles\/storage\.objectUser on gs:\/\/read-only-bucket/);
      return true;
    });
    await assert.rejects(uploadWorkdir(packed, 'gs://no-such-bucket/api', storage), (err: unknown) => err instanceof SternaClientError && /no bucket gs:\/\/no-such-bucket/.test(err.message));
  });
});
