/**
 * The workflow bundle's inline source map keeps the text of Sterna's own sources only:
 * each namespace's workflow thread parses and keeps it (workers/bundle.ts).
 */
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync } from 'node:fs';
import { INLINE_MAP, inlineSourceMapOf, WORKFLOW_BUNDLE, withoutLibrarySources } from '../../workers/bundle';

describe('the workflow bundle\'s source map', () => {
  it('drops the text of node_modules sources and keeps every source, mapping and Sterna\'s own text', () => {
    const map = { version: 3, sources: ['/repo/workflows/run/machine.ts', '/repo/node_modules/zod/index.ts'], sourcesContent: ['export const step = 1;', 'export const z = 2;'], names: [], mappings: 'AAAA;AACA' };
    const code = `var step = 1;\n${INLINE_MAP}${Buffer.from(JSON.stringify(map)).toString('base64')}`;
    const out = withoutLibrarySources(code);
    assert.ok(out.startsWith('var step = 1;\n'), 'the code is unchanged');
    assert.deepEqual(inlineSourceMapOf(out), { ...map, sourcesContent: ['export const step = 1;', null] });
  });

  it('refuses a bundle whose map is not where the SDK puts it, rather than ship it unchanged', () => {
    assert.throws(() => withoutLibrarySources('var a = 1;\n//# sourceMappingURL=bundle.js.map'), /no inline source map/);
  });

  it('as npm run build writes it: the text of Sterna\'s sources only', function () {
    if (!existsSync(WORKFLOW_BUNDLE)) this.skip();
    const map = inlineSourceMapOf(readFileSync(WORKFLOW_BUNDLE, 'utf8'));
    const withText = map.sources.filter((_, i) => map.sourcesContent?.[i]);
    assert.ok(withText.some((s) => s.endsWith('/workflows/run/machine.ts')), 'the run\'s reducer keeps its text');
    assert.deepEqual(withText.filter((s) => s.includes('/node_modules/')), []);
    assert.ok(map.sources.some((s) => s.includes('/node_modules/@temporalio/workflow/')), 'library frames are still mapped to their files');
  });
});
