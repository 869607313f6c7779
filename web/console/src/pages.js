import { useState, useMemo } from 'preact/hooks';
import { get, post, put, patch, del, query, enc } from './api.js';
import {
  html, ErrorBox, Notice, useLoad, useAction, Table, fmt, usd, when, num, Field, More, Secret, useConfirm, json, int,
} from './ui.js';
import { Chart, usageSeries } from './chart.js';

// useList loads the first page of a list (again when deps change) and
// appends the next pages on "More"; a reload starts from the first page.
function useList(path, params, deps) {
  const [extra, setExtra] = useState({ rows: [], last: null, error: null });
  const first = useLoad(async () => {
    const d = await get(path + query(params));
    setExtra({ rows: [], last: null, error: null });
    return d;
  }, deps);
  const list = extra.last || first.data;
  const more = async () => {
    try {
      const next = await get(path + query({ ...params, cursor: list.next_cursor }));
      setExtra((x) => ({ rows: [...x.rows, ...next.data], last: next, error: null }));
    } catch (e) {
      setExtra((x) => ({ ...x, error: e }));
    }
  };
  const rows = first.data ? [...first.data.data, ...extra.rows] : null;
  return { ...first, rows, list, more, moreError: extra.error };
}

function Status({ s }) { return html`<span class=${`status-${s}`}>${s || '—'}</span>`; }

// ——— Overview ———

