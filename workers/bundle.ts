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
 *
 * Every namespace a worker serves has its own workflow thread, and each thread parses the
 * bundle's inline source map and keeps it (the SDK's stack traces, and the web UI's
 * "Stack Trace" tab, which shows the source text of each frame). Most of that text is the
 * libraries' (zod, immer, the SDK's own workflow library: 166 of 273 sources), so the
 * bundle keeps the text of Sterna's own sources only; every frame is still mapped to its
 * file and line. Measured: 13 MB of heap a thread for the map, 7 MB of it the libraries' text.
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

/** `webpackConfigHook`: only for a test's own variant of the rules (test/stack/worker-versioning.test.ts). */
export async function bundleWorkflows(path = workflowsPath(), webpackConfigHook?: BundleOptions['webpackConfigHook']): Promise<WorkflowBundleWithSourceMap> {
  const bundle = await bundleWorkflowCode({ workflowsPath: path, preloadModules: path === workflowsPath() ? sharedModules() : ['zod'], logger: quietLogger, ...(webpackConfigHook ? { webpackConfigHook } : {}) });
  return { ...bundle, code: withoutLibrarySources(bundle.code) };
}

/** Where the SDK's bundler puts the bundle's source map: the last line, inline. */
export const INLINE_MAP = '//# sourceMappingURL=data:application/json;charset=utf-8;base64,';

export interface InlineSourceMap {
  sources: string[];
  sourcesContent?: (string | null)[];
  mappings: string;
}

/** `code` before its inline source map, and the map. */
function splitInlineMap(code: string): { body: string; map: InlineSourceMap } {
  const at = code.lastIndexOf(INLINE_MAP);
  if (at < 0) throw new Error('the workflow bundle has no inline source map where the SDK puts it; workers/bundle.ts needs updating for this @temporalio/worker');
  return { body: code.slice(0, at), map: JSON.parse(Buffer.from(code.slice(at + INLINE_MAP.length).trimEnd(), 'base64').toString()) as InlineSourceMap };
}

/** The bundle's inline source map. */
export function inlineSourceMapOf(code: string): InlineSourceMap {
  return splitInlineMap(code).map;
}

/** `code` with its inline source map's text of node_modules sources dropped (mappings and names kept). */
export function withoutLibrarySources(code: string): string {
  const { body, map } = splitInlineMap(code);
  const sourcesContent = map.sourcesContent?.map((text, i) => (map.sources[i].includes('/node_modules/') ? null : text));
  return `${body}${INLINE_MAP}${Buffer.from(JSON.stringify({ ...map, sourcesContent })).toString('base64')}\n`;
}
