/**
 * The example training program: logistic regression by full-batch gradient descent, in
 * plain Node with no dependencies, so it runs on any VM that has Node.
 *
 * It follows the Sterna agent contract:
 * - checkpoints atomically (write a temp file, then rename) to
 *   $STERNA_CHECKPOINT_DIR/step-<N>.json every $STERNA_CHECKPOINT_INTERVAL seconds, and
 *   re-reads the interval in force from $STERNA_CHECKPOINT_INTERVAL_FILE (at most once a
 *   second): the run may change it while the attempt trains;
 * - on SIGTERM (the preemption notice) finishes its step, checkpoints and exits 143;
 * - resumes from $STERNA_RESUME_FROM when set;
 * - writes "<step>/<total steps>" to $STERNA_PROGRESS_FILE (so progress shows percent and ETA);
 * - with `--hash-env NAME`, prints the sha256 of environment variable NAME (a secret the
 *   run passed by reference), so one can check the secret arrived without it being shown.
 * - with `--data-parallel` in a gang (STERNA_NUM_NODES > 1) each rank trains on its shard of the rows (every
 *   Nth row from its rank on) and the ranks add their gradients over TCP each step, rank 0
 *   (STERNA_MASTER_ADDR:STERNA_MASTER_PORT) as the hub, in rank order; only rank 0 writes
 *   checkpoints. A lost peer parks the rank until the gang is released.
 * Each step is a pure function of the weights, and checkpoints keep every bit of every
 * weight (JSON round-trips doubles exactly), so a run preempted any number of times ends
 * with exactly the weights of an uninterrupted one.
 *
 *   node trainer.js --data data/train.csv --steps 300 [--lr 0.1] [--step-ms 20] [--hash-env HF_TOKEN] [--data-parallel]
 */
