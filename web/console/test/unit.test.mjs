// Unit tests of the console's logic that needs no browser (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { usageSeries, day } from '../src/series.js';
import { api, setCsrf, onUnauthorized, query, ApiError } from '../src/api.js';

test('usageSeries sums per day and model, every day of the range', () => {
  const rows = [
    { day: '2026-12-02', model: 'b', cost_micros: 5 },
    { day: '2026-11-30', model: 'a', cost_micros: 1 },
    { day: '2026-11-30', model: 'a', cost_micros: 2 },
    { day: '2026-12-02', model: 'a', cost_micros: 4 },
    { day: '2026-11-01', model: 'c', cost_micros: 9 }, // outside the range
  ];
  const { models, data } = usageSeries(rows, (r) => r.cost_micros, '2026-11-30', '2026-12-02');
  assert.deepEqual(models, ['a', 'b']);
  assert.deepEqual(data[0], [day('2026-11-30'), day('2026-12-01'), day('2026-12-02')]);
  assert.deepEqual(data[1], [3, 0, 4]);
  assert.deepEqual(data[2], [0, 0, 5]);
  assert.equal(data[0][1] - data[0][0], 86400);
});

test('usageSeries without a range: the days present, rows without a model as "all"', () => {
  const { models, data } = usageSeries([{ day: '2026-12-02', requests: 2 }, { day: '2026-12-01', requests: 1 }], (r) => r.requests);
  assert.deepEqual(models, ['all']);
  assert.deepEqual(data, [[day('2026-12-01'), day('2026-12-02')], [1, 2]]);
  assert.deepEqual(usageSeries([], (r) => r.requests, '2026-12-01', '2026-12-01').data.length, 1);
});

test('query keeps non-empty values only, encoded', () => {
  assert.equal(query({ a: '', b: null, c: undefined }), '');
  assert.equal(query({ q: 'a b&c', limit: 50, status: '' }), '?q=a+b%26c&limit=50');
});

// fetch stub: records each call and answers with the queued replies.
function stubFetch(replies) {
  const calls = [];
  globalThis.fetch = async (path, init) => {
    calls.push({ path, init });
    const [status, body] = replies.shift();
    return new Response(body === null ? null : JSON.stringify(body), { status });
  };
  return calls;
}

test('the CSRF token goes with every request but GETs, the session cookie by the browser', async () => {
  const calls = stubFetch([[200, { ok: 1 }], [200, { ok: 2 }], [204, null], [200, {}]]);
  setCsrf('csrf-1');
  await api('GET', '/v1/admin/tenants');
  await api('POST', '/v1/admin/tenants', { id: 'x' });
  assert.equal(await api('DELETE', '/v1/admin/tenants/x'), null);
  setCsrf(null);
  await api('PATCH', '/v1/admin/tenants/x', {});
  assert.equal(calls[0].init.headers['X-CSRF-Token'], undefined);
  assert.equal(calls[1].init.headers['X-CSRF-Token'], 'csrf-1');
  assert.equal(calls[1].init.body, '{"id":"x"}');
  assert.equal(calls[2].init.headers['X-CSRF-Token'], 'csrf-1');
  assert.equal(calls[3].init.headers['X-CSRF-Token'], undefined);
  for (const c of calls) {
    assert.equal(c.init.credentials, 'same-origin');
    assert.equal(c.init.headers.Authorization, undefined);
  }
});

test('errors carry the API\'s message and code; a 401 signs out, except the sign-in\'s own', async () => {
  let signedOut = 0;
  onUnauthorized(() => { signedOut++; });
  stubFetch([
    [409, { error: { message: 'plan "pro" exists', type: 'invalid_request_error', param: 'id', code: 'already_exists' } }],
    [401, { error: { message: 'session expired', code: 'invalid_session' } }],
    [401, { error: { message: 'missing or wrong admin token', code: 'invalid_admin_token' } }],
    [502, null],
  ]);
  await assert.rejects(api('POST', '/v1/admin/plans', {}), (e) => e instanceof ApiError && e.message === 'plan "pro" exists'
    && e.code === 'already_exists' && e.param === 'id' && e.status === 409);
  assert.equal(signedOut, 0);
  await assert.rejects(api('GET', '/v1/admin/overview'), { message: 'session expired' });
  assert.equal(signedOut, 1);
  await assert.rejects(api('POST', '/v1/admin/session', { token: 't' }), { code: 'invalid_admin_token' });
  assert.equal(signedOut, 1);
  await assert.rejects(api('GET', '/v1/admin/policy'), { message: 'HTTP 502', status: 502 });
});