export function Overview() {
  const ov = useLoad(() => get('/v1/admin/overview'), [], 3000);
  const stops = useLoad(() => get('/v1/admin/guard-actions?limit=10'), [], 5000);
  const o = ov.data;
  return html`<section>
    <h1>Overview</h1>
    <${ErrorBox} error=${ov.error} />
    ${o ? html`<div class="cards">
      <div class="card"><div class="label">Requests/s (last ${Math.round(o.window_seconds / 60)} min)</div><div class="value" data-testid="rps">${num(o.requests_per_second, 2)}</div></div>
      <div class="card"><div class="label">Requests (last ${Math.round(o.window_seconds / 60)} min)</div><div class="value">${num(o.requests, 0)}</div></div>
      <div class="card"><div class="label">Errors</div><div class="value">${num(o.errors, 0)} <small>(${num((o.error_rate || 0) * 100, 1)} %)</small></div></div>
      <div class="card"><div class="label">Spend this month</div><div class="value" data-testid="spend">${usd(o.spend_month_usd)}</div></div>
      <div class="card"><div class="label">In flight</div><div class="value">${num(o.in_flight, 0)}</div></div>
      <div class="card"><div class="label">Guard stops</div><div class="value">${num(o.guard_actions, 0)}</div></div>
    </div>
    <h2>Top tenants this month</h2>
    <${Table} rows=${o.top_tenants || []} empty="No spend this month." cols=${[
      { title: 'Tenant', render: (t) => html`<a href=${`#/tenants/${enc(t.tenant_id)}`}>${t.tenant_id}</a>` },
      { title: 'Spend', num: true, render: (t) => usd(t.spend_month_usd) },
      { title: 'Requests', num: true, render: (t) => num(t.requests, 0) },
    ]} />` : null}
    <h2>Latest guard stops</h2>
    <${ErrorBox} error=${stops.error} />
    <${Table} rows=${stops.data && stops.data.data} empty="No guard has stopped a request." cols=${[
      { title: 'When', render: (g) => when(g.started_at) },
      { title: 'Tenant', render: (g) => html`<a href=${`#/tenants/${enc(g.tenant_id)}`}>${g.tenant_id}</a>` },
      { title: 'Model', key: 'model' }, { title: 'Action', key: 'guard_action' }, { title: 'Status', key: 'status', num: true },
      { title: 'Request', render: (g) => html`<code>${g.request_id}</code>` },
    ]} />
  </section>`;
}

// ——— Tenants ———

function usePlans() {
  return useLoad(() => get('/v1/admin/plans?limit=500'), []);
}

export function Tenants() {
  const [f, setF] = useState({ q: '', status: '', plan_id: '' });
  const list = useList('/v1/admin/tenants', f, [f.q, f.status, f.plan_id]);
  const plans = usePlans();
  const act = useAction();
  const [ask, confirm] = useConfirm();
  const [done, setDone] = useState('');
  const planIDs = plans.data ? plans.data.data.map((p) => p.id) : [];

  const create = (e) => {
    e.preventDefault();
    const el = e.target.elements;
    act.run(async () => {
      const t = await post('/v1/admin/tenants', { id: el.id.value.trim(), plan_id: el.plan_id.value });
      setDone(`Tenant ${t.id} created.`);
      e.target.reset();
      list.reload();
    });
  };
  const setStatus = (t, status) => act.run(async () => {
    await patch(`/v1/admin/tenants/${enc(t.id)}`, { status });
    setDone(`Tenant ${t.id} is ${status}.`);
    list.reload();
  });
  const remove = async (t) => {
    if (!(await ask(`Delete tenant ${t.id} and its keys? Its call log stays.`))) return;
    act.run(async () => { await del(`/v1/admin/tenants/${enc(t.id)}`); setDone(`Tenant ${t.id} deleted.`); list.reload(); });
  };

  return html`<section>
    <h1>Tenants</h1>
    <div class="panel">
      <h2>New tenant</h2>
      <form class="inline" onSubmit=${create}>
        <${Field} label="ID"><input name="id" required placeholder="acme" /></${Field}>
        <${Field} label="Plan"><select name="plan_id" required>${planIDs.map((p) => html`<option value=${p}>${p}</option>`)}</select></${Field}>
        <button type="submit" disabled=${act.busy}>Create tenant</button>
      </form>
      <${ErrorBox} error=${plans.error} />
    </div>
    <${Notice} text=${done} />
    <${ErrorBox} error=${act.error} />
    <div class="filters">
      <${Field} label="ID starts with"><input value=${f.q} onInput=${(e) => setF({ ...f, q: e.target.value })} /></${Field}>
      <${Field} label="Status"><select value=${f.status} onChange=${(e) => setF({ ...f, status: e.target.value })}>
        <option value="">any</option><option>active</option><option>suspended</option></select></${Field}>
      <${Field} label="Plan"><select value=${f.plan_id} onChange=${(e) => setF({ ...f, plan_id: e.target.value })}>
        <option value="">any</option>${planIDs.map((p) => html`<option>${p}</option>`)}</select></${Field}>
    </div>
    <${ErrorBox} error=${list.error} />
    <${Table} rows=${list.rows} rowKey=${(t) => t.id} empty="No tenants." cols=${[
      { title: 'ID', render: (t) => html`<a href=${`#/tenants/${enc(t.id)}`}>${t.id}</a>` },
      { title: 'Plan', key: 'plan_id' }, { title: 'Status', render: (t) => html`<${Status} s=${t.status} />` },
      { title: 'Active keys', key: 'keys_active', num: true },
      { title: 'Spend this month', num: true, render: (t) => usd(t.spend_month_usd) },
      { title: 'Created', render: (t) => when(t.created_at) },
      { title: '', render: (t) => html`
        ${t.status === 'suspended'
          ? html`<button class="small secondary" onClick=${() => setStatus(t, 'active')}>Activate</button>`
          : html`<button class="small secondary" onClick=${() => setStatus(t, 'suspended')}>Suspend</button>`}
        <button class="small danger" onClick=${() => remove(t)}>Delete</button>` },
    ]} />
    <${More} list=${list.list} onMore=${list.more} />
    <${ErrorBox} error=${list.moreError} />
    ${confirm}
  </section>`;
}

// KeyCreate: the form creating a key for tenant (fixed) or a tenant typed in.
function KeyCreate({ tenant, onCreated }) {
  const act = useAction();
  const [secret, setSecret] = useState(null);
  const submit = (e) => {
    e.preventDefault();
    const el = e.target.elements;
    act.run(async () => {
      const tid = tenant || el.tenant.value.trim();
      const body = {};
      if (el.expires.value) body.expires_at = new Date(`${el.expires.value}T00:00:00Z`).toISOString();
      for (const k of ['rpm', 'tpm', 'max_tokens']) if (el[k].value) body[k] = int(el[k].value);
      if (el.budget_usd.value) { body.budget_usd = el.budget_usd.value; body.budget_window = el.budget_window.value; }
      const k = await post(`/v1/admin/tenants/${enc(tid)}/keys`, body);
      const { key, ...rest } = k;
      e.target.reset();
      setSecret({ key, prefix: rest.prefix });
      onCreated(rest);
    });
  };
  return html`<div class="panel">
    <h2>New key</h2>
    <form class="inline" onSubmit=${submit} autocomplete="off">
      ${tenant ? null : html`<${Field} label="Tenant"><input name="tenant" required /></${Field}>`}
      <${Field} label="Expires (UTC day, optional)"><input name="expires" type="date" /></${Field}>
      <${Field} label="RPM"><input name="rpm" type="number" min="0" /></${Field}>
      <${Field} label="TPM"><input name="tpm" type="number" min="0" /></${Field}>
      <${Field} label="Max tokens"><input name="max_tokens" type="number" min="0" /></${Field}>
      <${Field} label="Own budget (USD)"><input name="budget_usd" inputmode="decimal" /></${Field}>
      <${Field} label="per"><select name="budget_window"><option>month</option><option>day</option></select></${Field}>
      <button type="submit" disabled=${act.busy}>Create key</button>
    </form>
    <${ErrorBox} error=${act.error} />
    ${secret ? html`<${Secret} title=${`New key ${secret.prefix}…`} value=${secret.key} what="API key" onClose=${() => setSecret(null)} />` : null}
  </div>`;
}

function KeyTable({ rows, onChange, setError, setDone }) {
  const [ask, confirm] = useConfirm();
  const revoke = async (k) => {
    if (!(await ask(`Revoke key ${k.prefix}… of ${k.tenant_id}? Requests with it fail from now on.`))) return;
    try { await post(`/v1/admin/keys/${enc(k.id)}/revoke`, { tenant_id: k.tenant_id }); setDone(`Key ${k.prefix}… revoked.`); onChange(); } catch (e) { setError(e); }
  };
  const remove = async (k) => {
    if (!(await ask(`Delete key ${k.prefix}…?`))) return;
    try { await del(`/v1/admin/keys/${enc(k.id)}`); setDone(`Key ${k.prefix}… deleted.`); onChange(); } catch (e) { setError(e); }
  };
  return html`<${Table} rows=${rows} rowKey=${(k) => k.id} empty="No keys." cols=${[
    { title: 'ID', render: (k) => html`<code>${k.id}</code>` },
    { title: 'Prefix', render: (k) => html`<code>${k.prefix}…</code>` },
    { title: 'Tenant', render: (k) => html`<a href=${`#/tenants/${enc(k.tenant_id)}`}>${k.tenant_id}</a>` },
    { title: 'Status', render: (k) => html`<${Status} s=${k.status} />` },
    { title: 'Limits', render: (k) => `rpm ${k.rpm || '—'} · tpm ${k.tpm || '—'} · max ${k.max_tokens || '—'}` },
    { title: 'Budget', render: (k) => (k.budget_usd ? `${usd(k.budget_usd)}/${k.budget_window || 'month'}` : 'plan\'s') },
    { title: 'Created', render: (k) => when(k.created_at) },
    { title: 'Expires', render: (k) => when(k.expires_at) },
    { title: '', render: (k) => html`
      ${k.status === 'active' ? html`<button class="small secondary" onClick=${() => revoke(k)}>Revoke</button>` : null}
      <button class="small danger" onClick=${() => remove(k)}>Delete</button>` },
  ]} />${confirm}`;
}

const today = () => new Date().toISOString().slice(0, 10);
const daysAgo = (n) => new Date(Date.now() - n * 86400e3).toISOString().slice(0, 10);

export function Tenant({ arg }) {
  const id = arg;
  const t = useLoad(() => get(`/v1/admin/tenants/${enc(id)}`), [id], 5000);
  const keys = useList('/v1/admin/keys', { tenant_id: id }, [id]);
  const plans = usePlans();
  const month = useLoad(() => get(`/v1/admin/tenants/${enc(id)}/usage`), [id], 5000);
  const budgets = useLoad(() => get(`/v1/admin/tenants/${enc(id)}/budgets`), [id], 10000);
  const [range, setRange] = useState({ from: daysAgo(29), to: today() });
  const usage = useLoad(() => get(`/v1/admin/usage${query({ ...range, tenant_id: id, group_by: 'day,model', limit: 500 })}`),
    [id, range.from, range.to], 10000);
  const act = useAction();
  const [done, setDone] = useState('');
  const series = useMemo(() => (usage.data ? usageSeries(usage.data.data, (r) => r.cost_micros / 1e6, range.from, range.to) : null), [usage.data]);
  const reqSeries = useMemo(() => (usage.data ? usageSeries(usage.data.data, (r) => r.requests, range.from, range.to) : null), [usage.data]);

  const patchTenant = (body, what) => act.run(async () => {
    await patch(`/v1/admin/tenants/${enc(id)}`, body);
    setDone(what);
    t.reload();
  });
  const x = t.data;
  const u = month.data;
  return html`<section>
    <p><a href="#/tenants">← Tenants</a></p>
    <h1>Tenant ${id}</h1>
    <${ErrorBox} error=${t.error} />
    <${Notice} text=${done} />
    <${ErrorBox} error=${act.error} />
    ${x ? html`<div class="panel">
      <dl class="kv">
        <dt>Status</dt><dd><${Status} s=${x.status} /></dd>
        <dt>Plan</dt><dd>
          <select value=${x.plan_id} onChange=${(e) => patchTenant({ plan_id: e.target.value }, `Plan set to ${e.target.value}.`)}>
            ${(plans.data ? plans.data.data.map((p) => p.id) : [x.plan_id]).map((p) => html`<option>${p}</option>`)}
          </select></dd>
        <dt>Active keys</dt><dd>${fmt(x.keys_active)}</dd>
        <dt>Spend this month</dt><dd data-testid="tenant-spend">${usd(x.spend_month_usd)}</dd>
        <dt>Created</dt><dd>${when(x.created_at)}</dd>
        <dt>Plugins</dt><dd><code>${x.plugins ? JSON.stringify(x.plugins) : 'the plan\'s'}</code></dd>
      </dl>
      ${x.status === 'suspended'
        ? html`<button class="secondary" onClick=${() => patchTenant({ status: 'active' }, 'Tenant activated.')}>Activate</button>`
        : html`<button class="secondary" onClick=${() => patchTenant({ status: 'suspended' }, 'Tenant suspended.')}>Suspend</button>`}
    </div>` : null}

    <h2>Budget this month</h2>
    <${ErrorBox} error=${month.error} />
    ${u ? html`<div class="cards">
      <div class="card"><div class="label">Spent (${u.month})</div><div class="value" data-testid="usage-spend">${usd(u.spend_usd)}</div></div>
      <div class="card"><div class="label">Budget</div><div class="value">${u.budget_micros ? usd(u.budget_usd) : 'none'}</div></div>
      <div class="card"><div class="label">Held by requests in flight</div><div class="value">${usd(u.reserved_usd)}</div></div>
      <div class="card"><div class="label">Remaining</div><div class="value">${usd(u.remaining_usd)}</div></div>
    </div>` : null}
    <${ErrorBox} error=${budgets.error} />
    <${Table} rows=${budgets.data && budgets.data.data} empty="The plan sets no budgets." cols=${[
      { title: 'Scope', render: (b) => `${b.scope}${b.id ? ` ${b.id}` : ''}` }, { title: 'Window', key: 'window' }, { title: 'Period', key: 'period' },
      { title: 'Limit', num: true, render: (b) => usd(b.limit_usd) },
      { title: 'Spent', num: true, render: (b) => (b.spent_micros == null ? '—' : `$${(b.spent_micros / 1e6).toFixed(6)}`) },
      { title: 'Remaining', num: true, render: (b) => usd(b.remaining_usd) },
      { title: 'Alerts at', render: (b) => (b.alerts ? b.alerts.map((a) => `${a} %`).join(', ') : '—') },
    ]} />

    <h2>Usage per day and model</h2>
    <div class="filters">
      <${Field} label="From"><input type="date" value=${range.from} onChange=${(e) => setRange({ ...range, from: e.target.value })} /></${Field}>
      <${Field} label="To"><input type="date" value=${range.to} onChange=${(e) => setRange({ ...range, to: e.target.value })} /></${Field}>
    </div>
    <${ErrorBox} error=${usage.error} />
    ${series ? html`<div class="panel">
      <${Chart} title="Cost (USD)" unit="USD" models=${series.models} data=${series.data} from=${range.from} to=${range.to} />
      <${Chart} title="Requests" unit="requests" models=${reqSeries.models} data=${reqSeries.data} from=${range.from} to=${range.to} />
    </div>` : null}

    <h2>Keys</h2>
    <${KeyCreate} tenant=${id} onCreated=${() => { keys.reload(); t.reload(); }} />
    <${ErrorBox} error=${keys.error} />
    <${KeyTable} rows=${keys.rows} onChange=${() => { keys.reload(); t.reload(); }} setError=${act.setError} setDone=${setDone} />
    <${More} list=${keys.list} onMore=${keys.more} />
  </section>`;
}

// ——— Plans ———

function planBody(el) {
  const models = el.allowed_models.value.split(',').map((s) => s.trim()).filter(Boolean);
  const body = {
    monthly_budget_usd: el.monthly_budget_usd.value.trim() || '0',
    rpm: int(el.rpm.value), tpm: int(el.tpm.value), max_tokens: int(el.max_tokens.value),
    allowed_models: models,
  };
  const budgets = json(el.budgets.value, 'budgets');
  if (budgets !== undefined) body.budgets = budgets;
  const plugins = json(el.plugins.value, 'plugins');
  if (plugins !== undefined) body.plugins = plugins;
  return body;
}

function PlanForm({ plan, onSaved, onCancel }) {
  const act = useAction();
  const submit = (e) => {
    e.preventDefault();
    const el = e.target.elements;
    act.run(async () => {
      const body = planBody(el);
      if (plan) await put(`/v1/admin/plans/${enc(plan.id)}`, body);
      else await post('/v1/admin/plans', { id: el.id.value.trim(), ...body });
      onSaved(plan ? `Plan ${plan.id} saved.` : `Plan ${el.id.value.trim()} created.`);
      if (!plan) e.target.reset();
    });
  };
  const p = plan || {};
  const jsonOf = (v) => (v && (Array.isArray(v) ? v.length : Object.keys(v).length) ? JSON.stringify(v, null, 2) : '');
  return html`<form class="inline" onSubmit=${submit} key=${p.id || 'new'}>
    ${plan ? html`<strong>Editing ${p.id}</strong>` : html`<${Field} label="ID"><input name="id" required /></${Field}>`}
    <${Field} label="Monthly budget (USD, 0: none)"><input name="monthly_budget_usd" inputmode="decimal" value=${p.monthly_budget_usd || ''} /></${Field}>
    <${Field} label="RPM"><input name="rpm" type="number" min="0" value=${p.rpm || ''} /></${Field}>
    <${Field} label="TPM"><input name="tpm" type="number" min="0" value=${p.tpm || ''} /></${Field}>
    <${Field} label="Max tokens"><input name="max_tokens" type="number" min="0" value=${p.max_tokens || ''} /></${Field}>
    <${Field} label="Allowed models (comma-separated; empty: all)"><input name="allowed_models" value=${(p.allowed_models || []).join(', ')} /></${Field}>
    <label class="field wide"><span>Budgets (JSON list, optional): [{"scope":"key","window":"day","usd":"5","alerts":[80]}]</span>
      <textarea name="budgets">${jsonOf(p.budgets)}</textarea></label>
    <label class="field wide"><span>Plugins (JSON object, optional): {"holdback":{"enabled":false}}</span>
      <textarea name="plugins">${jsonOf(p.plugins)}</textarea></label>
    <button type="submit" disabled=${act.busy}>${plan ? 'Save plan' : 'Create plan'}</button>
    ${plan ? html`<button type="button" class="secondary" onClick=${onCancel}>Cancel</button>` : null}
    <div class="field wide"><${ErrorBox} error=${act.error} /></div>
  </form>`;
}

export function Plans() {
  const list = useList('/v1/admin/plans', {}, []);
  const [editing, setEditing] = useState(null);
  const [done, setDone] = useState('');
  const act = useAction();
  const [ask, confirm] = useConfirm();
  const saved = (msg) => { setDone(msg); setEditing(null); list.reload(); };
  const remove = async (p) => {
    if (!(await ask(`Delete plan ${p.id}?`))) return;
    act.run(async () => { await del(`/v1/admin/plans/${enc(p.id)}`); setDone(`Plan ${p.id} deleted.`); list.reload(); });
  };
  return html`<section>
    <h1>Plans</h1>
    <div class="panel"><h2>${editing ? 'Edit plan' : 'New plan'}</h2>
      <${PlanForm} plan=${editing} onSaved=${saved} onCancel=${() => setEditing(null)} /></div>
    <${Notice} text=${done} />
    <${ErrorBox} error=${act.error} />
    <${ErrorBox} error=${list.error} />
    <${Table} rows=${list.rows} rowKey=${(p) => p.id} empty="No plans." cols=${[
      { title: 'ID', key: 'id' },
      { title: 'Monthly budget', num: true, render: (p) => (Number(p.monthly_budget_usd) ? usd(p.monthly_budget_usd) : 'none') },
      { title: 'RPM', num: true, render: (p) => p.rpm || '—' }, { title: 'TPM', num: true, render: (p) => p.tpm || '—' },
      { title: 'Max tokens', num: true, render: (p) => p.max_tokens || '—' },
      { title: 'Models', render: (p) => fmt(p.allowed_models && p.allowed_models.length ? p.allowed_models : 'all') },
      { title: 'Budgets', render: (p) => (p.budgets ? p.budgets.map((b) => `${b.scope}/${b.window} ${usd(b.usd)}`).join(', ') : '—') },
      { title: 'Tenants', key: 'tenants', num: true },
      { title: '', render: (p) => html`<button class="small secondary" onClick=${() => setEditing(p)}>Edit</button>
        <button class="small danger" onClick=${() => remove(p)}>Delete</button>` },
    ]} />
    <${More} list=${list.list} onMore=${list.more} />
    ${confirm}
  </section>`;
}

// ——— Keys ———

export function Keys() {
  const [f, setF] = useState({ tenant_id: '', status: '' });
  const list = useList('/v1/admin/keys', f, [f.tenant_id, f.status]);
  const [error, setError] = useState(null);
  const [done, setDone] = useState('');
  return html`<section>
    <h1>Keys</h1>
    <${KeyCreate} onCreated=${(k) => { setDone(`Key ${k.prefix}… created for ${k.tenant_id}.`); list.reload(); }} />
    <${Notice} text=${done} />
    <${ErrorBox} error=${error} />
    <div class="filters">
      <${Field} label="Tenant"><input value=${f.tenant_id} onChange=${(e) => setF({ ...f, tenant_id: e.target.value.trim() })} /></${Field}>
      <${Field} label="Status"><select value=${f.status} onChange=${(e) => setF({ ...f, status: e.target.value })}>
        <option value="">any</option><option>active</option><option>revoked</option><option>expired</option></select></${Field}>
    </div>
    <${ErrorBox} error=${list.error} />
    <${KeyTable} rows=${list.rows} onChange=${list.reload} setError=${setError} setDone=${setDone} />
    <${More} list=${list.list} onMore=${list.more} />
    <${ErrorBox} error=${list.moreError} />
  </section>`;
}

// ——— Live requests ———

export function Requests() {
  const list = useLoad(() => get('/v1/admin/requests?limit=500'), [], 1500);
  const act = useAction();
  const [done, setDone] = useState('');
  const cancel = (r) => act.run(async () => {
    await post(`/v1/admin/requests/${enc(r.id)}/cancel`);
    setDone(`Request ${r.id} cancelled.`);
    list.reload();
  });
  return html`<section>
    <h1>Live requests</h1>
    <p class="empty">Requests in flight on every replica (refreshed every 1.5 s).</p>
    <${Notice} text=${done} />
    <${ErrorBox} error=${act.error} />
    <${ErrorBox} error=${list.error} />
    <${Table} rows=${list.data && list.data.data} rowKey=${(r) => r.id} empty="No request in flight." cols=${[
      { title: 'Request', render: (r) => html`<code>${r.id}</code>` },
      { title: 'Tenant', render: (r) => html`<a href=${`#/tenants/${enc(r.tenant_id)}`}>${r.tenant_id}</a>` },
      { title: 'Model', key: 'model' }, { title: 'Stream', render: (r) => (r.stream ? 'yes' : 'no') },
      { title: 'Started', render: (r) => when(r.started_at) },
      { title: 'For', num: true, render: (r) => (r.started_at ? `${Math.max(0, Math.round((Date.now() - Date.parse(r.started_at)) / 1000))} s` : '—') },
      { title: 'Replica', key: 'replica' },
      { title: '', render: (r) => html`<button class="small danger" disabled=${act.busy} onClick=${() => cancel(r)}>Cancel</button>` },
    ]} />
  </section>`;
}

// ——— Policy ———

export function Policy() {
  const p = useLoad(() => get('/v1/admin/policy'), [], 5000);
  const x = p.data;
  return html`<section>
    <h1>Policy & plugins</h1>
    <${ErrorBox} error=${p.error} />
    ${x ? html`<div class="panel"><dl class="kv">
      <dt>Generation</dt><dd>${fmt(x.generation)}</dd>
      <dt>Loaded</dt><dd>${when(x.loaded_at)}</dd>
      <dt>Reloads</dt><dd>${fmt(x.reloads)}</dd>
      <dt>Last reload error</dt><dd>${x.last_reload_error ? html`<span class="status-revoked">${x.last_reload_error}</span>` : 'none'}</dd>
      <dt>Store</dt><dd>${fmt(x.store)}</dd>
    </dl></div>
    <h2>Plugins</h2>
    <${Table} rows=${x.plugins || []} rowKey=${(pl) => pl.name} empty="The policy runs no plugin." cols=${[
      { title: 'Name', key: 'name' }, { title: 'Phases', render: (pl) => fmt(pl.phases) },
      { title: 'Instances', key: 'instances', num: true }, { title: 'Errors', key: 'errors', num: true },
      { title: 'Details', render: (pl) => {
        const { name, phases, instances, errors, ...rest } = pl;
        return Object.keys(rest).length ? html`<code>${JSON.stringify(rest)}</code>` : '—';
      } },
    ]} />` : null}
  </section>`;
}

// ——— Prices ———

export function Prices() {
  const [model, setModel] = useState('');
  const list = useList('/v1/admin/prices', { model }, [model]);
  const act = useAction();
  const [done, setDone] = useState('');
  const [ask, confirm] = useConfirm();
  const submit = (e) => {
    e.preventDefault();
    const el = e.target.elements;
    act.run(async () => {
      const body = { model: el.model.value.trim(), input_usd_per_mtok: el.input.value.trim(), output_usd_per_mtok: el.output.value.trim() };
      if (el.effective_from.value) body.effective_from = new Date(el.effective_from.value).toISOString();
      await put('/v1/admin/prices', body);
      setDone(`Price of ${body.model} set.`);
      e.target.reset();
      list.reload();
    });
  };
  const remove = async (p) => {
    if (!(await ask(`Delete the admin price of ${p.model}? The catalog's, if any, applies again.`))) return;
    act.run(async () => { await del(`/v1/admin/prices/${enc(p.model)}`); setDone(`Price of ${p.model} deleted.`); list.reload(); });
  };
  return html`<section>
    <h1>Prices</h1>
    <div class="panel"><h2>Set a price (USD per million tokens)</h2>
      <form class="inline" onSubmit=${submit}>
        <${Field} label="Model"><input name="model" required /></${Field}>
        <${Field} label="Input"><input name="input" required inputmode="decimal" /></${Field}>
        <${Field} label="Output"><input name="output" required inputmode="decimal" /></${Field}>
        <${Field} label="Effective from (optional)"><input name="effective_from" type="datetime-local" /></${Field}>
        <button type="submit" disabled=${act.busy}>Set price</button>
      </form></div>
    <${Notice} text=${done} />
    <${ErrorBox} error=${act.error} />
    <div class="filters"><${Field} label="Model"><input value=${model} onChange=${(e) => setModel(e.target.value.trim())} /></${Field}></div>
    <${ErrorBox} error=${list.error} />
    <${Table} rows=${list.rows} rowKey=${(p) => p.model} empty="No admin prices: the catalog's apply." cols=${[
      { title: 'Model', key: 'model' },
      { title: 'Input /Mtok', num: true, render: (p) => usd(p.input_usd_per_mtok) },
      { title: 'Output /Mtok', num: true, render: (p) => usd(p.output_usd_per_mtok) },
      { title: 'Cached input /Mtok', num: true, render: (p) => usd(p.cached_input_usd_per_mtok) },
      { title: 'Effective from', render: (p) => when(p.effective_from) },
      { title: 'Source', key: 'source' },
      { title: '', render: (p) => html`<button class="small danger" onClick=${() => remove(p)}>Delete</button>` },
    ]} />
    <${More} list=${list.list} onMore=${list.more} />
    ${confirm}
  </section>`;
}

// ——— Audit ———

export function Audit() {
  const [f, setF] = useState({ resource: '', resource_id: '', actor: '' });
  const list = useList('/v1/admin/audit', f, [f.resource, f.resource_id, f.actor]);
  const [open, setOpen] = useState(null);
  const input = (k) => html`<input value=${f[k]} onChange=${(e) => setF({ ...f, [k]: e.target.value.trim() })} />`;
  return html`<section>
    <h1>Audit log</h1>
    <div class="filters">
      <${Field} label="Resource">${input('resource')}</${Field}>
      <${Field} label="Resource ID">${input('resource_id')}</${Field}>
      <${Field} label="Actor">${input('actor')}</${Field}>
      <button class="secondary" onClick=${list.reload}>Refresh</button>
    </div>
    <${ErrorBox} error=${list.error} />
    <${Table} rows=${list.rows} rowKey=${(a) => a.id} empty="No audit entries." cols=${[
      { title: 'When', render: (a) => when(a.at) }, { title: 'Actor', key: 'actor' }, { title: 'Action', key: 'action' },
      { title: 'Resource', key: 'resource' }, { title: 'ID', key: 'resource_id' },
      { title: 'Change', render: (a) => (open === a.id
        ? html`<div><button class="small secondary" onClick=${() => setOpen(null)}>Hide</button>
            <div>before</div><pre>${a.before ? JSON.stringify(a.before, null, 2) : 'null'}</pre>
            <div>after</div><pre>${a.after ? JSON.stringify(a.after, null, 2) : 'null'}</pre></div>`
        : html`<button class="small secondary" onClick=${() => setOpen(a.id)}>Show</button>`) },
    ]} />
    <${More} list=${list.list} onMore=${list.more} />
    <${ErrorBox} error=${list.moreError} />
  </section>`;
}

// ——— Admin tokens ———

const scopes = ['read', 'write', 'cancel'];

export function Tokens() {
  const list = useList('/v1/admin/tokens', {}, []);
  const act = useAction();
  const [secret, setSecret] = useState(null);
  const [done, setDone] = useState('');
  const [ask, confirm] = useConfirm();
  const submit = (e) => {
    e.preventDefault();
    const el = e.target.elements;
    act.run(async () => {
      const body = { name: el.name.value.trim(), scopes: scopes.filter((s) => el[`scope_${s}`].checked) };
      if (el.expires.value) body.expires_at = new Date(`${el.expires.value}T00:00:00Z`).toISOString();
      const t = await post('/v1/admin/tokens', body);
      const { token, ...rest } = t;
      e.target.reset();
      setSecret({ token, name: rest.name });
      list.reload();
    });
  };
  const revoke = async (t) => {
    if (!(await ask(`Revoke admin token ${t.name} (${t.prefix}…)? Its sessions end.`))) return;
    act.run(async () => { await post(`/v1/admin/tokens/${enc(t.id)}/revoke`); setDone(`Token ${t.name} revoked.`); list.reload(); });
  };
  return html`<section>
    <h1>Admin tokens</h1>
    <div class="panel"><h2>New admin token</h2>
      <form class="inline" onSubmit=${submit} autocomplete="off">
        <${Field} label="Name"><input name="name" required /></${Field}>
        ${scopes.map((s) => html`<label class="field"><span>${s}</span><input type="checkbox" name=${`scope_${s}`} checked=${s === 'read'} /></label>`)}
        <${Field} label="Expires (UTC day, optional)"><input name="expires" type="date" /></${Field}>
        <button type="submit" disabled=${act.busy}>Create token</button>
      </form></div>
    <${Notice} text=${done} />
    <${ErrorBox} error=${act.error} />
    <${ErrorBox} error=${list.error} />
    <${Table} rows=${list.rows} rowKey=${(t) => t.id} empty="No stored admin tokens." cols=${[
      { title: 'Name', key: 'name' }, { title: 'Prefix', render: (t) => html`<code>${t.prefix}…</code>` },
      { title: 'Scopes', render: (t) => fmt(t.scopes) }, { title: 'Created', render: (t) => when(t.created_at) },
      { title: 'By', key: 'created_by' }, { title: 'Expires', render: (t) => when(t.expires_at) },
      { title: 'Revoked', render: (t) => when(t.revoked_at) },
      { title: '', render: (t) => (t.revoked_at ? null : html`<button class="small danger" onClick=${() => revoke(t)}>Revoke</button>`) },
    ]} />
    <${More} list=${list.list} onMore=${list.more} />
    ${secret ? html`<${Secret} title=${`New admin token ${secret.name}`} value=${secret.token} what="admin token" onClose=${() => setSecret(null)} />` : null}
    ${confirm}
  </section>`;
}
