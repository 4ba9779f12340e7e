/**
 * How the workflows are bundled, in one place: `npm run build` (the production bundle),
 * workers that bundle from source, the tests and the benchmarks all use these options.
 *
 * The worker runs every cached workflow in one reused V8 context, and by default each
 * workflow evaluates its own copy of every module it imports and keeps it for as long as
 * it stays cached. Sterna's workflow modules and zod hold no per-run state (rules,
 * tables, schema builders), so they are preloaded into the shared module cache: measured
 * with 300 cached runs, 3.1 MB per run with a copy each, 0.26 MB (the SDK's own floor)
 * shared. Shared modules are deep-frozen by the SDK, which is why no module here keeps a
 * zod schema at module level (zod writes to its schemas while parsing) or any mutable
 * state at all.
 */
import { join } from 'node:path';
import { bundleWorkflowCode, type BundleOptions, type WorkflowBundleWithSourceMap } from '@temporalio/worker';

/** The production bundle `npm run build` writes (scripts/bundle-workflows.ts) and `npm run worker` loads. */
export const WORKFLOW_BUNDLE = join(__dirname, '..', 'workflow-bundle.js');

export function workflowsPath(): string {
  return require.resolve('../workflows');
}

/** Modules every workflow shares instead of evaluating its own copy. */
export function sharedModules(): string[] {
  return ['zod', workflowsPath()];
}

const quietLogger: BundleOptions['logger'] = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message) => console.warn(message),
  error: (message) => console.error(message),
};

/** `webpackConfigHook`: only for a test's own variant of the rules (test/worker-versioning.test.ts). */
export function bundleWorkflows(path = workflowsPath(), webpackConfigHook?: BundleOptions['webpackConfigHook']): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath: path, preloadModules: path === workflowsPath() ? sharedModules() : ['zod'], logger: quietLogger, ...(webpackConfigHook ? { webpackConfigHook } : {}) });
}
