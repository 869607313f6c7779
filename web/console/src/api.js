// The admin API client. The session cookie is HttpOnly: this module never
// sees or keeps a token. It keeps the session's CSRF token in memory only
// and sends it as X-CSRF-Token on every request that is not a GET.

let csrf = null;
let unauthorized = () => {};

export function setCsrf(token) { csrf = token || null; }
export function onUnauthorized(fn) { unauthorized = fn; }

// ApiError carries the API's OpenAI-style error: message, code, param.
export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || '';
    this.param = e.param || '';
    this.type = e.type || '';
  }
}

export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD' && csrf) headers['X-CSRF-Token'] = csrf;
  let r;
  try {
    r = await fetch(path, {
      method, headers, credentials: 'same-origin', cache: 'no-store', redirect: 'error',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, { error: { message: `the gateway did not answer (${e.message})`, code: 'network' } });
  }
  if (r.status === 204) return null;
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!r.ok) {
    const err = new ApiError(r.status, data);
    if (r.status === 401 && path !== '/v1/admin/session') unauthorized(err);
    throw err;
  }
  return data;
}

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body === undefined ? {} : body);
export const put = (path, body) => api('PUT', path, body);
export const patch = (path, body) => api('PATCH', path, body);
export const del = (path) => api('DELETE', path);

// query builds "?a=1&b=2" from the non-empty values of obj.
export function query(obj) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(obj)) if (v !== undefined && v !== null && v !== '') p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : '';
}

export const enc = encodeURIComponent;
