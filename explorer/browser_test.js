// The Data Explorer in a real browser (make explorer-test).
//
//   NODE_PATH=build/npm/node_modules node explorer/browser_test.js DB OUTDIR
//
// Starts `bin/regolith explore DB` on 127.0.0.1, drives Debian's Chromium
// (headless, a fresh profile, no network beyond the page) with
// playwright-core, and checks what the page shows against what the
// command reads from the same database: the resource tree and its counts,
// the items grid (id, partition key, chosen columns) with a filter and
// pages, an item edited and saved with its etag, an edit refused with 412
// beside the item, a query tab's rows as a grid and as JSON with its
// stats, a bad query's error in place of the rows, query tabs and the
// state kept per tab and container, a new container's settings (TTL,
// throughput, indexing policy) saved, an upload of JSON lines with its
// progress and rejected lines, the procedures, the change feed, a
// processor's lag, a deep link, the keyboard and the labels.  Also: the API answers a malformed request with a 4xx
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
  // (the refused edit's 412 and the bad query's and policy's 400 are
  // expected: the browser logs them as errors)
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of (412|400)/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
  const status = () => page.textContent('#status');
  const activePane = '#panes > section.pane:not([hidden])';
  // the ids in a grid (its first column), in order
  const gridIds = (sel) => page.$$eval(`${sel} .tabulator-row`, (rs) =>
    rs.map((r) => r.querySelector('.tabulator-cell').textContent));
  const gridTitles = (sel) => page.$$eval(`${sel} .tabulator-col-title`, (cs) => cs.map((c) => c.textContent));
  const treeLeaf = (container, view) =>
    page.click(`[data-key="v:${container}:${view}"]`);
  const openContainer = async (name) => {
    if (await page.$(`[data-key="v:${name}:items"]`) === null) await page.click(`[data-key="c:${name}"] .tree-row`);
    await page.waitForSelector(`[data-key="v:${name}:items"]`);
  };
  try {
    // -- the resource tree
    await page.goto(BASE + '/');
    await page.waitForSelector('#tree .tree-container');
    const names = await page.$$eval('#tree .tree-name', (s) => s.map((e) => e.textContent));
    check(JSON.stringify(names) === JSON.stringify(['feed', 'posts', 'users']),
      'the resource tree lists the containers', names);
    const counts = JSON.parse(`[${cli('containers', dbDir, '--json').trim().split('\n').join(',')}]`);
    const shown = await page.$$eval('#tree .count', (s) => s.map((e) => Number(e.textContent)));
    check(JSON.stringify(shown) === JSON.stringify(counts.map((c) => c.items)),
      'with the item counts the command gives', shown);
    const icon = await fetch(BASE + '/favicon.svg');
    check(icon.status === 200 && /svg/.test(icon.headers.get('content-type')) &&
      await page.$('link[rel=icon][href="favicon.svg"]') !== null, 'the page has a favicon', icon.status);
    await shot(page, '01-tree.png');

    // -- the items grid: id and partition key columns, pages of 50
    await openContainer('posts');
    await treeLeaf('posts', 'items');
    await page.waitForFunction(() => document.querySelectorAll('.items-grid .tabulator-row').length > 0);
    const cols = await gridTitles(`${activePane} .items-grid`);
    check(JSON.stringify(cols) === JSON.stringify(['id', '/postId']), 'the items grid shows id and the partition key', cols);
    const firstPage = await page.$$eval(`${activePane} .items-grid .tabulator-row`, (r) => r.length);
    check(firstPage === 50, 'a page of 50 items', firstPage);
    await shot(page, '02-items-grid.png');

    // -- a filter, chosen columns, the next page
    const where = "WHERE c.type = 'post' ORDER BY c.creationDate DESC";
    await page.fill(`${activePane} .f-filter`, where);
    await page.fill(`${activePane} .f-columns`, 'title, userId');
    await page.click(`${activePane} .f-apply`);
    await page.waitForFunction(() => /^\/userId$/.test([...document.querySelectorAll('#panes > section.pane:not([hidden]) .items-grid .tabulator-col-title')].pop()?.textContent || ''));
    const filtered = await gridIds(`${activePane} .items-grid`);
    const want = cli('query', dbDir, 'posts', `SELECT VALUE c.id FROM c ${where}`, '-n', '50').trim().split('\n').map((l) => JSON.parse(l));
    check(filtered.join() === want.join(), 'the filter shows the items the command finds, in order', filtered.slice(0, 3));
    check(JSON.stringify(await gridTitles(`${activePane} .items-grid`)) === JSON.stringify(['id', '/postId', '/title', '/userId']),
      'with the chosen columns', await gridTitles(`${activePane} .items-grid`));
    await page.click(`${activePane} .f-more`);
    await page.waitForFunction(() => document.querySelectorAll('#panes > section.pane:not([hidden]) .items-grid .tabulator-row').length > 50);
    const two = await page.$$eval(`${activePane} .items-grid .tabulator-row`, (r) => r.length);
    check(two === 100, 'Load more adds the next page', two);
    check(/100 items loaded, more to come/.test(await page.textContent(`${activePane} .pager-text`)), 'the pager says so',
      await page.textContent(`${activePane} .pager-text`));
    await page.evaluate(() => document.querySelector('#panes > section.pane:not([hidden]) .items-grid .tabulator-tableholder').scrollTop = 0);
    await shot(page, '03-items-filter.png');

    // -- an item opened from the grid, edited, saved
    await page.click(`${activePane} .items-grid .tabulator-row:first-child`);
    await page.waitForFunction(() => /^Item /.test(document.querySelector('#panes > section.pane:not([hidden]) .item-title').textContent));
    const opened = JSON.parse(await editorValue(page, `${activePane} .item-editor`));
    check(opened.id === want[0], 'a row opens as the item', opened.id);
    opened.title = 'Edited in the Data Explorer';
    await setEditor(page, `${activePane} .item-editor`, JSON.stringify(opened, null, 2));
    await page.click(`${activePane} .i-save`);
    await page.waitForFunction(() => /^saved /.test(document.getElementById('status').textContent));
    check(/^saved .* · \d+(\.\d+)? RU$/.test(await status()), 'saving shows the charge', await status());
    const stored = JSON.parse(cli('get', dbDir, 'posts', opened.id, '-k', opened.postId));
    check(stored.title === 'Edited in the Data Explorer', 'the edit is stored', stored.title);
    const etag = await page.textContent(`${activePane} .item-etag`);
    check(etag === `_etag ${stored._etag}` && stored._etag !== opened._etag, 'the page shows the new etag', etag);
    const rowTitle = await page.$eval(`${activePane} .items-grid .tabulator-row:first-child`, (r) => r.textContent);
    check(rowTitle.includes('Edited in the Data Explorer'), 'and the grid its new title', rowTitle);
    await shot(page, '04-item-saved.png');

    // -- the item changes behind the page's back: refused (412), shown in place
    const behind = { ...stored, title: 'Changed by the command' };
    delete behind._etag; delete behind._ts; delete behind._lsn;
    execFileSync(regolith, ['-q', 'put', dbDir, 'posts'], { input: JSON.stringify(behind) });
    const mine = JSON.parse(await editorValue(page, `${activePane} .item-editor`));
    mine.title = 'A late edit';
    await setEditor(page, `${activePane} .item-editor`, JSON.stringify(mine, null, 2));
    await page.click(`${activePane} .i-save`);
    await page.waitForSelector(`${activePane} .item-error:not([hidden])`);
    const refused = await page.textContent(`${activePane} .item-error`);
    check(/^Error 412 /.test(refused), 'a stale edit is refused with 412, beside the item', refused);
    const after = JSON.parse(cli('get', dbDir, 'posts', opened.id, '-k', opened.postId));
    check(after.title === 'Changed by the command', 'and nothing is overwritten', after.title);
    await shot(page, '05-conflict.png');

    // -- a query tab: the rows as a grid and as JSON, and the stats
    await treeLeaf('posts', 'query');
    await page.waitForSelector(`${activePane} .q-editor .CodeMirror`);
    const sql = "SELECT TOP 3 * FROM c WHERE c.type = 'post' ORDER BY c.creationDate DESC";
    await setEditor(page, `${activePane} .q-editor`, sql);
    await page.click(`${activePane} .q-run`);
    await page.waitForFunction(() => document.querySelectorAll('#panes > section.pane:not([hidden]) .q-grid .tabulator-row').length > 0);
    const qrows = await gridIds(`${activePane} .q-grid`);
    const expected = cli('query', dbDir, 'posts', sql).trim().split('\n').map((l) => JSON.parse(l));
    check(qrows.join() === expected.map((r) => r.id).join(), 'the query shows the rows the command gives, as a grid', qrows);
    const qcols = await gridTitles(`${activePane} .q-grid`);
    check(qcols[0] === 'id' && qcols.includes('title') && qcols[qcols.length - 1] === '_lsn',
      'its columns: id first, system properties last', qcols);
    await shot(page, '06-query-grid.png');
    await page.check(`${activePane} .q-view[value=json]`);
    await page.waitForSelector(`${activePane} .q-json .json-formatter-row`);
    const jsonText = await page.textContent(`${activePane} .q-json`);
    check(jsonText.includes(expected[0].id) && jsonText.includes('Array[3]'), 'and as pretty JSON', jsonText.slice(0, 60));
    await shot(page, '07-query-json.png');
    await page.click(`${activePane} .sub[data-sub=stats]`);
    const stats = await page.$$eval(`${activePane} .q-stats tr`, (trs) =>
      Object.fromEntries(trs.map((tr) => [tr.children[0].textContent, tr.children[1].textContent])));
    check(/^\d+(\.\d+)? RU$/.test(stats['Request charge']) && stats['Rows returned'] === '3' &&
      stats['Partitions contacted'] === '8 (cross-partition)' && /^\d+$/.test(stats['Items loaded']) &&
      /^\d+$/.test(stats['Index lookups']) && /ms$/.test(stats['Round trip (this page)']),
    'the query stats: charge, rows, partitions, loaded, index lookups, time', JSON.stringify(stats));
    await shot(page, '08-query-stats.png');

    // -- an error goes where the result goes, replacing it
    await page.click(`${activePane} .sub[data-sub=results]`);
    await setEditor(page, `${activePane} .q-editor`, 'SELECT * FORM c');
    await page.click(`${activePane} .q-run`);
    await page.waitForSelector(`${activePane} .sub-results .result-error:not([hidden])`);
    const qerr = await page.textContent(`${activePane} .sub-results .result-error`);
    check(/^Error 400 .*1:10/.test(qerr), 'a bad query shows its error in the results area', qerr);
    const stale = await page.$eval(`${activePane} .q-json`, (e) => e.hidden && e.closest('section').querySelector('.q-grid').hidden);
    check(stale, 'and no rows of the query before', stale);
    check(await page.textContent(`${activePane} .q-stats`) === '', 'nor its stats', await page.textContent(`${activePane} .q-stats`));
    await shot(page, '09-query-error.png');

    // -- query tabs, and state kept per tab and per container
    await treeLeaf('posts', 'query');
    await page.waitForFunction(() => document.querySelectorAll('#tabstrip .tab').length === 3);
    const tabs = await page.$$eval('#tabstrip .tab', (ts) => ts.map((t) => t.textContent));
    check(JSON.stringify(tabs) === JSON.stringify(['posts · Items', 'posts · Query 1', 'posts · Query 2']), 'each new query opens a tab', tabs);
    check(await editorValue(page, `${activePane} .q-editor`) === 'SELECT * FROM c', 'a new query starts afresh',
      await editorValue(page, `${activePane} .q-editor`));
    await openContainer('users');
    await treeLeaf('users', 'items');
    await page.waitForFunction(() => document.querySelector('#tabstrip .tab[aria-selected=true]').textContent === 'users · Items');
    check(await page.inputValue(`${activePane} .f-filter`) === '', "another container's items do not take the posts' filter");
    await page.click('#tabstrip .tab >> text=posts · Query 1');
    check(await editorValue(page, `${activePane} .q-editor`) === 'SELECT * FORM c', 'a tab keeps its query');
    await page.click('#tabstrip .tab >> text=posts · Items');
    check(await page.inputValue(`${activePane} .f-filter`) === where, 'and the items tab its filter');
    check(/#\/posts\/items$/.test(page.url()), 'the address names the tab', page.url());
    await shot(page, '10-tabs.png');

    // -- a new container, its settings' editors
    await page.click('#nc-open');
    await page.fill('#nc-name', 'scratch');
    await page.fill('#nc-pk', '/k');
    await page.fill('#nc-spec', '{"unique_keys": [["/email"]]}');
    await page.click('#nc-create');
    await page.waitForFunction(() => document.querySelector('#tabstrip .tab[aria-selected=true]')?.textContent === 'scratch · Items');
    await treeLeaf('scratch', 'settings');
    await page.waitForSelector(`${activePane} .s-indexing .CodeMirror`);
    await page.check(`${activePane} .s-ttl[value=seconds]`);
    await page.fill(`${activePane} .s-ttl-seconds`, '3600');
    await page.check(`${activePane} .s-tp[value=manual]`);
    await page.fill(`${activePane} .s-tp-manual`, '400');
    await setEditor(page, `${activePane} .s-indexing`, '{"included": ["/*"], "excluded": ["/big/?"]}');
    await page.click(`${activePane} .s-save`);
    await page.waitForFunction(() => /^saved the settings/.test(document.getElementById('status').textContent));
    const scratch = JSON.parse(cli('containers', dbDir, '--json').trim().split('\n').find((l) => l.includes('"scratch"'))).spec;
    check(scratch.default_ttl === 3600 && scratch.throughput === 400 &&
      JSON.stringify(scratch.indexing.excluded) === '["/big/?"]' && JSON.stringify(scratch.unique_keys) === '[["/email"]]',
    'the settings save TTL, throughput and the indexing policy', JSON.stringify(scratch));
    check(/\(\/email\)/.test(await page.textContent(`${activePane} .s-unique`)), 'and show the unique keys');
    await shot(page, '11-settings.png');
    await setEditor(page, `${activePane} .s-indexing`, '{"included": "everything"}');
    await page.click(`${activePane} .s-save`);
    await page.waitForSelector(`${activePane} .result-error:not([hidden])`);
    check(/^Error 400/.test(await page.textContent(`${activePane} .result-error`)), 'a bad policy is refused in place',
      await page.textContent(`${activePane} .result-error`));
    await page.click(`${activePane} .s-discard`);

    // -- upload of JSON lines, with progress
    const lines = [];
    for (let i = 1; i <= 250; i++) lines.push(JSON.stringify({ id: `u${i}`, k: `k${i % 7}`, email: `e${i}@x` }));
    lines[99] = '{"id": "broken"';
    lines[199] = JSON.stringify({ id: 'dup', k: 'k1', email: 'e1@x' });
    const file = path.join(outDir, 'upload.jsonl');
    fs.writeFileSync(file, lines.join('\n') + '\n');
    await page.click('#tabstrip .tab >> text=scratch · Items');
    await page.setInputFiles(`${activePane} .f-file`, file);
    await page.waitForFunction(() => /^Uploaded /.test(document.querySelector('#panes > section.pane:not([hidden]) .up-title').textContent));
    const up = await page.textContent(`${activePane} .up-text`);
    const progress = await page.$eval(`${activePane} .up-progress`, (p) => [p.value, p.max]);
    check(/^248 written · 2 rejected · [\d.]+ RU · throttled \d+ times \(429\), retried$/.test(up) &&
      progress[0] === progress[1] && progress[1] === 249,
    'an upload writes the good lines, waits out the budget (429) and shows its progress', `${up} ${progress}`);
    const upErrors = await page.$$eval(`${activePane} .up-errors li`, (ls) => ls.map((l) => l.textContent));
    check(upErrors.length === 2 && /^line 100: not JSON/.test(upErrors[0]) && /^line 200: .*409/.test(upErrors[1]),
      'and names each rejected line', upErrors);
    const stored248 = cli('query', dbDir, 'scratch', 'SELECT VALUE COUNT(1) FROM c').trim();
    check(stored248 === '248', 'the command finds them', stored248);
    await shot(page, '12-upload.png');

    // -- scripts, the change feed, a processor
    await treeLeaf('posts', 'scripts');
    await page.waitForFunction(() => document.querySelectorAll('#panes > section.pane:not([hidden]) .p-procedures li button').length > 0);
    const procs = await page.$$eval(`${activePane} .p-procedures li`, (ls) => ls.map((l) => l.textContent));
    check(procs.join() === 'createComment,createLike,updateUsernames', 'the procedures are listed', procs);
    await page.click(`${activePane} .p-procedures li:first-child button`);
    await page.waitForFunction(() => /^procedure /.test(document.getElementById('status').textContent));
    await shot(page, '13-scripts.png');
    await treeLeaf('posts', 'feed');
    await page.click(`${activePane} .c-read`);
    await page.waitForSelector(`${activePane} .c-rows .json-formatter-row`);
    const feedInfo = await page.textContent(`${activePane} .c-info`);
    check(/^100 changes · /.test(feedInfo), 'the change feed shows a page of changes as JSON', feedInfo);
    await page.fill(`${activePane} .c-proc`, 'copies');
    await page.click(`${activePane} .c-show`);
    await page.waitForSelector(`${activePane} .c-proc-out table`);
    const proc = await page.textContent(`${activePane} .c-proc-out p`);
    const lag = JSON.parse(cli('processors', dbDir, 'posts', 'copies', '--json')).lag;
    check(proc.startsWith(`copies (latest) · lag ${lag} · 0 dead letter(s)`), 'a processor shows its lag', proc);
    const ranges = await page.$$eval(`${activePane} .c-proc-out table tr`, (trs) => trs.length - 1);
    check(ranges === 8, 'and its eight leases', ranges);
    await shot(page, '14-feed.png');

    // -- a deep link opens its view; the keyboard reaches everything
    const other = await context.newPage();
    other.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    await other.goto(BASE + '/#/users/settings');
    await other.waitForSelector(`${activePane} .s-indexing .CodeMirror`);
    const deep = await other.textContent('#tabstrip .tab[aria-selected=true]');
    check(deep === 'users · Settings', 'a deep link opens its view', deep);
    await other.screenshot({ path: path.join(outDir, '15-deep-link.png'), fullPage: true });
    await other.focus('#tree [tabindex="0"]');
    const startKey = await other.evaluate(() => document.activeElement.dataset.key);
    await other.keyboard.press('ArrowUp');
    await other.keyboard.press('ArrowUp');
    const focusedKey = await other.evaluate(() => document.activeElement.dataset.key);
    await other.keyboard.press('Enter');
    await other.waitForFunction(() => document.querySelector('#tabstrip .tab[aria-selected=true]')?.textContent === 'users · Items');
    check(startKey === 'v:users:settings' && focusedKey === 'v:users:items',
      'the tree starts at the open view, moves with the arrow keys and opens with Enter', `${startKey} ${focusedKey}`);
    await other.keyboard.press('ArrowLeft');
    const parentKey = await other.evaluate(() => document.activeElement.dataset.key);
    check(parentKey === 'c:users', 'Left goes up to the container', parentKey);
    const unlabelled = await other.$$eval('input, select, textarea', (es) => es.filter((e) =>
      e.type !== 'hidden' && e.type !== 'file' && !e.closest('[hidden]') && !e.closest('template') &&
      !e.closest('label') && !e.getAttribute('aria-label') && !e.closest('.CodeMirror')).map((e) => e.outerHTML));
    check(unlabelled.length === 0, 'every visible field has a label', unlabelled);
    await other.close();

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
