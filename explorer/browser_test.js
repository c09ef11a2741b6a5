// The Data Explorer in a real browser (make explorer-test).
//
//   NODE_PATH=build/npm/node_modules node explorer/browser_test.js DB OUTDIR
//
// Starts `bin/regolith explore DB` on 127.0.0.1, drives Debian's Chromium
// (headless, a fresh profile, no network beyond the page) with
// playwright-core, and checks what the page shows against what the
// command reads from the same database: the containers, a query with its
// charge, an item opened from the results, an edit saved with its etag
// (read back by the command), an edit refused with 412 once the item
// changed behind the page's back, the procedures, the change feed and a
// processor's lag.  Also: the API answers a malformed request with a 4xx
// JSON error, refuses requests without its header, and nothing listens
// beyond 127.0.0.1.  Screenshots go to OUTDIR; the run fails on any
// check, on a page error and on a console error.
'use strict';

const { chromium } = require('playwright-core');
const { spawn, execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const [dbDir, outDir] = process.argv.slice(2);
if (!dbDir || !outDir) {
  console.error('usage: node explorer/browser_test.js DB OUTDIR');
  process.exit(2);
}
const PORT = Number(process.env.EXPLORER_PORT || 8079);
const BASE = `http://127.0.0.1:${PORT}`;
const regolith = path.resolve(__dirname, '..', 'bin', 'regolith');

let passed = 0;
let failed = 0;
function check(ok, what, detail) {
  if (ok) { passed++; console.log(`ok   ${what}`); } else {
    failed++;
    console.log(`FAIL ${what}${detail !== undefined ? `: ${detail}` : ''}`);
  }
}

// The command, for what the page is checked against.
function cli(...args) {
  return execFileSync(regolith, ['-q', ...args], { encoding: 'utf8' });
}

function startExplorer() {
  return new Promise((resolve, reject) => {
    const child = spawn(regolith, ['explore', dbDir, '--port', String(PORT)],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('Data Explorer on')) resolve(child);
    });
    child.stderr.on('data', (d) => { err += d; });
    child.on('exit', (code) => reject(new Error(`explore exited with ${code}: ${err}`)));
    setTimeout(() => reject(new Error(`explore did not start: ${out} ${err}`)), 20000);
  });
}

function stopExplorer(child) {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.on('exit', (code, signal) => resolve({ code, signal }));
    child.kill('SIGINT');
  });
}

// The addresses listening on PORT, from /proc/net/tcp and tcp6.
function listeners() {
  const found = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try { text = fs.readFileSync(file, 'utf8'); } catch (e) { continue; }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 4 || f[3] !== '0A') continue;           // LISTEN
      const [addr, port] = f[1].split(':');
      if (parseInt(port, 16) === PORT) found.push(addr);
    }
  }
  return found;
}

async function api(method, p, body, headers = { 'X-Regolith-Explorer': '1' }) {
  const res = await fetch(BASE + p, { method, headers, body });
  return { status: res.status, json: await res.json() };
}

// The text of a CodeMirror editor, and a new text for it (as a paste).
const editorValue = (page, sel) =>
  page.$eval(`${sel} .CodeMirror`, (e) => e.CodeMirror.getValue());
const setEditor = (page, sel, text) =>
  page.$eval(`${sel} .CodeMirror`, (e, t) => e.CodeMirror.setValue(t), text);

