// The Data Explorer's page: plain JavaScript over the JSON API that
// `regolith explore` serves (docs/explorer.md), with CodeMirror 5 for the
// editors.  Every API answer carries the request charge in `info`; the
// status line shows it, or the error the API gave.
'use strict';

const $ = (id) => document.getElementById(id);
const state = { container: null, spec: null, item: null, itemsToken: null,
                query: null, followTimer: null, feedToken: null };

// {---------------------------------------------------------------------
// The API and the status line
// ----------------------------------------------------------------------
async function api(method, path, body, headers = {}) {
  const init = { method, headers: { 'X-Regolith-Explorer': '1', ...headers } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const res = await fetch('/api' + path, init);
  let data;
  try { data = await res.json(); } catch (e) { data = { error: 'the answer is not JSON' }; }
  if (!res.ok) {
    const err = new Error(data.error || res.statusText);
    err.status = res.status;
    throw err;
  }
  return data;
}

function say(text, isError) {
  const s = $('status');
  s.textContent = text;
  s.className = isError ? 'error' : '';
}

function counters(info) {
  if (!info) return '';
  const parts = [`${info.charge} RU`];
  if (info.count !== undefined) parts.push(`${info.count} rows`);
  if (info.partitions !== undefined) {
    parts.push(`partitions ${info.partitions}${info.cross_partition ? ' (cross-partition)' : ''}`);
  }
  if (info.loaded !== undefined) parts.push(`loaded ${info.loaded}`);
  if (info.index_lookups !== undefined) parts.push(`index lookups ${info.index_lookups}`);
  return parts.join(' · ');
}

// Runs an action; its errors go to the status line.
function act(fn) {
  return async (...args) => {
    try { await fn(...args); } catch (e) {
      say(e.status ? `${e.message} (${e.status})` : e.message, true);
    }
  };
}

const enc = encodeURIComponent;
const cpath = () => `/containers/${enc(state.container)}`;

// A partition key as typed: JSON when it parses (42, true, ["a", 1]),
// else the text as a string; undefined when empty (as the command does).
function pkValue(text) {
  text = text.trim();
  if (text === '') return undefined;
  try { return JSON.parse(text); } catch (e) { return text; }
}

function pkOf(doc) {
  const paths = [].concat(state.spec.partition_key);
  const values = paths.map((p) => p.split('/').slice(1)
    .reduce((v, k) => (v == null ? undefined : v[k.replace(/~1/g, '/').replace(/~0/g, '~')]), doc));
  return paths.length === 1 ? values[0] : values;
}

function li(text, onClick) {
  const item = document.createElement('li');
  if (onClick) {
    const b = document.createElement('button');
    b.textContent = text;
    b.addEventListener('click', act(onClick));
    item.appendChild(b);
  } else {
    item.textContent = text;
  }
  return item;
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Editors
// ----------------------------------------------------------------------
const editors = {};
function makeEditors() {
  const opts = (mode, value) => ({ mode, value, lineNumbers: true, matchBrackets: true,
                                   tabSize: 2, indentUnit: 2 });
  editors.item = CodeMirror($('item-editor'), opts({ name: 'javascript', json: true }, ''));
  editors.query = CodeMirror($('query-editor'), opts('text/x-sql', 'SELECT * FROM c'));
  editors.script = CodeMirror($('script-editor'),
    opts('lua', 'return function(ctx, ...)\n  return ...\nend\n'));
  editors.query.setOption('extraKeys', { 'Ctrl-Enter': act(runQuery) });
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Containers
// ----------------------------------------------------------------------
async function loadContainers() {
  const list = await api('GET', '/containers');
  const ul = $('containers');
  ul.textContent = '';
  for (const c of list) {
    const item = li(c.name, () => openContainer(c.name));
    const count = document.createElement('span');
    count.className = 'count';
    count.textContent = c.items;
    item.firstChild.appendChild(count);
    if (c.name === state.container) item.firstChild.classList.add('current');
    ul.appendChild(item);
  }
  return list;
}

// The throughput counters of a container with a budget (docs/throughput.md).
function showThroughput(t) {
  const el = $('settings-throughput');
  el.hidden = !t;
  if (!t) return;
  const setting = t.mode === 'shared' ? "the database's shared budget"
    : t.mode === 'autoscale' ? `autoscale up to ${t.autoscale_max} RU/s (scaled to ${t.scaled_to})`
    : `${t.ru_per_second} RU/s`;
  let text = `throughput ${setting}${t.burst ? ', burst' : ''} over ` +
    `${t.physical_partitions} partition${t.physical_partitions === 1 ? '' : 's'} · ` +
    `${t.consumed_per_second} RU/s consumed (last 10 s) · ` +
    `${t.throttled} of ${t.requests + t.throttled} requests throttled`;
  const hot = t.hot_partitions.filter(p => p.consumed_per_second > 0 || p.throttled > 0);
  if (hot.length && t.physical_partitions > 1) {
    text += ' · hottest: ' + hot.map(p => `partition ${p.partition} ${p.consumed_per_second} RU/s` +
      (p.utilization !== undefined ? ` (${Math.round(p.utilization * 100)} % of its share)` : '') +
      `, ${p.throttled} throttled`).join('; ');
  }
  el.textContent = text;
}

async function openContainer(name) {
  const c = await api('GET', `/containers/${enc(name)}`);
  state.container = name;
  state.spec = c.spec;
  state.item = null;
  $('pick').hidden = true;
  $('container-view').hidden = false;
  $('container-name').textContent = name;
  $('settings-info').textContent = `${c.items} items · ${c.bytes} bytes of JSON · ` +
    `feed ranges ${c.feed_ranges.length} · partition key ${[].concat(c.spec.partition_key).join(', ')}`;
  $('settings-spec').textContent = JSON.stringify(c.spec, null, 2);
  showThroughput(c.throughput);
  showScripts(c);
  showItem(null);
  $('items').textContent = '';
  $('query-rows').textContent = '';
  $('query-info').textContent = '';
  $('feed-rows').textContent = '';
  $('proc-out').textContent = '';
  await loadContainers();
  await listItems();
  say(`container ${name}`);
}

async function createContainer() {
  const spec = JSON.parse($('nc-spec').value);
  const name = $('nc-name').value.trim();
  const r = await api('POST', '/containers', { name, spec });
  await openContainer(r.name);
}

async function deleteContainer() {
  if (!confirm(`Delete the container ${state.container} and everything in it?`)) return;
  await api('DELETE', cpath());
  say(`deleted ${state.container}`);
  state.container = null;
  $('container-view').hidden = true;
  $('pick').hidden = false;
  await loadContainers();
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Items
// ----------------------------------------------------------------------
async function listItems(more) {
  const pk = pkValue($('items-pk').value);
  let q = '?max_items=50';
  if (pk !== undefined) q += `&pk=${enc(JSON.stringify(pk))}`;
  if (more && state.itemsToken) q += `&continuation=${enc(state.itemsToken)}`;
  const r = await api('GET', `${cpath()}/items${q}`);
  const ul = $('items');
  if (!more) ul.textContent = '';
  for (const doc of r.items) {
    ul.appendChild(li(`${doc.id}  (${JSON.stringify(pkOf(doc))})`, () => openItem(doc.id, pkOf(doc))));
  }
  state.itemsToken = r.info.continuation || null;
  $('items-more').hidden = !state.itemsToken;
  say(`listed ${r.items.length} items · ${counters(r.info)}`);
}

function showItem(doc) {
  state.item = doc;
  const open = doc !== null;
  $('item-title').textContent = open ? `Item ${doc.id}` : 'No item open';
  $('item-etag').textContent = open ? `_etag ${doc._etag}` : '';
  editors.item.setValue(open ? JSON.stringify(doc, null, 2) : '');
  for (const id of ['item-save', 'item-reload', 'item-delete']) $(id).disabled = !open;
  $('item-create').hidden = true;
}

function itemPath(id, pk) {
  return `${cpath()}/items/${enc(id)}?pk=${enc(JSON.stringify(pk))}`;
}

async function openItem(id, pk) {
  const r = await api('GET', itemPath(id, pk));
  showTab('items');
  showItem(r.doc);
  say(`read ${id} · ${counters(r.info)}`);
}

async function saveItem() {
  const doc = JSON.parse(editors.item.getValue());
  const r = await api('PUT', itemPath(state.item.id, pkOf(state.item)), doc,
                      { 'If-Match': state.item._etag });
  showItem(r.doc);
  say(`saved ${r.doc.id} · ${counters(r.info)}`);
}

async function deleteItem() {
  const { id } = state.item;
  if (!confirm(`Delete the item ${id}?`)) return;
  const r = await api('DELETE', itemPath(id, pkOf(state.item)), undefined,
                      { 'If-Match': state.item._etag });
  showItem(null);
  await listItems();
  say(`deleted ${id} · ${counters(r.info)}`);
}

function newItem() {
  showItem(null);
  $('item-title').textContent = 'New item';
  const doc = { id: '' };
  for (const p of [].concat(state.spec.partition_key)) {
    if (p !== '/id') doc[p.split('/').pop()] = '';
  }
  editors.item.setValue(JSON.stringify(doc, null, 2));
  $('item-create').hidden = false;
}

async function createItem() {
  const r = await api('POST', `${cpath()}/items`, JSON.parse(editors.item.getValue()));
  showItem(r.doc);
  say(`created ${r.doc.id} · ${counters(r.info)}`);
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Queries
// ----------------------------------------------------------------------
async function runQuery(next) {
  const body = next === true ? state.query : { sql: editors.query.getValue() };
  if (next !== true) {
    const params = $('query-params').value.trim();
    if (params) body.params = JSON.parse(params);
    const pk = pkValue($('query-pk').value);
    if (pk !== undefined) body.partition_key = pk;
    const max = parseInt($('query-max').value, 10);
    if (max > 0) body.max_items = max;
  }
  const r = await api('POST', `${cpath()}/query`, body);
  const ol = $('query-rows');
  ol.textContent = '';
  for (const row of r.rows) {
    const text = JSON.stringify(row);
    const isItem = row && typeof row === 'object' && typeof row.id === 'string' &&
      pkOf(row) !== undefined;
    ol.appendChild(li(text, isItem ? () => openItem(row.id, pkOf(row)) : null));
  }
  state.query = r.info.continuation ? { ...body, continuation: r.info.continuation } : null;
  $('query-next').hidden = !state.query;
  $('query-info').textContent = counters(r.info);
  say(`query · ${counters(r.info)}`);
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Procedures and triggers
// ----------------------------------------------------------------------
function showScripts(c) {
  for (const kind of ['procedures', 'triggers']) {
    const ul = $(kind);
    ul.textContent = '';
    for (const name of c[kind]) ul.appendChild(li(name, () => pickScript(kind, name)));
    if (c[kind].length === 0) ul.appendChild(li('none'));
  }
}

function scriptKind() {
  const kind = $('script-kind').value;
  $('trigger-opts').hidden = kind !== 'triggers';
  $('run-bar').hidden = kind !== 'procedures';
  return kind;
}

async function pickScript(kind, name) {
  $('script-kind').value = kind;
  scriptKind();
  $('script-name').value = name;
  try {
    const r = await api('GET', `${cpath()}/${kind}/${enc(name)}`);
    const def = r.definition;
    editors.script.setValue(typeof def === 'string' ? def : def.source);
    if (kind === 'triggers') {
      $('trigger-type').value = def.type;
      $('trigger-op').value = def.operation;
      $('trigger-auto').checked = !!def.automatic;
    }
    say(`${kind === 'procedures' ? 'procedure' : 'trigger'} ${name}`);
  } catch (e) {
    say(`${name}: ${e.message}`, true);
  }
}

function scriptBody() {
  const body = { name: $('script-name').value.trim(), source: editors.script.getValue() };
  if (scriptKind() === 'triggers') {
    body.type = $('trigger-type').value;
    body.operation = $('trigger-op').value;
    body.automatic = $('trigger-auto').checked;
  }
  return body;
}

async function saveScript(replace) {
  const kind = scriptKind();
  const body = scriptBody();
  if (replace) await api('PUT', `${cpath()}/${kind}/${enc(body.name)}`, body);
  else await api('POST', `${cpath()}/${kind}`, body);
  showScripts(await api('GET', cpath()));
  say(`${replace ? 'replaced' : 'created'} ${body.name}`);
}

async function deleteScript() {
  const kind = scriptKind();
  const name = $('script-name').value.trim();
  await api('DELETE', `${cpath()}/${kind}/${enc(name)}`);
  showScripts(await api('GET', cpath()));
  say(`deleted ${name}`);
}

async function runProcedure() {
  const name = $('script-name').value.trim();
  const r = await api('POST', `${cpath()}/procedures/${enc(name)}/execute`, {
    partition_key: pkValue($('run-pk').value), args: JSON.parse($('run-args').value || '[]') });
  const log = (r.info.log || []).map((l) => `log: ${l}`).join('\n');
  $('run-out').textContent = `${JSON.stringify(r.result, null, 2)}\n${log}`;
  say(`ran ${name} · ${counters(r.info)}`);
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// The change feed and processors
// ----------------------------------------------------------------------
async function readFeed(cont) {
  let q = `?mode=${enc($('feed-mode').value)}&max_items=100`;
  q += cont && state.feedToken ? `&continuation=${enc(state.feedToken)}`
    : `&start=${enc($('feed-start').value)}`;
  const r = await api('GET', `${cpath()}/feed${q}`);
  const ol = $('feed-rows');
  if (!cont) ol.textContent = '';
  for (const ch of r.changes) ol.appendChild(li(JSON.stringify(ch)));
  state.feedToken = r.info.continuation;
  $('feed-info').textContent = `${ol.children.length} changes · ${counters(r.info)}`;
}

function follow() {
  clearInterval(state.followTimer);
  state.followTimer = null;
  if ($('feed-follow').checked) {
    state.followTimer = setInterval(act(() => readFeed(true)), 1500);
  }
}

async function showProcessor() {
  const name = $('proc-name').value.trim();
  const mode = $('proc-mode').value;
  const st = await api('GET', `${cpath()}/processors/${enc(name)}${mode ? `?mode=${mode}` : ''}`);
  const out = $('proc-out');
  out.textContent = '';
  const p = document.createElement('p');
  p.className = 'info';
  p.textContent = `${st.name} (${st.mode}) · lag ${st.lag} · ${st.dead.length} dead letter(s)`;
  out.appendChild(p);
  const t = document.createElement('table');
  t.className = 'ranges';
  const cols = ['range', 'owner', 'expires', 'lag', 'failures', 'attempts', 'delivered'];
  t.innerHTML = `<tr>${cols.map((c) => `<th>${c}</th>`).join('')}</tr>`;
  for (const r of st.ranges) {
    const tr = t.insertRow();
    for (const c of cols) {
      const v = c === 'owner' ? (r.owner || '(free)') : c === 'expires' && r.expires !== undefined
        ? `${Math.round(r.expires)} s` : (r[c] ?? '-');
      tr.insertCell().textContent = v;
    }
  }
  out.appendChild(t);
  st.dead.forEach((d, i) => {
    const div = document.createElement('div');
    div.className = 'bar';
    div.textContent = `dead letter ${i + 1}: range ${d.range}, ${d.changes.length} change(s), ` +
      `${d.attempts} attempt(s): ${d.error} `;
    const b = document.createElement('button');
    b.textContent = 'Re-drive';
    b.addEventListener('click', act(async () => {
      const r = await api('POST', `${cpath()}/processors/${enc(name)}/redrive`, { letter: i + 1 });
      say(`re-drove: ${r.written} written again, ${r.skipped} skipped · ${r.charge} RU`);
    }));
    div.appendChild(b);
    out.appendChild(div);
  });
  if (st.dead.length) {
    const b = document.createElement('button');
    b.textContent = 'Drop every dead letter';
    b.className = 'danger';
    b.addEventListener('click', act(async () => {
      if (!confirm('Drop every dead letter of this processor?')) return;
      const r = await api('POST', `${cpath()}/processors/${enc(name)}/drop`, {});
      say(`dropped ${r.dropped} dead letter(s)`);
      await showProcessor();
    }));
    out.appendChild(b);
  }
  say(`processor ${name}`);
}
// }---------------------------------------------------------------------

function showTab(name) {
  for (const b of document.querySelectorAll('#tabs button')) {
    b.setAttribute('aria-selected', String(b.dataset.tab === name));
  }
  for (const s of document.querySelectorAll('.tab')) s.hidden = s.id !== `tab-${name}`;
  for (const e of Object.values(editors)) e.refresh();
}

async function start() {
  makeEditors();
  for (const b of document.querySelectorAll('#tabs button')) {
    b.addEventListener('click', () => showTab(b.dataset.tab));
  }
  const on = (id, fn, ev = 'click') => $(id).addEventListener(ev, act(fn));
  on('nc-create', createContainer);
  on('container-delete', deleteContainer);
  on('items-list', () => listItems(false));
  on('items-more', () => listItems(true));
  on('items-new', newItem);
  on('item-save', saveItem);
  on('item-create', createItem);
  on('item-reload', () => openItem(state.item.id, pkOf(state.item)));
  on('item-delete', deleteItem);
  on('query-run', runQuery);
  on('query-next', () => runQuery(true));
  on('script-kind', scriptKind, 'change');
  on('script-create', () => saveScript(false));
  on('script-replace', () => saveScript(true));
  on('script-delete', deleteScript);
  on('script-run', runProcedure);
  on('feed-read', () => readFeed(false));
  on('feed-follow', follow, 'change');
  on('proc-show', showProcessor);
  scriptKind();
  const db = await api('GET', '/database');
  $('db-path').textContent = db.path;
  const list = await loadContainers();
  say(`${list.length} containers · ${db.stats.items} items`);
}

document.addEventListener('DOMContentLoaded', act(start));