import { readFileSync, renameSync, writeFileSync, readdirSync, unlinkSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { connect, createServer, type Socket } from 'node:net';

export interface Checkpoint {
  step: number;
  weights: number[];
  bias: number;
  loss: number;
}

function argValue(name: string, fallback?: string): string {
  const index = process.argv.indexOf(`--${name}`);
  const value = index >= 0 ? process.argv[index + 1] : fallback;
  if (value === undefined) {
    console.error(`missing --${name}`);
    process.exit(2);
  }
  return value;
}

/** Rows of "x1,...,xk,label". */
export function parseData(text: string): { x: number[][]; y: number[] } {
  const x: number[][] = [];
  const y: number[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const values = line.split(',').map(Number);
    y.push(values.pop()!);
    x.push(values);
  }
  return { x, y };
}

function loadData(path: string): { x: number[][]; y: number[] } {
  return parseData(readFileSync(path, 'utf8'));
}

/** The logistic loss's gradient and loss, summed (not averaged) over some rows. */
export interface GradientSum {
  gradW: number[];
  gradB: number;
  loss: number;
  rows: number;
}

export function gradientSum(state: Checkpoint, x: number[][], y: number[]): GradientSum {
  const gradW = new Array<number>(state.weights.length).fill(0);
  let gradB = 0;
  let loss = 0;
  for (let i = 0; i < x.length; i++) {
    let z = state.bias;
    for (let j = 0; j < state.weights.length; j++) z += state.weights[j] * x[i][j];
    const p = 1 / (1 + Math.exp(-z));
    const err = p - y[i];
    for (let j = 0; j < state.weights.length; j++) gradW[j] += err * x[i][j];
    gradB += err;
    loss += -(y[i] * Math.log(p + 1e-12) + (1 - y[i]) * Math.log(1 - p + 1e-12));
  }
  return { gradW, gradB, loss, rows: x.length };
}

/** The ranks' sums added in rank order: the same order every time, so the same bits every time. */
export function addGradients(parts: readonly GradientSum[]): GradientSum {
  const [first, ...rest] = parts;
  const total = { gradW: [...first.gradW], gradB: first.gradB, loss: first.loss, rows: first.rows };
  for (const part of rest) {
    for (let j = 0; j < total.gradW.length; j++) total.gradW[j] += part.gradW[j];
    total.gradB += part.gradB;
    total.loss += part.loss;
    total.rows += part.rows;
  }
  return total;
}

/** One gradient-descent step with the mean gradient of `g`. */
export function applyGradient(state: Checkpoint, g: GradientSum, lr: number): Checkpoint {
  const n = g.rows;
  return {
    step: state.step + 1,
    weights: state.weights.map((w, j) => w - (lr * g.gradW[j]) / n),
    bias: state.bias - (lr * g.gradB) / n,
    loss: g.loss / n,
  };
}

/** One gradient-descent step on the mean logistic loss. */
export function step(state: Checkpoint, x: number[][], y: number[], lr: number): Checkpoint {
  return applyGradient(state, gradientSum(state, x, y), lr);
}

/** Rank `rank`'s rows of a gang of `nodes`: every nodes-th row from its rank on. */
export function shardOf(data: { x: number[][]; y: number[] }, rank: number, nodes: number): { x: number[][]; y: number[] } {
  const keep = (_: unknown, i: number) => i % nodes === rank;
  return { x: data.x.filter(keep), y: data.y.filter(keep) };
}

/** What a gang of shards.length nodes computes in one step: every shard's gradient, averaged over all rows. */
export function dataParallelStep(state: Checkpoint, shards: readonly { x: number[][]; y: number[] }[], lr: number): Checkpoint {
  return applyGradient(state, addGradients(shards.map((s) => gradientSum(state, s.x, s.y))), lr);
}

function writeCheckpoint(dir: string, state: Checkpoint): void {
  mkdirSync(dir, { recursive: true });
  const final = join(dir, `step-${state.step}.json`);
  const temp = join(dir, `.step-${state.step}.json.tmp`);
  writeFileSync(temp, JSON.stringify(state));
  renameSync(temp, final);
  // Keep the newest two locally; the agent has uploaded older ones to the bucket.
  const names = readdirSync(dir).filter((n) => /^step-\d+\.json$/.test(n));
  names.sort((a, b) => Number(b.slice(5, -5)) - Number(a.slice(5, -5)));
  for (const old of names.slice(2)) unlinkSync(join(dir, old));
}

/** A newline-delimited JSON link to one peer: lines in order; a closed link fails every wait on it. */
class Link {
  private buffered = '';
  private readonly lines: string[] = [];
  private readonly waiting: { resolve: (line: string) => void; reject: (err: Error) => void }[] = [];
  private lost?: Error;

  constructor(private readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffered += chunk;
      for (let at = this.buffered.indexOf('\n'); at >= 0; at = this.buffered.indexOf('\n')) {
        const line = this.buffered.slice(0, at);
        this.buffered = this.buffered.slice(at + 1);
        const waiter = this.waiting.shift();
        if (waiter) waiter.resolve(line);
        else this.lines.push(line);
      }
    });
    const fail = (err?: Error) => {
      this.lost ??= err ?? new Error('peer closed the link');
      for (const waiter of this.waiting.splice(0)) waiter.reject(this.lost);
    };
    socket.on('error', fail);
    socket.on('close', () => fail());
  }

  send(message: unknown): void {
    this.socket.write(`${JSON.stringify(message)}\n`);
  }

  /** Ends the link once what was sent is flushed; resolves when it is closed (or after 2 s). */
  close(): Promise<void> {
    if (this.socket.destroyed) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.socket.once('close', () => resolve());
      setTimeout(resolve, 2000).unref();
      this.socket.end();
    });
  }

  receive<T>(): Promise<T> {
    const line = this.lines.shift();
    if (line !== undefined) return Promise.resolve(JSON.parse(line) as T);
    if (this.lost) return Promise.reject(this.lost);
    return new Promise<string>((resolve, reject) => this.waiting.push({ resolve, reject })).then((l) => JSON.parse(l) as T);
  }
}

