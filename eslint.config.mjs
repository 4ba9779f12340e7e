// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const nodeBuiltins = ['node:*', 'fs', 'path', 'os', 'child_process', 'crypto', 'http', 'https', 'net', 'stream', 'util', 'events', 'process'];

export default tseslint.config(
  { ignores: ['build/**', 'node_modules/**', '.state/**', 'packages/*/dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2022, sourceType: 'module' },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { prefer: 'type-imports', fixStyle: 'inline-type-imports' }],
      'no-console': 'off',
    },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox: no I/O, no Node built-ins,
    // and activities only as types, so no side-effect code can enter the bundle.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: nodeBuiltins, message: 'Workflow code must be deterministic: no Node built-ins.' },
            { group: ['../activities/*', '../activities', '**/activities/**'], allowTypeImports: true, message: 'Import activities as types only.' },
            { group: ['@temporalio/client', '@temporalio/worker', '@temporalio/activity'], message: 'Workflows use @temporalio/workflow only.' },
          ],
          // A rule change ships as a new worker version that new executions and continued
          // chains move to (docs/versions.md), never as a branch kept for old histories.
          paths: [{ name: '@temporalio/workflow', importNames: ['patched', 'deprecatePatch'], message: 'Change rules by deploying a new worker version (docs/versions.md), not with patches.' }],
        },
      ],
    },
  },
  {
    files: ['scripts/*.js', '.mocharc.js'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', module: 'writable', __dirname: 'readonly', process: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
