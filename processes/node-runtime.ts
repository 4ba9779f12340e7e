/**
 * The Node.js Sterna runs on, for the code that starts Node processes itself (the
 * worker's launcher): scripts/node-runtime.js is the one place that says which version is
 * supported and where the cached build lives, plain JavaScript because the bootstrap runs
 * it before anything is compiled. This reads it from the repository, next to build/.
 */
import { join } from 'node:path';

interface NodeRuntimeModule {
  NODE_MAJOR: number;
  NODE_VERSION: string;
  isSupported(version: string): boolean;
  cachedNodePath(env?: NodeJS.ProcessEnv): string;
  ensureNode(options: { log: (line: string) => void }): { path: string; version: string; source: 'own' | 'cached' | 'installed' };
}

// build/processes/node-runtime.js -> <repo>/scripts/node-runtime.js
// eslint-disable-next-line @typescript-eslint/no-require-imports
const runtime = require(join(__dirname, '..', '..', 'scripts', 'node-runtime.js')) as NodeRuntimeModule;

export const NODE_MAJOR = runtime.NODE_MAJOR;

/**
 * The node binary to start Sterna's processes with: this one when it is supported;
 * otherwise the cached supported build, installed if need be. `log` is told when the
 * answer is not this process's own node.
 */
export function supportedNodeBinary(log: (line: string) => void): string {
  if (runtime.isSupported(process.version)) return process.execPath;
  const node = runtime.ensureNode({ log });
  log(`sterna: this Node.js (${process.version}, ${process.execPath}) is older than ${NODE_MAJOR}: running on Node.js ${node.version} (${node.source}, ${node.path})`);
  return node.path;
}