interface Hello {
  rank: number;
  step: number;
}

/**
 * A gang's all-reduce over TCP, rank 0 as the hub: each step every rank sends its
 * gradient sum to rank 0, which adds them in rank order and sends the total back, so
 * every rank applies the same total and holds the same weights.
 */
class GangLink {
  private constructor(
    private readonly rank: number,
    private readonly peers: Link[],
  ) {}

  /** Rank 0 listens at its own address and waits for every other rank; the others connect (rank 0 may start later). */
  static async join(rank: number, nodes: number, addr: string, port: number, step: number): Promise<GangLink> {
    if (rank > 0) {
      const link = new Link(await connectWithRetry(addr, port, 600_000));
      link.send({ rank, step } satisfies Hello);
      return new GangLink(rank, [link]);
    }
    const server = createServer();
    const peers: Link[] = new Array<Link>(nodes);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, addr, () => resolve());
    });
    let joined = 0;
    await new Promise<void>((resolve, reject) => {
      server.on('connection', (socket) => {
        const link = new Link(socket);
        link.receive<Hello>().then((hello) => {
          if (hello.step !== step) return reject(new Error(`rank ${hello.rank} starts at step ${hello.step}, rank 0 at ${step}`));
          peers[hello.rank] = link;
          if (++joined === nodes - 1) resolve();
        }, reject);
      });
    });
    server.close();
    console.log(`gang: ${nodes} ranks joined at step ${step}`);
    return new GangLink(0, peers.slice(1));
  }

  /** Ends every link once what was sent is flushed (an exit right after a write could lose it). */
  async close(): Promise<void> {
    await Promise.all(this.peers.map((p) => p.close()));
  }

  /** This step's gradient sum over the whole gang. */
  async allReduce(mine: GradientSum, step: number): Promise<GradientSum> {
    if (this.rank > 0) {
      this.peers[0].send({ step, g: mine });
      const total = await this.peers[0].receive<{ step: number; g: GradientSum }>();
      if (total.step !== step) throw new Error(`rank 0 answered step ${total.step} to step ${step}`);
      return total.g;
    }
    const theirs = await Promise.all(this.peers.map((p) => p.receive<{ step: number; g: GradientSum }>()));
    for (const t of theirs) if (t.step !== step) throw new Error(`a rank sent step ${t.step} at step ${step}`);
    const total = addGradients([mine, ...theirs.map((t) => t.g)]);
    for (const peer of this.peers) peer.send({ step, g: total });
    return total;
  }
}

