import { describe, expect, it } from 'vitest';
import { request } from './backend-http';
import { EXAMPLES, OPERATIONS, type OperationName } from './api/operations';

describe('the HTTP client', () => {
  it("sends each operation's example as the request the server's router answers", () => {
    // EXAMPLES carries, per operation, the request the Rust registry builds for its example; tests/operations.rs
    // sends exactly that to the real server and checks it answers as the window does.
    const names = Object.keys(OPERATIONS) as OperationName[];
    expect(names.length).toBeGreaterThan(30);
    for (const name of names) {
      const { args, request: expected } = EXAMPLES[name];
      const built = request(name, args);
      expect({ name, method: built.method, path: built.path, body: built.body ?? null }).toEqual({
        name,
        method: expected.method,
        path: expected.path,
        body: expected.body,
      });
    }
  });

  it('fills the path, encodes it, and leaves empty values out of the query', () => {
    expect(request('target_preview', { name: 'crm eu/1', lead: 'plain:P 1' })).toEqual({
      method: 'GET',
      path: '/api/targets/crm%20eu%2F1/preview?lead=plain%3AP+1',
    });
    expect(request('dead_letters', { target: 'crm', class: null, text: '', limit: 50 }).path).toBe('/api/dead-letters?limit=50&target=crm');
    expect(request('acknowledge_alert', { id: 7 })).toEqual({ method: 'POST', path: '/api/alerts/7/acknowledge' });
    expect(request('reveal_lead', { id: 3, reason: 'why' })).toEqual({ method: 'POST', path: '/api/leads/3/reveal', body: { reason: 'why' } });
    expect(() => request('dead_letter', {})).toThrow(/id/);
  });
});
