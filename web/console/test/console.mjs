// The console's browser test: headless Chromium (playwright-core, the
// system's /usr/bin/chromium) against a running gateway. Run by the Go
// test gateway/e2e/console, which starts the gateway on Postgres and Redis
// and passes:
//
//   CONSOLE_URL   the admin listener, e.g. http://127.0.0.1:9091
//   GATEWAY_URL   the proxy listener (the script sends traffic there)
//   ADMIN_TOKEN   the gateway's $TOLLGATE_ADMIN_TOKEN
//   SCREENSHOTS   a directory for one PNG per page (console-PAGE.png)
//   SCENARIO      "full" (default: a gateway on Postgres) or "read-only"
//                 (a gateway on the memory store)
//   CHROMIUM      the browser (default /usr/bin/chromium)
//
// Each step prints "step NAME ok (N ms)" or
// "step NAME FAILED: why"; the script exits 1 on the first failure.
// Secrets: the admin token and the new key and admin token are never
// printed; the checks search the DOM for them.
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const env = (k, d) => {
  const v = process.env[k] ?? d;
  if (v === undefined) { console.error(`${k} is not set`); process.exit(2); }
  return v;
};
const base = env('CONSOLE_URL').replace(/\/$/, '');
const gateway = env('GATEWAY_URL').replace(/\/$/, '');
const adminToken = env('ADMIN_TOKEN');
const shots = env('SCREENSHOTS');
const scenario = env('SCENARIO', 'full');
const tenantID = `acme-${process.pid}`;
const planID = 'starter';
const T = 20_000; // generous: a loaded 2-core machine

mkdirSync(shots, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), 'tollgate-console-chromium-'));
// A fresh profile (user-data-dir) each run.
const context = await chromium.launchPersistentContext(profile, {
  executablePath: env('CHROMIUM', '/usr/bin/chromium'),
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  timeout: 60_000,
  viewport: { width: 1280, height: 860 },
  deviceScaleFactor: 1,
});
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(T);

const cspViolations = [];
const pageErrors = [];
page.on('console', (m) => {
  const text = m.text();
  if (/Content.Security.Policy|Refused to/i.test(text)) cspViolations.push(text);
});
page.on('pageerror', (e) => pageErrors.push(String(e)));

const secrets = [adminToken]; // every value the DOM must never hold
const state = {};
let failed = false;

// step runs fn as the step name if the scenario has it (scenarios: the
// ones that do; default the full one).
async function step(name, fn, scenarios = ['full']) {
  if (failed || !scenarios.includes(scenario)) return;
  const t0 = Date.now();
  try {
    await fn();
    console.log(`step ${name} ok (${Date.now() - t0} ms)`);
  } catch (e) {
    failed = true;
    let msg = String(e && e.message ? e.message : e);
    for (const s of secrets) if (s) msg = msg.split(s).join('<redacted>');
    console.log(`step ${name} FAILED: ${msg.split('\n').slice(0, 6).join(' | ')}`);
    try { await page.screenshot({ path: join(shots, `console-failed-${scenario}-${name}.png`), fullPage: true }); } catch { /* closed */ }
  }
}

function check(cond, what) { if (!cond) throw new Error(what); }

async function shot(name) {
  const prefix = scenario === 'full' ? 'console-' : `console-${scenario}-`;
  await page.screenshot({ path: join(shots, `${prefix}${name}.png`), fullPage: true });
}

// noSecretInDOM: neither the markup nor any input's value holds a secret.
async function noSecretInDOM(where) {
  const dom = await page.evaluate(() => document.documentElement.outerHTML
    + [...document.querySelectorAll('input,textarea')].map((i) => i.value).join('\n'));
  for (const s of secrets) check(!s || !dom.includes(s), `${where}: a secret is in the DOM`);
}

async function go(route, heading) {
  await page.goto(`${base}/#/${route}`);
  await page.getByRole('heading', { name: heading, exact: true }).waitFor();
}

