/**
 * Puts the example's code and dataset into a bucket: a `gs://` URI for real GCS (via
 * `gcloud storage cp`), or a local directory standing in for the bucket in the emulator.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateDataset } from './dataset';

export const EXAMPLE_BUCKET = 'sterna-examples';
export const EXAMPLE_PREFIX = 'logreg';

/** Writes trainer.js and train.csv under `<bucketsRoot>/sterna-examples/logreg/`. */
export function publishExampleLocally(bucketsRoot: string): string {
  const dir = join(bucketsRoot, EXAMPLE_BUCKET, EXAMPLE_PREFIX);
  mkdirSync(dir, { recursive: true });
  copyFileSync(join(__dirname, 'trainer.js'), join(dir, 'trainer.js'));
  writeFileSync(join(dir, 'train.csv'), generateDataset());
  return dir;
}

/** Uploads the same two files to a real bucket, e.g. gs://my-bucket/sterna-examples. */
export function publishExampleToGcs(uri: string, scratch: string): void {
  const dir = publishExampleLocally(scratch);
  execFileSync('gcloud', ['storage', 'cp', join(dir, 'trainer.js'), join(dir, 'train.csv'), `${uri.replace(/\/$/, '')}/${EXAMPLE_PREFIX}/`], { stdio: 'inherit' });
}
