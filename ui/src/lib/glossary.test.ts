import { describe, expect, it } from 'vitest';
import { GLOSSARY } from './glossary';
import doc from '../../../docs/operators.md?raw';

describe('glossary', () => {
  it('is the same in the app and in the operators’ guide', () => {
    const section = doc.split('\n## Glossary\n')[1]?.split('\n## ')[0] ?? '';
    const inDoc = [...section.matchAll(/^- \*\*(.+?)\*\*: (.+)$/gm)].map((m) => ({ term: m[1], meaning: m[2] }));
    expect(inDoc).toEqual(GLOSSARY);
  });
  it('has each word once', () => {
    expect(new Set(GLOSSARY.map((w) => w.term.toLowerCase())).size).toBe(GLOSSARY.length);
  });
});