async function main() {
  const t0 = Date.now();
  fs.mkdirSync(outDir, { recursive: true });
  const shot = (page, name) => page.screenshot({ path: path.join(outDir, name), fullPage: true });
  const explorer = await startExplorer();
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'regolith-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 860 },
  });
  // Only the explorer may be reached: anything else fails the request.
  await context.route('**/*', (route) =>
    (route.request().url().startsWith(BASE) ? route.continue() : route.abort()));
  const page = context.pages()[0] || await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // (the refused edit's 412 is expected: the browser logs it as an error)
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 412/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
  try {
    // -- the containers
    await page.goto(BASE + '/');
    await page.waitForSelector('#containers li button');
    const names = await page.$$eval('#containers li button', (bs) =>
      bs.map((b) => b.firstChild.textContent));
    check(JSON.stringify(names) === JSON.stringify(['feed', 'posts', 'users']),
      'the page lists the containers', names);
    const counts = JSON.parse(`[${cli('containers', dbDir, '--json').trim().split('\n').join(',')}]`);
    const shown = await page.$$eval('#containers .count', (s) => s.map((e) => Number(e.textContent)));
    check(JSON.stringify(shown) === JSON.stringify(counts.map((c) => c.items)),
      'with the item counts the command gives', shown);
    await shot(page, '01-containers.png');

    // -- a query, its rows and its charge
    await page.click('#containers li:nth-child(2) button');
    await page.waitForSelector('#items li button');
    await page.click('#tabs button[data-tab="query"]');
    const sql = "SELECT TOP 3 * FROM c WHERE c.type = 'post' ORDER BY c.creationDate DESC";
    await setEditor(page, '#query-editor', sql);
    await page.click('#query-run');
    await page.waitForFunction(() => document.querySelectorAll('#query-rows li').length > 0);
    const rows = await page.$$eval('#query-rows li', (ls) => ls.map((l) => JSON.parse(l.textContent)));
    const expected = cli('query', dbDir, 'posts', sql).trim().split('\n').map((l) => JSON.parse(l));
    check(rows.length === 3 && rows.map((r) => r.id).join() === expected.map((r) => r.id).join(),
      'the query shows the rows the command gives', rows.map((r) => r.id));
    const info = await page.textContent('#query-info');
    check(/RU · 3 rows · partitions 8 \(cross-partition\) · loaded \d+ · index lookups \d+/.test(info),
      'with its charge and counters', info);
    await shot(page, '02-query.png');

    // -- open an item from the results, edit it, save it
    await page.click('#query-rows li:first-child button');
    await page.waitForFunction(() => /^Item /.test(document.getElementById('item-title').textContent));
    const opened = JSON.parse(await editorValue(page, '#item-editor'));
    check(opened.id === expected[0].id && opened.title === expected[0].title,
      'a result opens as the item', opened.id);
    await shot(page, '03-item.png');
    opened.title = 'Edited in the Data Explorer';
    await setEditor(page, '#item-editor', JSON.stringify(opened, null, 2));
    await page.click('#item-save');
    await page.waitForFunction(() => /^saved /.test(document.getElementById('status').textContent));
    const status = await page.textContent('#status');
    check(/^saved .* · \d+(\.\d+)? RU$/.test(status), 'saving shows the charge', status);
    const stored = JSON.parse(cli('get', dbDir, 'posts', opened.id, '-k', opened.postId));
    check(stored.title === 'Edited in the Data Explorer', 'the edit is stored', stored.title);
    const etag = await page.textContent('#item-etag');
    check(etag === `_etag ${stored._etag}` && stored._etag !== opened._etag,
      'the page shows the new etag', etag);
    await shot(page, '04-saved.png');

    // -- the item changes behind the page's back: saving is refused (412)
    const behind = { ...stored, title: 'Changed by the command' };
    delete behind._etag; delete behind._ts; delete behind._lsn;
    execFileSync(regolith, ['-q', 'put', dbDir, 'posts'], { input: JSON.stringify(behind) });
    const mine = JSON.parse(await editorValue(page, '#item-editor'));
    mine.title = 'A late edit';
    await setEditor(page, '#item-editor', JSON.stringify(mine, null, 2));
    await page.click('#item-save');
    await page.waitForFunction(() => document.getElementById('status').className === 'error');
    const refused = await page.textContent('#status');
    check(/\(412\)$/.test(refused), 'a stale edit is refused with 412', refused);
    const after = JSON.parse(cli('get', dbDir, 'posts', opened.id, '-k', opened.postId));
    check(after.title === 'Changed by the command', 'and nothing is overwritten', after.title);
    await shot(page, '05-conflict.png');

    // -- procedures, the change feed, a processor
    await page.click('#tabs button[data-tab="scripts"]');
    const procs = await page.$$eval('#procedures li', (ls) => ls.map((l) => l.textContent));
    check(procs.join() === 'createComment,createLike,updateUsernames',
      'the procedures are listed', procs);
    await shot(page, '06-procedures.png');
    await page.click('#tabs button[data-tab="feed"]');
    await page.click('#feed-read');
    await page.waitForFunction(() => document.querySelectorAll('#feed-rows li').length > 0);
    const changes = await page.$$eval('#feed-rows li', (ls) => ls.length);
    check(changes === 100, 'the change feed shows a page of changes', changes);
    await page.fill('#proc-name', 'copies');
    await page.click('#proc-show');
    await page.waitForSelector('#proc-out table');
    const proc = await page.textContent('#proc-out p');
    const lag = JSON.parse(cli('processors', dbDir, 'posts', 'copies', '--json')).lag;
    check(proc.startsWith(`copies (latest) · lag ${lag} · 0 dead letter(s)`),
      'a processor shows its lag', proc);
    const ranges = await page.$$eval('#proc-out table tr', (trs) => trs.length - 1);
    check(ranges === 8, 'and its eight leases', ranges);
    check(await page.textContent('#status') === 'processor copies', 'without an error',
      await page.textContent('#status'));
    await shot(page, '07-feed.png');

    // -- the API: malformed requests, the header, the address
    const bad = await api('POST', '/api/containers/posts/query', '{"sql": ');
    check(bad.status === 400 && /not JSON/.test(bad.json.error), 'malformed JSON gets 400', bad.json.error);
    const badSql = await api('POST', '/api/containers/posts/query', '{"sql": "SELECT * FORM c"}');
    check(badSql.status === 400 && /1:10/.test(badSql.json.error), 'bad SQL gets 400 with its position',
      badSql.json.error);
    const badType = await api('POST', '/api/containers/posts/query', '{"sql": "SELECT 1", "max_items": "3"}');
    check(badType.status === 400, 'a field of the wrong type gets 400', badType.json.error);
    const noCont = await api('GET', '/api/containers/nope/items');
    check(noCont.status === 404, 'an unknown container gets 404', noCont.json.error);
    const noHeader = await api('GET', '/api/containers', undefined, {});
    check(noHeader.status === 403, 'a request without the header gets 403', noHeader.json.error);
    const addrs = listeners();
    check(addrs.length > 0 && addrs.every((a) => a === '0100007F'),
      'nothing listens beyond 127.0.0.1', addrs);
    check(problems.length === 0, 'no page or console errors, no request left the page', problems);
  } catch (e) {
    check(false, 'the run', e.stack);
    await shot(page, 'failure.png').catch(() => {});
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
    const end = await stopExplorer(explorer);
    check(end.code === 0, 'Ctrl-C stops the explorer with exit code 0', JSON.stringify(end));
  }
  console.log(`${passed} passed, ${failed} failed`);
  console.log(`explorer browser test: ${((Date.now() - t0) / 1000).toFixed(1)} s; ` +
    `screenshots in ${outDir}`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