async function waitFor(what, fn, ms = T) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function chat(key, body, headers = {}) {
  return fetch(`${gateway}/v1/chat/completions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'mock-1', messages: [{ role: 'user', content: 'hello' }], ...body }),
  });
}

const both = ['full', 'read-only'];

await step('load', async () => {
  const resp = await page.goto(`${base}/`);
  check(resp.status() === 200, `GET / answered ${resp.status()}`);
  const h = resp.headers();
  check(h['content-security-policy'] && h['content-security-policy'].includes("script-src 'self'"), `CSP header: ${h['content-security-policy']}`);
  check(h['x-frame-options'] === 'DENY' && h['x-content-type-options'] === 'nosniff' && h['referrer-policy'] === 'no-referrer',
    `security headers: ${JSON.stringify(h)}`);
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  if (scenario === 'full') await shot('signin');
}, both);

await step('bad-token', async () => {
  await page.getByLabel('Admin token').fill('not-the-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  const err = page.getByRole('alert');
  await err.waitFor();
  const text = (await err.textContent()).trim();
  check(text.length > 0 && !/^HTTP \d+$/.test(text), `error shown: "${text}" (want the API's message)`);
  check(await page.getByLabel('Admin token').inputValue() === '', 'the token field still holds the refused token');
});

await step('sign-in', async () => {
  await page.getByLabel('Admin token').fill(adminToken);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation').waitFor();
  await page.getByRole('heading', { name: 'Overview', exact: true }).waitFor();
  await noSecretInDOM('after sign-in');
  const cookies = await context.cookies();
  const c = cookies.find((x) => x.name === 'tollgate_admin');
  check(c && c.httpOnly && c.sameSite === 'Strict', `session cookie: ${c ? JSON.stringify({ ...c, value: '…' }) : 'none'}`);
  check(!(await page.evaluate(() => document.cookie)).includes('tollgate_admin'), 'the session cookie is readable by scripts');
  await shot('overview');
}, both);

// The memory store: the console says it is read-only, and a write shows
// the API's refusal.
await step('read-only', async () => {
  await page.getByRole('status').filter({ hasText: 'read-only (memory store)' }).waitFor();
  await go('plans', 'Plans');
  await page.locator('form').first().getByLabel('ID').fill('nope');
  await page.getByRole('button', { name: 'Create plan' }).click();
  const err = page.getByRole('alert');
  await err.waitFor();
  const text = (await err.textContent()).trim();
  check(/read_only_store/.test(text) && !/^HTTP \d+/.test(text), `error shown: "${text}" (want the API's read_only_store)`);
  await shot('read-only');
}, ['read-only']);

await step('create-plan', async () => {
  await go('plans', 'Plans');
  const form = page.locator('form').first();
  await form.getByLabel('ID').fill(planID);
  await form.getByLabel('Monthly budget (USD, 0: none)').fill('100');
  await form.getByRole('button', { name: 'Create plan' }).click();
  await page.getByRole('status').filter({ hasText: `Plan ${planID} created.` }).waitFor();
  await page.getByRole('cell', { name: planID, exact: true }).waitFor();
  await shot('plans');
});

await step('set-price', async () => {
  await go('prices', 'Prices');
  await page.getByLabel('Model').first().fill('mock-1');
  await page.getByLabel('Input', { exact: true }).fill('1000');
  await page.getByLabel('Output', { exact: true }).fill('2000');
  await page.getByRole('button', { name: 'Set price' }).click();
  await page.getByRole('status').filter({ hasText: 'Price of mock-1 set.' }).waitFor();
  await page.getByRole('cell', { name: 'mock-1', exact: true }).waitFor();
  await shot('prices');
});

await step('create-tenant', async () => {
  await go('tenants', 'Tenants');
  await page.getByLabel('ID', { exact: true }).fill(tenantID);
  await page.locator('select[name=plan_id]').selectOption(planID);
  await page.getByRole('button', { name: 'Create tenant' }).click();
  await page.getByRole('status').filter({ hasText: `Tenant ${tenantID} created.` }).waitFor();
  await page.getByRole('link', { name: tenantID }).waitFor();
  await shot('tenants');
});

await step('create-key', async () => {
  await page.goto(`${base}/#/tenants/${tenantID}`);
  await page.getByRole('heading', { name: `Tenant ${tenantID}` }).waitFor();
  await page.getByRole('button', { name: 'Create key' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  const key = await dialog.getByLabel('API key').inputValue();
  check(key.length > 20, 'the dialog shows no key');
  state.key = key;
  secrets.push(key);
  await dialog.getByRole('button', { name: 'Done' }).click();
  await dialog.waitFor({ state: 'detached' });
  await noSecretInDOM('after the key dialog closed');
  await page.getByRole('cell', { name: /^tg/ }).first().waitFor();
});

await step('traffic', async () => {
  for (let i = 0; i < 5; i++) {
    const r = await chat(state.key, { max_tokens: 50 });
    const body = await r.text();
    check(r.status === 200, `chat ${i}: ${r.status} ${body.slice(0, 200)}`);
  }
});

await step('spend', async () => {
  await page.goto(`${base}/#/tenants/${tenantID}`);
  await page.reload();
  await waitFor('the tenant\'s spend to show', async () => {
    const t = (await page.getByTestId('tenant-spend').textContent().catch(() => '')) || '';
    return /^\$\d/.test(t) && Number(t.slice(1)) > 0;
  }, 30_000);
  await page.locator('.chart canvas').first().waitFor();
  await shot('tenant');
  await go('overview', 'Overview');
  await waitFor('the overview\'s spend', async () => {
    const t = (await page.getByTestId('spend').textContent().catch(() => '')) || '';
    return Number(t.replace('$', '')) > 0;
  }, 30_000);
  await shot('overview');
});

await step('cancel-stream', async () => {
  await go('requests', 'Live requests');
  const r = await chat(state.key, { stream: true, max_tokens: 4000 },
    { 'X-Mock-Tokens': '3000', 'X-Mock-Inter-Token': '20ms', 'X-Request-Id': `console-long-${process.pid}` });
  check(r.status === 200, `stream: ${r.status}`);
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  const read = (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      text += dec.decode(value, { stream: true });
    }
  })();
  const row = page.getByRole('row').filter({ hasText: `console-long-${process.pid}` });
  await row.waitFor();
  await shot('requests');
  const t0 = Date.now();
  await row.getByRole('button', { name: 'Cancel' }).click();
  await page.getByRole('status').filter({ hasText: 'cancelled' }).waitFor();
  const ended = await Promise.race([read.then(() => 'ended'), new Promise((res) => setTimeout(() => res('still open'), T))]);
  if (ended !== 'ended') await reader.cancel().catch(() => {});
  check(ended === 'ended', `the stream did not end within ${T} ms of the cancel`);
  check(!text.includes('[DONE]'), 'the stream ran to [DONE]: the cancel did not stop it');
  check(text.includes('request_cancelled'), 'the stream ended without the request_cancelled event');
  console.log(`  stream ended ${Date.now() - t0} ms after the click; ${text.length} bytes relayed`);
});

await step('keys-page', async () => {
  await go('keys', 'Keys');
  await page.getByRole('link', { name: tenantID }).first().waitFor();
  await noSecretInDOM('keys page');
  await shot('keys');
});

await step('policy', async () => {
  await go('policy', 'Policy & plugins');
  await page.getByText('Generation').waitFor();
  await shot('policy');
});

await step('admin-token', async () => {
  await go('tokens', 'Admin tokens');
  await page.getByLabel('Name').fill('ci-reader');
  await page.getByRole('button', { name: 'Create token' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  const tok = await dialog.getByLabel('admin token').inputValue();
  check(tok.length > 20, 'the dialog shows no token');
  secrets.push(tok);
  await dialog.getByRole('button', { name: 'Done' }).click();
  await dialog.waitFor({ state: 'detached' });
  await page.getByRole('cell', { name: 'ci-reader', exact: true }).waitFor();
  await noSecretInDOM('after the token dialog closed');
  await shot('tokens');
});

await step('audit', async () => {
  await go('audit', 'Audit log');
  await page.getByRole('cell', { name: tenantID, exact: true }).first().waitFor();
  await noSecretInDOM('audit log');
  await shot('audit');
});

// A session that ends (here: its cookie gone) sends the console back to
// the sign-in page on the next API answer (401).
await step('session-ended', async () => {
  await context.clearCookies();
  await page.goto(`${base}/#/tenants`);
  await page.reload();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  await noSecretInDOM('signed out');
});

// The detector itself: an inline script must be refused and reported, or
// the check below could not fail.
await step('csp-detector', async () => {
  const before = cspViolations.length;
  const ran = await page.evaluate(() => {
    const s = document.createElement('script');
    s.textContent = 'window.__inlineRan = true';
    document.head.appendChild(s);
    s.remove();
    return window.__inlineRan === true;
  });
  check(!ran, 'an inline script ran: the CSP does not hold');
  await waitFor('the refused inline script to be reported', async () => cspViolations.length > before, 5000);
  cspViolations.splice(before);
}, both);

await step('secrets-and-csp', async () => {
  await noSecretInDOM('at the end');
  check(cspViolations.length === 0, `CSP violations: ${cspViolations.join(' | ')}`);
  check(pageErrors.length === 0, `page errors: ${pageErrors.join(' | ')}`);
}, both);

await context.close();
rmSync(profile, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
