import { describe, expect, it } from 'vitest';

// Every source file of the UI, as text (tests left out: they may import anything they test).
const sources = import.meta.glob(['/src/**/*.ts', '/src/**/*.svelte', '!/src/**/*.test.ts'], {
  query: '?raw',
  import: 'default',
  eager: true,
}) as Record<string, string>;

/** The module a relative import from `from` names, as a key of `sources` (`./x` from `/src/lib/y.ts` → `/src/lib/x.ts`). */
function resolve(from: string, spec: string): string | null {
  const parts = from.split('/').slice(0, -1);
  for (const p of spec.split('/')) {
    if (p === '..') parts.pop();
    else if (p !== '.') parts.push(p);
  }
  const path = parts.join('/');
  return [path, `${path}.ts`, `${path}.svelte`].find((p) => p in sources) ?? null;
}

/** Each module's relative imports: static (`from './x'`) and dynamic (`import('./x')`), types included. */
function imports(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const [file, text] of Object.entries(sources)) {
    const specs = [...text.matchAll(/(?:from\s+|import\s*\(\s*)'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]!);
    graph.set(file, specs.map((s) => resolve(file, s)).filter((m): m is string => m !== null));
  }
  return graph;
}

describe('the UI modules', () => {
  it('import each other without a circle', () => {
    const graph = imports();
    expect(graph.get('/src/lib/backend-desk.ts')).toContain('/src/lib/backend-http.ts');
    const circles: string[] = [];
    const done = new Set<string>();
    const visit = (file: string, path: string[]) => {
      if (path.includes(file)) {
        circles.push([...path.slice(path.indexOf(file)), file].join(' → '));
        return;
      }
      if (done.has(file)) return;
      for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
      done.add(file);
    };
    for (const file of graph.keys()) visit(file, []);
    expect(circles).toEqual([]);
  });
});
