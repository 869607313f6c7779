import { h } from 'preact';
import { useState, useEffect, useRef, useCallback } from 'preact/hooks';
import htm from 'htm';

export const html = htm.bind(h);

// ErrorBox shows an API error with the API's own message.
export function ErrorBox({ error }) {
  if (!error) return null;
  return html`<div class="error" role="alert">
    <strong>${error.message}</strong>
    ${error.code ? html` <span class="code">${error.code}${error.param ? ` (${error.param})` : ''}</span>` : null}
  </div>`;
}

export function Notice({ text }) {
  if (!text) return null;
  return html`<div class="notice" role="status">${text}</div>`;
}

// useLoad runs load() now, again when deps change, and every `every` ms if
// given; it answers {data, error, reload, loading}.
export function useLoad(load, deps, every) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const gen = useRef(0);
  const run = useCallback(async () => {
    const g = ++gen.current;
    try {
      const data = await load();
      if (g === gen.current) setState({ data, error: null, loading: false });
    } catch (error) {
      if (g === gen.current) setState((s) => ({ data: s.data, error, loading: false }));
    }
  }, deps);
  useEffect(() => {
    run();
    if (!every) return () => { gen.current++; };
    const t = setInterval(run, every);
    return () => { clearInterval(t); gen.current++; };
  }, [run, every]);
  return { ...state, reload: run };
}

// useAction wraps an async action: busy while it runs, its error kept.
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const run = async (fn) => {
    setBusy(true);
    setError(null);
    try {
      return await fn();
    } catch (e) {
      setError(e);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run, setError };
}

export function Table({ cols, rows, empty, rowKey }) {
  if (!rows) return null;
  if (rows.length === 0) return html`<p class="empty">${empty || 'Nothing here yet.'}</p>`;
  return html`<table>
    <thead><tr>${cols.map((c) => html`<th class=${c.num ? 'num' : ''}>${c.title}</th>`)}</tr></thead>
    <tbody>${rows.map((r, i) => html`<tr key=${rowKey ? rowKey(r) : i}>
      ${cols.map((c) => html`<td class=${c.num ? 'num' : ''}>${c.render ? c.render(r) : fmt(r[c.key])}</td>`)}
    </tr>`)}</tbody>
  </table>`;
}

export function fmt(v) {
  if (v === null || v === undefined || v === '') return '—';
  if (Array.isArray(v)) return v.length ? v.join(', ') : '—';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

export function usd(v) {
  if (v === null || v === undefined || v === '') return '—';
  return `$${v}`;
}

export function when(t) {
  if (!t) return '—';
  return String(t).replace('T', ' ').replace(/\.\d+/, '').replace('Z', ' UTC');
}

export function num(v, digits) {
  if (v === null || v === undefined) return '—';
  return Number(v).toLocaleString('en-US', { maximumFractionDigits: digits ?? 2 });
}

export function Field({ label, children }) {
  return html`<label class="field"><span>${label}</span>${children}</label>`;
}

// Pager: a "More" button while the list has more.
export function More({ list, onMore }) {
  if (!list || !list.has_more) return null;
  return html`<button class="secondary" onClick=${() => onMore(list.next_cursor)}>More</button>`;
}

// Secret shows a key or token once, with a copy button. Closing it drops
// the value: nothing else holds it.
export function Secret({ title, value, what, onClose }) {
  const [copied, setCopied] = useState('');
  const ref = useRef(null);
  useEffect(() => { if (ref.current) ref.current.focus(); }, []);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('Copied.');
    } catch {
      setCopied('Copying is not allowed here: select the text and copy it.');
    }
  };
  return html`<div class="backdrop">
    <div class="dialog" role="dialog" aria-modal="true" aria-labelledby="secret-title">
      <h2 id="secret-title">${title}</h2>
      <p>This ${what} is shown this once. Only its hash is stored: copy it now.</p>
      <input class="secret" readonly value=${value} ref=${ref} onFocus=${(e) => e.target.select()} aria-label=${what} />
      <div class="actions">
        <button onClick=${copy}>Copy</button>
        <button class="secondary" onClick=${onClose}>Done</button>
      </div>
      <${Notice} text=${copied} />
    </div>
  </div>`;
}

export function Confirm({ text, onYes, onNo }) {
  return html`<div class="backdrop">
    <div class="dialog" role="alertdialog" aria-modal="true">
      <p>${text}</p>
      <div class="actions">
        <button class="danger" onClick=${onYes}>Yes</button>
        <button class="secondary" onClick=${onNo}>Cancel</button>
      </div>
    </div>
  </div>`;
}

// useConfirm: ask(text) answers a promise of the operator's choice.
export function useConfirm() {
  const [q, setQ] = useState(null);
  const ask = (text) => new Promise((resolve) => setQ({ text, resolve }));
  const dialog = q ? html`<${Confirm} text=${q.text}
      onYes=${() => { q.resolve(true); setQ(null); }}
      onNo=${() => { q.resolve(false); setQ(null); }} />` : null;
  return [ask, dialog];
}

// json parses a textarea's JSON, empty meaning undefined.
export function json(text, name) {
  if (!text || !text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    const err = new Error(`${name}: not valid JSON (${e.message})`);
    err.code = 'invalid_json';
    throw err;
  }
}

// intOrZero reads a number input ('' is 0).
export function int(v) {
  if (v === '' || v === undefined || v === null) return 0;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) {
    const err = new Error(`"${v}" is not a whole number`);
    err.code = 'invalid_number';
    throw err;
  }
  return n;
}
