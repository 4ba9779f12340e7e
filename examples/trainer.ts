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
 * Each step is a pure function of the weights, and checkpoints keep every bit of every
 * weight (JSON round-trips doubles exactly), so a run preempted any number of times ends
 * with exactly the weights of an uninterrupted one.
 *
 *   node trainer.js --data data/train.csv --steps 300 [--lr 0.1] [--step-ms 20] [--hash-env HF_TOKEN]
 */
import { readFileSync, renameSync, writeFileSync, readdirSync, unlinkSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';

interface Checkpoint {
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

function loadData(path: string): { x: number[][]; y: number[] } {
  const x: number[][] = [];
  const y: number[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const values = line.split(',').map(Number);
    y.push(values.pop()!);
    x.push(values);
  }
  return { x, y };
}

/** One gradient-descent step on the mean logistic loss. */
export function step(state: Checkpoint, x: number[][], y: number[], lr: number): Checkpoint {
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
  const n = x.length;
  return {
    step: state.step + 1,
    weights: state.weights.map((w, j) => w - (lr * gradW[j]) / n),
    bias: state.bias - (lr * gradB) / n,
    loss: loss / n,
  };
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
  const { x, y } = loadData(argValue('data'));
  const totalSteps = Number(argValue('steps'));
  const lr = Number(argValue('lr', '0.1'));
  const stepMs = Number(argValue('step-ms', '0'));
  const checkpointDir = process.env.STERNA_CHECKPOINT_DIR ?? 'checkpoints';
  const progressFile = process.env.STERNA_PROGRESS_FILE;
  const interval = checkpointInterval(Number(process.env.STERNA_CHECKPOINT_INTERVAL ?? '600'), process.env.STERNA_CHECKPOINT_INTERVAL_FILE);

  let state: Checkpoint = { step: 0, weights: new Array<number>(x[0].length).fill(0), bias: 0, loss: NaN };
  if (process.env.STERNA_RESUME_FROM) {
    state = JSON.parse(readFileSync(process.env.STERNA_RESUME_FROM, 'utf8')) as Checkpoint;
    console.log(`resumed from step ${state.step}`);
  }
  let stopping = false;
  process.on('SIGTERM', () => (stopping = true));

  let lastCheckpoint = Date.now();
  while (state.step < totalSteps) {
    state = step(state, x, y, lr);
    if (progressFile) writeFileSync(progressFile, `${state.step}/${totalSteps}`);
    if (stopping) {
      writeCheckpoint(checkpointDir, state);
      console.log(`SIGTERM: checkpointed step ${state.step}, exiting`);
      process.exit(143);
    }
    if (Date.now() - lastCheckpoint >= interval() * 1000) {
      writeCheckpoint(checkpointDir, state);
      lastCheckpoint = Date.now();
    }
    if (stepMs > 0) await new Promise((r) => setTimeout(r, stepMs));
  }
  writeCheckpoint(checkpointDir, state);
  console.log(`done: step ${state.step}, loss ${state.loss.toFixed(6)}`);
}

if (require.main === module) void main();
