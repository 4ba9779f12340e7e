/**
 * `npm run build` makes the production workflow bundle: the workflows compiled once into
 * build/workflow-bundle.js, which `npm run worker` loads instead of bundling from source
 * at every start (as Temporal's production sample does). Tests may bundle from source.
 */
import { writeFileSync } from 'node:fs';
import { bundleWorkflows, WORKFLOW_BUNDLE } from '../workers/bundle';
import { buildIdOf } from '../workers/deployment';

async function main(): Promise<void> {
  const { code } = await bundleWorkflows();
  writeFileSync(WORKFLOW_BUNDLE, code);
  console.log(`sterna: workflow bundle ${WORKFLOW_BUNDLE} (${(code.length / 1024).toFixed(0)} KiB, build id ${buildIdOf(code)})`);
}

if (require.main === module) {
  main().catch((err: Error) => {
    console.error(`sterna: could not bundle the workflows: ${err.message}`);
    process.exit(1);
  });
}