async function connectWithRetry(addr: string, port: number, withinMs: number): Promise<Socket> {
  const until = Date.now() + withinMs;
  for (;;) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const socket = connect(port, addr, () => {
          socket.off('error', reject);
          resolve(socket);
        });
        socket.once('error', reject);
      });
    } catch (err) {
      if (Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** The interval in force (seconds): `file`'s number when it holds one, read at most once a second, else `initial`. */
function checkpointInterval(initial: number, file: string | undefined): () => number {
  let seconds = initial;
  let readAt = 0;
  return () => {
    if (!file || Date.now() - readAt < 1000) return seconds;
    readAt = Date.now();
    let read = NaN;
    try {
      read = Number(readFileSync(file, 'utf8').trim());
    } catch {
      // Not there (an agent without it): the interval stays.
    }
    if (read > 0 && read !== seconds) {
      seconds = read;
      console.log(`checkpoint interval now ${seconds} s`);
    }
    return seconds;
  };
}

async function main(): Promise<void> {
  if (process.argv.includes('--hash-env')) {
    const name = argValue('hash-env');
    const value = process.env[name];
    console.log(value === undefined ? `${name} is not set` : `sha256(${name}) = ${createHash('sha256').update(value, 'utf8').digest('hex')}`);
  }
  // Data parallel only when asked: a gang's ranks must reach rank 0 (STERNA_MASTER_ADDR) to train together.
  const dataParallel = process.argv.includes('--data-parallel');
  const nodes = dataParallel ? Number(process.env.STERNA_NUM_NODES ?? '1') : 1;
  const rank = dataParallel ? Number(process.env.STERNA_NODE_RANK ?? '0') : 0;
  // A gang's rank trains on its shard of the rows; the gradients are summed over all of them.
  const { x, y } = nodes > 1 ? shardOf(loadData(argValue('data')), rank, nodes) : loadData(argValue('data'));
  const totalSteps = Number(argValue('steps'));
  const lr = Number(argValue('lr', '0.1'));
  const stepMs = Number(argValue('step-ms', '0'));
  const checkpointDir = process.env.STERNA_CHECKPOINT_DIR ?? 'checkpoints';
  const progressFile = process.env.STERNA_PROGRESS_FILE;
  // Every rank holds the same weights: rank 0's checkpoints are the gang's.
  const checkpoints = rank === 0;
  const interval = checkpointInterval(Number(process.env.STERNA_CHECKPOINT_INTERVAL ?? '600'), process.env.STERNA_CHECKPOINT_INTERVAL_FILE);

  let state: Checkpoint = { step: 0, weights: new Array<number>(x[0].length).fill(0), bias: 0, loss: NaN };
  if (process.env.STERNA_RESUME_FROM) {
    state = JSON.parse(readFileSync(process.env.STERNA_RESUME_FROM, 'utf8')) as Checkpoint;
    console.log(`resumed from step ${state.step}`);
  }
  let stopping = false;
  // Parked: waiting on peers with no step to finish (joining the gang, or a peer was lost).
  let parked = nodes > 1;
  const resumedAt = state.step;
  const stop = () => {
    if (checkpoints && state.step > resumedAt) writeCheckpoint(checkpointDir, state);
    console.log(`SIGTERM: ${checkpoints ? 'checkpointed' : 'stopped at'} step ${state.step}, exiting`);
    process.exit(143);
  };
  process.on('SIGTERM', () => {
    stopping = true;
    if (parked) stop();
  });

  const gang = nodes > 1 ? await GangLink.join(rank, nodes, process.env.STERNA_MASTER_ADDR ?? '127.0.0.1', Number(process.env.STERNA_MASTER_PORT ?? '29500'), state.step) : undefined;
  parked = false;
  let lastCheckpoint = Date.now();
  while (state.step < totalSteps) {
    if (gang) {
      let total: GradientSum;
      try {
        total = await gang.allReduce(gradientSum(state, x, y), state.step);
      } catch (err) {
        // A lost peer ends the gang (its node was preempted or failed): no step can be taken
        // alone. Wait for the gang to be released (SIGTERM), which checkpoints the last
        // step every rank took, rather than exit as if training had failed.
        console.log(`gang: ${(err as Error).message}; waiting for the gang to be released`);
        parked = true;
        if (stopping) stop();
        setInterval(() => undefined, 60_000);
        return;
      }
      state = applyGradient(state, total, lr);
    } else {
      state = step(state, x, y, lr);
    }
    if (progressFile) writeFileSync(progressFile, `${state.step}/${totalSteps}`);
    if (stopping) stop();
    if (checkpoints && Date.now() - lastCheckpoint >= interval() * 1000) {
      writeCheckpoint(checkpointDir, state);
      lastCheckpoint = Date.now();
    }
    if (stepMs > 0) await new Promise((r) => setTimeout(r, stepMs));
  }
  if (checkpoints) writeCheckpoint(checkpointDir, state);
  console.log(`done: step ${state.step}, loss ${state.loss.toFixed(6)}`);
  if (gang) {
    // Every rank has the last step's total once rank 0 has flushed it; the links would keep the process alive.
    await gang.close();
    process.exit(0);
  }
}

if (require.main === module) void main();
