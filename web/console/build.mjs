// Builds the console into gateway/internal/console/dist (committed, so that
// `go build` needs no npm): src/main.js and src/style.css bundled by
// esbuild, named by the SHA-256 of their content, and index.html naming
// them. The output depends only on the sources, the lockfile's packages
// and this script: no timestamps, no absolute paths.
//
//   node build.mjs          write dist/
//   node build.mjs --check  build in memory and fail if dist/ differs
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, rmSync, mkdirSync, writeFileSync, existsSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', '..', 'gateway', 'internal', 'console', 'dist');
const check = process.argv.includes('--check');

async function bundle(entry) {
  const r = await esbuild.build({
    absWorkingDir: here,
    entryPoints: [entry],
    bundle: true,
    write: false,
    minify: true,
    format: 'iife',
    target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
    legalComments: 'none',
    charset: 'utf8',
    sourcemap: false,
    logLevel: 'warning',
    define: { 'process.env.NODE_ENV': '"production"' },
  });
  if (r.outputFiles.length !== 1) throw new Error(`${entry}: want one output file, got ${r.outputFiles.length}`);
  return Buffer.from(r.outputFiles[0].contents);
}

function hashed(name, ext, body) {
  const h = createHash('sha256').update(body).digest('hex').slice(0, 16);
  return `${name}-${h}.${ext}`;
}

const js = await bundle('src/main.js');
const css = await bundle('src/style.css');
const jsName = hashed('app', 'js', js);
const cssName = hashed('app', 'css', css);
const index = readFileSync(join(here, 'src', 'index.html'), 'utf8')
  .replace('%CSS%', `/assets/${cssName}`)
  .replace('%JS%', `/assets/${jsName}`);

const want = new Map([
  ['index.html', Buffer.from(index)],
  [`assets/${jsName}`, js],
  [`assets/${cssName}`, css],
]);

function onDisk() {
  const have = new Map();
  const walk = (dir) => {
    if (!existsSync(dir)) return;
    for (const e of readdirSync(dir)) {
      const p = join(dir, e);
      if (statSync(p).isDirectory()) walk(p);
      else have.set(relative(out, p).split('\\').join('/'), readFileSync(p));
    }
  };
  walk(out);
  return have;
}

if (check) {
  const have = onDisk();
  const problems = [];
  for (const [p, b] of want) {
    if (!have.has(p)) problems.push(`missing ${p}`);
    else if (!have.get(p).equals(b)) problems.push(`differs ${p}`);
  }
  for (const p of have.keys()) if (!want.has(p)) problems.push(`extra ${p}`);
  if (problems.length) {
    console.error(`gateway/internal/console/dist does not match web/console's sources (${problems.join(', ')}): run make console`);
    process.exit(1);
  }
  console.log(`console dist matches its sources (${[...want.keys()].join(', ')})`);
} else {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(join(out, 'assets'), { recursive: true });
  for (const [p, b] of want) writeFileSync(join(out, p), b);
  console.log(`wrote ${[...want].map(([p, b]) => `${p} (${b.length} B)`).join(', ')}`);
}
