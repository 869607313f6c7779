import { render } from 'preact';
import { useState, useEffect } from 'preact/hooks';
import { api, setCsrf, onUnauthorized } from './api.js';
import { html, ErrorBox } from './ui.js';
import * as P from './pages.js';

// Routes: #/NAME[/ARG]. The first is the default.
const routes = [
  { path: 'overview', title: 'Overview', page: P.Overview },
  { path: 'tenants', title: 'Tenants', page: P.Tenants, detail: P.Tenant },
  { path: 'plans', title: 'Plans', page: P.Plans },
  { path: 'keys', title: 'Keys', page: P.Keys },
  { path: 'requests', title: 'Live requests', page: P.Requests },
  { path: 'policy', title: 'Policy & plugins', page: P.Policy },
  { path: 'prices', title: 'Prices', page: P.Prices },
  { path: 'audit', title: 'Audit log', page: P.Audit },
  { path: 'tokens', title: 'Admin tokens', page: P.Tokens },
];

function parseHash() {
  const parts = (location.hash || '').replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  return { name: parts[0] || routes[0].path, arg: parts.slice(1).join('/') };
}

function useHash() {
  const [h, setH] = useState(parseHash());
  useEffect(() => {
    const f = () => setH(parseHash());
    addEventListener('hashchange', f);
    return () => removeEventListener('hashchange', f);
  }, []);
  return h;
}

function SignIn({ onSession, reason }) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    const input = e.target.elements.token;
    const token = input.value.trim();
    if (!token) return;
    setBusy(true);
    setError(null);
    try {
      const s = await api('POST', '/v1/admin/session', { token });
      input.value = '';
      onSession(s);
    } catch (err) {
      input.value = '';
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="signin" onSubmit=${submit} autocomplete="off">
    <h1>Tollgate console</h1>
    <p>Sign in with an admin token (the gateway's <code>$TOLLGATE_ADMIN_TOKEN</code> or a stored <code>tgadm_…</code> token).
      The token goes to the gateway once; the console keeps only an HttpOnly session cookie.</p>
    ${reason ? html`<p class="notice">${reason}</p>` : null}
    <label class="field"><span>Admin token</span>
      <input type="password" name="token" autocomplete="off" spellcheck="false" required autofocus /></label>
    <button type="submit" disabled=${busy}>Sign in</button>
    <${ErrorBox} error=${error} />
  </form>`;
}

function App() {
  // undefined: asking; null: signed out; else the session.
  const [session, setSession] = useState(undefined);
  const [reason, setReason] = useState('');
  const route = useHash();

  const signedIn = (s) => { setCsrf(s.csrf_token); setReason(''); setSession(s); };
  useEffect(() => {
    onUnauthorized(() => { setCsrf(null); setReason('Your session has ended: sign in again.'); setSession(null); });
    api('GET', '/v1/admin/session').then(signedIn, () => setSession(null));
  }, []);

  if (session === undefined) return html`<p class="boot">Loading the console…</p>`;
  if (session === null) return html`<${SignIn} onSession=${signedIn} reason=${reason} />`;

  const signOut = async () => {
    try { await api('DELETE', '/v1/admin/session'); } catch { /* signed out either way */ }
    setCsrf(null);
    setSession(null);
  };
  const r = routes.find((x) => x.path === route.name) || null;
  const Page = r ? (route.arg && r.detail ? r.detail : r.page) : null;
  return html`<div class="shell">
    <nav aria-label="Console">
      <div class="brand">Tollgate</div>
      ${routes.map((x) => html`<a href=${`#/${x.path}`} class=${x === r ? 'active' : ''}>${x.title}</a>`)}
    </nav>
    <main>
      <header class="top">
        <span>Signed in as <strong>${session.name || session.actor}</strong> (${(session.scopes || []).join(', ')})</span>
        <button class="secondary small" onClick=${signOut}>Sign out</button>
      </header>
      ${session.read_only ? html`<div class="banner" role="status">read-only (memory store): the policy file is the store; changes are refused</div>` : null}
      ${Page ? html`<${Page} key=${route.name + '/' + route.arg} arg=${route.arg} session=${session} />`
        : html`<p>No page ${route.name}. <a href="#/overview">Overview</a></p>`}
    </main>
  </div>`;
}

render(html`<${App} />`, document.getElementById('app'));
