// The Data Explorer's page: plain JavaScript over the JSON API that
// `regolith explore` serves (docs/explorer.md), with vendored libraries
// for what they do well: CodeMirror 5 (the editors), Tabulator (the items
// and results grids) and json-formatter-js (results as JSON).
//
// The page: a resource tree of containers on the left; tabs on the right,
// one per open view (a container's items, a SQL query, its settings, its
// scripts, its change feed), each a copy of a <template> with its own
// state, so that a container's filter, query or page never leaks into
// another's.  The active tab's address is in the URL (#/CONTAINER/VIEW),
// so a view can be bookmarked and reloaded.  An error of a view is shown
// where its result goes, replacing it; the status line says what the last
// action did and cost.
'use strict';

const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;

// {---------------------------------------------------------------------
// The API and the status line
// ----------------------------------------------------------------------
async function api(method, path, body, headers = {}) {
  const init = { method, headers: { 'X-Regolith-Explorer': '1', ...headers } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const t0 = performance.now();
  const res = await fetch('/api' + path, init);
  let data;
  try { data = await res.json(); } catch (e) { data = { error: 'the answer is not JSON' }; }
  if (!res.ok) {
    const err = new Error(data.error || res.statusText);
    err.status = res.status;
    throw err;
  }
  if (data && typeof data === 'object' && !Array.isArray(data)) {
    Object.defineProperty(data, 'ms', { value: performance.now() - t0 });
  }
  return data;
}

function say(text, isError) {
  const s = $('status');
  s.textContent = text;
  s.className = isError ? 'error' : '';
}

function errorText(e) { return e.status ? `${e.message} (status ${e.status})` : e.message; }

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

// Runs an action; an error goes to `errorBox` (the view's result area,
// which it then replaces) or else to the status line.
function act(fn, errorBox) {
  return async (...args) => {
    try {
      if (errorBox) errorBox.hidden = true;
      await fn(...args);
    } catch (e) {
      if (errorBox) showError(errorBox, e);
      else say(errorText(e), true);
    }
  };
}

function showError(box, e) {
  box.textContent = '';
  const strong = document.createElement('strong');
  strong.textContent = e.status ? `Error ${e.status}` : 'Error';
  box.append(strong, ' ', e.message);
  box.hidden = false;
  say(errorText(e), true);
}

// A partition key as typed: JSON when it parses (42, true, ["a", 1]),
// else the text as a string; undefined when empty (as the command does).
function pkValue(text) {
  text = text.trim();
  if (text === '') return undefined;
  try { return JSON.parse(text); } catch (e) { return text; }
}

function parseJSON(text, what) {
  try { return JSON.parse(text); } catch (e) {
    const err = new Error(`${what} is not JSON: ${e.message}`);
    err.status = 400;
    throw err;
  }
}

function pathValue(doc, path) {
  return path.split('/').slice(1).reduce((v, k) =>
    (v == null ? undefined : v[k.replace(/~1/g, '/').replace(/~0/g, '~')]), doc);
}

function pkPaths(spec) { return [].concat(spec.partition_key); }

function pkOf(spec, doc) {
  const values = pkPaths(spec).map((p) => pathValue(doc, p));
  return values.length === 1 ? values[0] : values;
}

function cell(v) {
  if (v === undefined) return '';
  if (v === null) return 'null';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

function node(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k in e) e[k] = v;
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Grids and JSON (Tabulator, json-formatter-js)
// ----------------------------------------------------------------------
const SYSTEM = ['_rid', '_self', '_etag', '_attachments', '_ts', '_lsn'];

// The columns of query rows: id first, the others by name, the system
// properties last; a row that is not an object is one column, value (as
// `regolith query --format table` prints them).
function rowColumns(rows) {
  const seen = new Set();
  let scalar = false;
  for (const r of rows) {
    if (r && typeof r === 'object' && !Array.isArray(r)) Object.keys(r).forEach((k) => seen.add(k));
    else scalar = true;
  }
  const names = [...seen].sort((a, b) => {
    if (a === 'id' || b === 'id') return a === 'id' ? -1 : 1;
    const sa = SYSTEM.indexOf(a), sb = SYSTEM.indexOf(b);
    if (sa >= 0 || sb >= 0) return sa < 0 ? -1 : sb < 0 ? 1 : sa - sb;
    return a < b ? -1 : a > b ? 1 : 0;
  });
  if (scalar) names.unshift('value');
  return names;
}

function makeGrid(elem, onRow) {
  const grid = new Tabulator(elem, {
    layout: 'fitDataStretch', height: '100%', maxHeight: '100%', placeholder: 'No rows',
    columnDefaults: { headerSort: true, resizable: true, maxWidth: 360, tooltip: true },
    selectableRows: onRow ? 1 : false, columns: [], data: [],
  });
  if (onRow) grid.on('rowClick', (e, row) => onRow(row.getData().__doc));
  return grid;
}

// Shows `rows` (documents or values) in `grid` with `names` as columns
// (paths such as /postId or plain member names).
function fillGrid(grid, rows, names) {
  const columns = names.map((n, i) => ({ title: n, field: `c${i}` }));
  const data = rows.map((r, j) => {
    const d = { __doc: r, __n: j };
    names.forEach((n, i) => {
      let v;
      if (n === 'value' && (r === null || typeof r !== 'object' || Array.isArray(r))) v = r;
      else if (r && typeof r === 'object') v = n.startsWith('/') ? pathValue(r, n) : r[n];
      d[`c${i}`] = cell(v);
    });
    return d;
  });
  grid.setColumns(columns);
  return grid.setData(data);
}

function showJSON(elem, value, open = 2) {
  elem.textContent = '';
  elem.appendChild(new JSONFormatter(value, open, { hoverPreviewEnabled: false }).render());
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Editors
// ----------------------------------------------------------------------
function editor(elem, mode, value) {
  return CodeMirror(elem, { mode, value, lineNumbers: true, matchBrackets: true,
                            tabSize: 2, indentUnit: 2, lineWrapping: true });
}
const JSON_MODE = { name: 'javascript', json: true };
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Containers and the resource tree
// ----------------------------------------------------------------------
const S = { containers: [], specs: {}, tabs: [], active: null, queries: 0, expanded: new Set() };

const VIEWS = [
  ['items', 'Items'], ['query', 'New SQL query'], ['settings', 'Settings'],
  ['scripts', 'Procedures & triggers'], ['feed', 'Change feed'],
];

async function loadContainers() {
  S.containers = await api('GET', '/containers');
  for (const c of S.containers) S.specs[c.name] = c.spec;
  drawTree();
  return S.containers;
}

function drawTree() {
  const tree = $('tree');
  const focused = document.activeElement && document.activeElement.dataset.key;
  tree.textContent = '';
  if (S.containers.length === 0) {
    tree.appendChild(node('li', { class: 'hint', role: 'none' }, 'No containers yet: create one.'));
  }
  for (const c of S.containers) {
    const open = S.expanded.has(c.name);
    const current = S.active && S.active.container === c.name;
    const head = node('span', { class: 'tree-row' + (current ? ' current' : '') },
      node('span', { class: 'twisty', 'aria-hidden': 'true' }, open ? '▾' : '▸'),
      node('span', { class: 'tree-name' }, c.name),
      node('span', { class: 'count', title: 'items' }, String(c.items)));
    const item = node('li', { role: 'treeitem', tabindex: '-1', 'aria-expanded': String(open),
      class: 'tree-container', 'data-key': `c:${c.name}`, 'aria-label': `${c.name}, ${c.items} items` }, head);
    head.addEventListener('click', () => toggle(c.name));
    if (open) {
      const group = node('ul', { role: 'group' });
      for (const [view, label] of VIEWS) {
        const isCurrent = S.active && S.active.container === c.name && S.active.view === view;
        const leaf = node('li', { role: 'treeitem', tabindex: '-1', class: 'tree-leaf' + (isCurrent ? ' current' : ''),
          'data-key': `v:${c.name}:${view}`, 'data-view': view },
        node('span', { class: `icon icon-${view}`, 'aria-hidden': 'true' }), label);
        leaf.addEventListener('click', act(() => openTab(c.name, view, view === 'query' ? {} : null)));
        group.appendChild(leaf);
      }
      item.appendChild(group);
    }
    tree.appendChild(item);
  }
  const items = [...tree.querySelectorAll('[role=treeitem]')];
  // the one item Tab reaches: the focused one, else the open view's
  const keep = items.find((e) => e.dataset.key === focused) ||
    items.find((e) => e.classList.contains('tree-leaf') && e.classList.contains('current')) || items[0];
  if (keep) keep.tabIndex = 0;
  if (focused && keep && keep.dataset.key === focused) keep.focus();
}

function toggle(name, open) {
  const now = open === undefined ? !S.expanded.has(name) : open;
  if (now) S.expanded.add(name); else S.expanded.delete(name);
  drawTree();
}

// The tree by keyboard (WAI-ARIA's tree pattern): Up and Down move, Right
// opens or enters, Left closes or leaves, Enter and Space act.
function treeKeys(e) {
  const items = [...$('tree').querySelectorAll('[role=treeitem]')];
  const i = items.indexOf(document.activeElement);
  if (i < 0) return;
  const cur = items[i];
  const move = (to) => {
    if (!to) return;
    items.forEach((x) => { x.tabIndex = -1; });
    to.tabIndex = 0;
    to.focus();
  };
  const name = cur.dataset.key.split(':')[1];
  if (e.key === 'ArrowDown') move(items[i + 1]);
  else if (e.key === 'ArrowUp') move(items[i - 1]);
  else if (e.key === 'ArrowRight' && cur.classList.contains('tree-container')) {
    if (!S.expanded.has(name)) toggle(name, true); else move(items[i + 1]);
  } else if (e.key === 'ArrowLeft') {
    if (cur.classList.contains('tree-container')) toggle(name, false);
    else move(items.find((x) => x.dataset.key === `c:${name}`));
  } else if (e.key === 'Enter' || e.key === ' ') {
    if (cur.classList.contains('tree-container')) toggle(name);
    else cur.click();
  } else return;
  e.preventDefault();
}

async function createContainer(e) {
  e.preventDefault();
  const spec = $('nc-spec').value.trim() ? parseJSON($('nc-spec').value, 'More options') : {};
  spec.partition_key = $('nc-pk').value.trim();
  const parts = parseInt($('nc-parts').value, 10);
  if (parts > 1) spec.physical_partitions = parts;
  const name = $('nc-name').value.trim();
  const r = await api('POST', '/containers', { name, spec });
  $('new-container').hidden = true;
  S.expanded.add(r.name);
  await loadContainers();
  await openTab(r.name, 'items');
  say(`created the container ${r.name} · ${counters(r.info)}`);
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Tabs: one per open view, each with its own DOM and state
// ----------------------------------------------------------------------
const BUILD = {};      // view -> function(tab) filling tab.el

function tabTitle(t) {
  const label = t.view === 'query' ? `Query ${t.n}` : VIEWS.find((v) => v[0] === t.view)[1];
  return `${t.container} · ${label}`;
}

// Opens the tab of (container, view), or a new query tab (opts given for
// a query: {sql}); makes it active.
async function openTab(container, view, opts) {
  if (!S.specs[container]) {
    const c = await api('GET', `/containers/${enc(container)}`);
    S.specs[container] = c.spec;
  }
  let t = view === 'query' && opts ? null
    : S.tabs.find((x) => x.container === container && x.view === view);
  if (!t) {
    t = { id: `tab${Date.now()}${Math.random().toString(36).slice(2, 6)}`, container, view };
    if (view === 'query') t.n = ++S.queries;
    t.el = $(`t-${view}`).content.firstElementChild.cloneNode(true);
    t.el.id = `pane-${t.id}`;
    t.el.setAttribute('role', 'tabpanel');
    t.el.hidden = true;
    $('panes').appendChild(t.el);
    t.q = (sel) => t.el.querySelector(sel);
    S.tabs.push(t);
    S.expanded.add(container);
    await BUILD[view](t, opts || {});
  }
  activate(t);
  return t;
}

function activate(t) {
  S.active = t;
  $('welcome').hidden = !!t;
  for (const x of S.tabs) x.el.hidden = x !== t;
  drawTabs();
  drawTree();
  if (t) {
    if (t.editors) t.editors.forEach((ed) => ed.refresh());
    if (t.grids) t.grids.forEach((g) => g.redraw());
    const hash = `#/${enc(t.container)}/${t.view}` + (t.view === 'query' && t.n ? `/${t.n}` : '');
    if (location.hash !== hash) history.replaceState(null, '', hash);
    document.title = `${tabTitle(t)} · regolith Data Explorer`;
  } else {
    history.replaceState(null, '', '#');
    document.title = 'regolith Data Explorer';
  }
}

function closeTab(t) {
  const i = S.tabs.indexOf(t);
  S.tabs.splice(i, 1);
  if (t.timer) clearInterval(t.timer);
  t.el.remove();
  if (S.active === t) activate(S.tabs[i] || S.tabs[i - 1] || null);
  else drawTabs();
}

function drawTabs() {
  const strip = $('tabstrip');
  strip.textContent = '';
  for (const t of S.tabs) {
    const selected = t === S.active;
    const b = node('button', { role: 'tab', type: 'button', class: 'tab', id: t.id,
      'aria-selected': String(selected), 'aria-controls': t.el.id, tabIndex: selected ? 0 : -1,
      onclick: () => activate(t) },
    node('span', { class: `icon icon-${t.view}`, 'aria-hidden': 'true' }), tabTitle(t));
    const x = node('button', { type: 'button', class: 'tab-close', 'aria-label': `Close ${tabTitle(t)}`,
      title: 'Close', onclick: (e) => { e.stopPropagation(); closeTab(t); } }, '×');
    t.el.setAttribute('aria-labelledby', t.id);
    strip.appendChild(node('span', { class: 'tab-wrap' + (selected ? ' selected' : '') }, b, x));
  }
}

function tabKeys(e) {
  const i = S.tabs.indexOf(S.active);
  if (i < 0) return;
  let to;
  if (e.key === 'ArrowRight') to = S.tabs[(i + 1) % S.tabs.length];
  else if (e.key === 'ArrowLeft') to = S.tabs[(i - 1 + S.tabs.length) % S.tabs.length];
  else if (e.key === 'Delete') { closeTab(S.active); return; } else return;
  e.preventDefault();
  activate(to);
  $(to.id).focus();
}

// #/CONTAINER/VIEW[/N]: the tab to open (a query tab N that is not open
// opens as a new query).
async function followHash() {
  const m = location.hash.match(/^#\/([^/]+)\/(items|query|settings|scripts|feed)(?:\/(\d+))?$/);
  if (!m) return false;
  const container = decodeURIComponent(m[1]);
  const view = m[2];
  if (view === 'query') {
    const t = S.tabs.find((x) => x.container === container && x.view === 'query' && String(x.n) === m[3]);
    if (t) { activate(t); return true; }
    await openTab(container, 'query', {});
    return true;
  }
  await openTab(container, view);
  return true;
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Items: a grid of id, partition key and chosen columns, a filter, pages
// of 50, and the item's editor
// ----------------------------------------------------------------------
const PAGE = 50;

BUILD.items = async (t) => {
  const spec = S.specs[t.container];
  const q = t.q;
  t.state = { filter: '', pk: undefined, columns: [], token: null, rows: [], item: null };
  t.errorBox = q('.grid-pane .result-error');
  t.itemError = q('.item-error');
  t.ed = editor(q('.item-editor'), JSON_MODE, '');
  t.editors = [t.ed];
  t.grid = makeGrid(q('.items-grid'), (doc) => act(() => openItem(t, doc), t.itemError)());
  t.grids = [t.grid];
  const load = act(() => listItems(t, false), t.errorBox);
  q('.f-apply').addEventListener('click', load);
  q('.f-refresh').addEventListener('click', load);
  q('.f-filter').addEventListener('keydown', (e) => { if (e.key === 'Enter') load(); });
  q('.f-columns').addEventListener('keydown', (e) => { if (e.key === 'Enter') load(); });
  q('.f-clear').addEventListener('click', () => {
    q('.f-filter').value = '';
    q('.f-pk').value = '';
    load();
  });
  q('.f-more').addEventListener('click', act(() => listItems(t, true), t.errorBox));
  q('.f-new').addEventListener('click', () => newItem(t));
  q('.f-upload').addEventListener('click', () => q('.f-file').click());
  q('.f-file').addEventListener('change', act(() => upload(t), t.errorBox));
  q('.i-save').addEventListener('click', act(() => saveItem(t), t.itemError));
  q('.i-create').addEventListener('click', act(() => createItem(t), t.itemError));
  q('.i-discard').addEventListener('click', () => showItem(t, t.state.item));
  q('.i-reload').addEventListener('click', act(() => openItem(t, t.state.item), t.itemError));
  q('.i-delete').addEventListener('click', act(() => deleteItem(t), t.itemError));
  q('.f-pk').placeholder = `all (${pkPaths(spec).join(', ')})`;
  await act(() => listItems(t, false), t.errorBox)();
};

function itemColumns(t) {
  const spec = S.specs[t.container];
  const chosen = t.q('.f-columns').value.split(',').map((s) => s.trim()).filter(Boolean)
    .map((s) => (s.startsWith('/') ? s : '/' + s.replace(/^c\./, '').replace(/\./g, '/')));
  const names = ['/id'];
  for (const p of pkPaths(spec)) if (!names.includes(p)) names.push(p);
  for (const p of chosen) if (!names.includes(p)) names.push(p);
  return names;
}

async function listItems(t, more) {
  const st = t.state;
  if (!more) {
    st.filter = t.q('.f-filter').value.trim();
    st.pk = pkValue(t.q('.f-pk').value);
    st.token = null;
    st.rows = [];
  }
  const body = { sql: `SELECT * FROM c ${st.filter}`.trim(), max_items: PAGE };
  if (st.pk !== undefined) body.partition_key = st.pk;
  if (more && st.token) body.continuation = st.token;
  const r = await api('POST', `/containers/${enc(t.container)}/query`, body);
  st.rows = st.rows.concat(r.rows.filter((d) => d && typeof d === 'object' && !Array.isArray(d)));
  st.token = r.info.continuation || null;
  await fillGrid(t.grid, st.rows, itemColumns(t).map((p) => (p === '/id' ? 'id' : p)));
  t.q('.pager-text').textContent = `${st.rows.length} item${st.rows.length === 1 ? '' : 's'}` +
    (st.token ? ' loaded, more to come' : '') + ` · last page ${counters(r.info)}`;
  t.q('.f-more').hidden = !st.token;
  say(`${t.container}: ${r.rows.length} items · ${counters(r.info)}`);
}

function itemPath(t, doc) {
  return `/containers/${enc(t.container)}/items/${enc(doc.id)}?pk=${enc(JSON.stringify(pkOf(S.specs[t.container], doc)))}`;
}

function showItem(t, doc, creating) {
  t.state.item = doc;
  const open = !!doc;
  t.q('.item-title').textContent = creating ? 'New item' : open ? `Item ${doc.id}` : 'No item open';
  t.q('.item-etag').textContent = open && !creating ? `_etag ${doc._etag}` : '';
  t.ed.setValue(open ? JSON.stringify(doc, null, 2) : '');
  for (const c of ['.i-save', '.i-reload', '.i-delete']) t.q(c).disabled = !open || !!creating;
  t.q('.i-discard').disabled = !open;
  t.q('.i-create').hidden = !creating;
  t.q('.i-save').hidden = !!creating;
  t.itemError.hidden = true;
}

async function openItem(t, doc) {
  const r = await api('GET', itemPath(t, doc));
  showItem(t, r.doc);
  say(`read ${r.doc.id} · ${counters(r.info)}`);
}

async function saveItem(t) {
  const doc = parseJSON(t.ed.getValue(), 'The item');
  const r = await api('PUT', itemPath(t, t.state.item), doc, { 'If-Match': t.state.item._etag });
  showItem(t, r.doc);
  replaceRow(t, r.doc);
  say(`saved ${r.doc.id} · ${counters(r.info)}`);
}

function replaceRow(t, doc) {
  const i = t.state.rows.findIndex((d) => d.id === doc.id &&
    JSON.stringify(pkOf(S.specs[t.container], d)) === JSON.stringify(pkOf(S.specs[t.container], doc)));
  if (i >= 0) t.state.rows[i] = doc;
  fillGrid(t.grid, t.state.rows, itemColumns(t).map((p) => (p === '/id' ? 'id' : p)));
}

async function deleteItem(t) {
  const doc = t.state.item;
  if (!confirm(`Delete the item ${doc.id}?`)) return;
  const r = await api('DELETE', itemPath(t, doc), undefined, { 'If-Match': doc._etag });
  showItem(t, null);
  await listItems(t, false);
  say(`deleted ${doc.id} · ${counters(r.info)}`);
}

function newItem(t) {
  const doc = { id: '' };
  for (const p of pkPaths(S.specs[t.container])) {
    if (p !== '/id') doc[p.split('/').pop()] = '';
  }
  showItem(t, doc, true);
  t.ed.focus();
}

async function createItem(t) {
  const r = await api('POST', `/containers/${enc(t.container)}/items`, parseJSON(t.ed.getValue(), 'The item'));
  showItem(t, r.doc);
  await listItems(t, false);
  say(`created ${r.doc.id} · ${counters(r.info)}`);
}

// Upload: a file of JSON lines (or one JSON array), sent in batches of
// 100, each document upserted; a progress bar, then what was rejected,
// by line.
const BATCH = 100;

async function upload(t) {
  const input = t.q('.f-file');
  const file = input.files[0];
  input.value = '';
  if (!file) return;
  const box = t.q('.upload');
  const bar = t.q('.up-progress');
  const text = t.q('.up-text');
  const errors = t.q('.up-errors');
  box.hidden = false;
  errors.textContent = '';
  t.q('.up-title').textContent = `Uploading ${file.name}`;
  const raw = await file.text();
  let docs = [];
  const bad = [];
  if (/^\s*\[/.test(raw)) {
    const all = parseJSON(raw, file.name);
    docs = all.map((d, i) => ({ line: i + 1, doc: d }));
  } else {
    raw.split('\n').forEach((line, i) => {
      if (!line.trim()) return;
      try { docs.push({ line: i + 1, doc: JSON.parse(line) }); } catch (e) {
        bad.push({ line: i + 1, error: `not JSON: ${e.message}` });
      }
    });
  }
  bar.max = Math.max(docs.length, 1);
  let written = 0, charge = 0;
  let throttled = 0;
  for (let i = 0; i < docs.length;) {
    const batch = docs.slice(i, i + BATCH);
    const r = await api('POST', `/containers/${enc(t.container)}/upload`, batch.map((d) => d.doc));
    written += r.written;
    charge += r.info.charge;
    for (const rej of r.rejected) bad.push({ line: batch[rej.index - 1].line, error: `${rej.error} (status ${rej.status})` });
    // over the throughput budget (429): wait as told, then go on from
    // the document that was refused, as Cosmos DB's clients do
    const done = r.throttled ? r.throttled.index - 1 : batch.length;
    i += done;
    bar.value = i;
    if (r.throttled) {
      throttled++;
      await new Promise((ok) => setTimeout(ok, Math.max(r.throttled.retry_after_ms, 10)));
    }
    text.textContent = `${bar.value} of ${docs.length} · ${written} written · ${bad.length} rejected · ` +
      `${Math.round(charge * 100) / 100} RU` + (throttled ? ` · throttled ${throttled} times (429), retried` : '');
  }
  if (docs.length === 0) bar.value = bar.max;
  t.q('.up-title').textContent = `Uploaded ${file.name}`;
  text.textContent = `${written} written · ${bad.length} rejected · ${Math.round(charge * 100) / 100} RU` +
    (throttled ? ` · throttled ${throttled} times (429), retried` : '');
  bad.sort((a, b) => a.line - b.line).slice(0, 20).forEach((b) =>
    errors.appendChild(node('li', {}, `line ${b.line}: ${b.error}`)));
  if (bad.length > 20) errors.appendChild(node('li', {}, `and ${bad.length - 20} more`));
  await loadContainers();
  await listItems(t, false);
  say(`uploaded ${written} items from ${file.name}${bad.length ? `, ${bad.length} rejected` : ''}`);
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Queries: a tab each, results as a grid or JSON, and their stats
// ----------------------------------------------------------------------
BUILD.query = async (t, opts) => {
  const q = t.q;
  t.ed = editor(q('.q-editor'), 'text/x-sql', opts.sql || 'SELECT * FROM c');
  t.editors = [t.ed];
  t.grid = makeGrid(q('.q-grid'), (doc) => {
    if (doc && typeof doc.id === 'string' && pkOf(S.specs[t.container], doc) !== undefined) {
      act(async () => {
        const it = await openTab(t.container, 'items');
        await openItem(it, doc);
      })();
    }
  });
  t.grids = [t.grid];
  t.errorBox = q('.sub-results .result-error');
  const run = act(() => runQuery(t, false), t.errorBox);
  t.ed.setOption('extraKeys', { 'Ctrl-Enter': run, 'Cmd-Enter': run });
  q('.q-run').addEventListener('click', run);
  q('.q-next').addEventListener('click', act(() => runQuery(t, true), t.errorBox));
  for (const b of t.el.querySelectorAll('.sub')) b.addEventListener('click', () => subTab(t, b.dataset.sub));
  for (const r of t.el.querySelectorAll('.q-view')) {
    r.name = `view-${t.id}`;
    r.addEventListener('change', () => showRows(t));
  }
  showRows(t);
};

function subTab(t, name) {
  for (const b of t.el.querySelectorAll('.sub')) b.setAttribute('aria-selected', String(b.dataset.sub === name));
  t.q('.sub-results').hidden = name !== 'results';
  t.q('.sub-stats').hidden = name !== 'stats';
  t.q('.view-toggle').hidden = name !== 'results';
  if (name === 'results') t.grid.redraw();
}

function showRows(t) {
  const asJSON = t.el.querySelector('.q-view:checked').value === 'json';
  const rows = t.rows;
  t.q('.q-empty').hidden = !!rows;
  t.q('.q-grid').hidden = !rows || asJSON;
  t.q('.q-json').hidden = !rows || !asJSON;
  if (!rows) return;
  if (asJSON) showJSON(t.q('.q-json'), rows, 2);
  else fillGrid(t.grid, rows, rowColumns(rows));
}

async function runQuery(t, next) {
  let body;
  if (next) body = t.last;
  else {
    body = { sql: t.ed.getValue() };
    const params = t.q('.q-params').value.trim();
    if (params) body.params = parseJSON(params, 'The parameters');
    const pk = pkValue(t.q('.q-pk').value);
    if (pk !== undefined) body.partition_key = pk;
    const max = parseInt(t.q('.q-max').value, 10);
    if (max > 0) body.max_items = max;
  }
  // the result area shows this query's outcome only: cleared first
  t.rows = null;
  t.q('.q-stats').textContent = '';
  t.q('.q-summary').textContent = '';
  showRows(t);
  try {
    const r = await api('POST', `/containers/${enc(t.container)}/query`, body);
    t.rows = r.rows;
    t.page = next ? (t.page || 1) + 1 : 1;
    t.last = r.info.continuation ? { ...body, continuation: r.info.continuation } : null;
    t.q('.q-next').hidden = !t.last;
    showRows(t);
    showStats(t, r.info, r.ms);
    t.q('.q-summary').textContent = `${r.rows.length} row${r.rows.length === 1 ? '' : 's'} · ${r.info.charge} RU` +
      (t.page > 1 ? ` · page ${t.page}` : '') + (t.last ? ' · more: Next page' : '');
    say(`${t.container}: query · ${counters(r.info)}`);
  } catch (e) {
    t.last = null;
    t.q('.q-next').hidden = true;
    t.q('.q-empty').hidden = true;
    throw e;
  }
}

function showStats(t, info, ms) {
  const rows = [
    ['Request charge', `${info.charge} RU`],
    ['Rows returned', info.count],
    ['Partitions contacted', `${info.partitions}${info.cross_partition ? ' (cross-partition)' : ' (one logical partition)'}`],
    ['Items loaded', info.loaded],
    ['Index lookups', info.index_lookups],
    ['Round trip (this page)', `${ms.toFixed(1)} ms`],
    ['More results', info.continuation ? 'yes (Next page)' : 'no'],
  ];
  const body = t.q('.q-stats');
  body.textContent = '';
  for (const [k, v] of rows) {
    body.appendChild(node('tr', {}, node('th', { scope: 'row' }, k), node('td', {}, String(v ?? '-'))));
  }
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Settings: TTL, throughput, indexing policy (db:replace_container)
// ----------------------------------------------------------------------
BUILD.settings = async (t) => {
  const q = t.q;
  t.errorBox = q('.result-error');
  t.ed = editor(q('.s-indexing'), JSON_MODE, '');
  t.editors = [t.ed];
  for (const r of t.el.querySelectorAll('.s-ttl')) r.name = `ttl-${t.id}`;
  for (const r of t.el.querySelectorAll('.s-tp')) r.name = `tp-${t.id}`;
  q('.s-save').addEventListener('click', act(() => saveSettings(t), t.errorBox));
  q('.s-discard').addEventListener('click', act(() => loadSettings(t), t.errorBox));
  q('.s-delete').addEventListener('click', act(() => deleteContainer(t), t.errorBox));
  await act(() => loadSettings(t), t.errorBox)();
};

function radio(t, cls, value) {
  for (const r of t.el.querySelectorAll(cls)) r.checked = r.value === value;
}

async function loadSettings(t) {
  const c = await api('GET', `/containers/${enc(t.container)}`);
  S.specs[t.container] = c.spec;
  t.info = c;
  const spec = c.spec;
  const q = t.q;
  const summary = q('.s-summary');
  summary.textContent = '';
  const dl = node('dl', { class: 'facts' });
  const fact = (k, v) => dl.append(node('dt', {}, k), node('dd', {}, v));
  fact('Partition key', pkPaths(spec).join(', ') + (pkPaths(spec).length > 1 ? ' (hierarchical)' : ''));
  fact('Physical partitions', String(spec.physical_partitions || 1));
  fact('Items', `${c.items} (${c.bytes} bytes of JSON)`);
  fact('Feed ranges', String(c.feed_ranges.length));
  fact('Change feed', spec.change_feed && spec.change_feed.all_versions ? 'latest and all versions' : 'latest version');
  summary.append(node('h2', {}, t.container), dl);
  const ttl = spec.default_ttl;
  radio(t, '.s-ttl', ttl === undefined ? 'off' : ttl === -1 ? 'on' : 'seconds');
  q('.s-ttl-seconds').value = ttl > 0 ? ttl : '';
  const tp = spec.throughput;
  const tpKind = tp === undefined || tp === null ? 'none' : typeof tp === 'number' || tp.manual ? 'manual' : 'autoscale';
  radio(t, '.s-tp', tpKind);
  q('.s-tp-manual').value = typeof tp === 'number' ? tp : (tp && tp.manual) || '';
  q('.s-tp-auto').value = (tp && tp.autoscale_max) || '';
  const now = c.throughput;
  q('.s-tp-now').textContent = now ? `now: ${now.consumed_per_second} RU/s consumed (last 10 s), ` +
    `${now.throttled} of ${now.requests + now.throttled} requests throttled` : '';
  const ul = q('.s-unique');
  ul.textContent = '';
  for (const uk of spec.unique_keys || []) ul.appendChild(node('li', { class: 'mono' }, `(${uk.join(', ')})`));
  if (!(spec.unique_keys || []).length) ul.appendChild(node('li', { class: 'muted' }, 'none'));
  const ix = spec.indexing || { automatic: true, included: ['/*'], excluded: [] };
  t.ed.setValue(JSON.stringify(ix, null, 2));
}

async function saveSettings(t) {
  const q = t.q;
  const spec = JSON.parse(JSON.stringify(S.specs[t.container]));
  delete spec.name;
  spec.indexing = parseJSON(t.ed.getValue(), 'The indexing policy');
  const ttl = t.el.querySelector('.s-ttl:checked').value;
  if (ttl === 'off') delete spec.default_ttl;
  else if (ttl === 'on') spec.default_ttl = -1;
  else spec.default_ttl = parseInt(q('.s-ttl-seconds').value, 10);
  const tp = t.el.querySelector('.s-tp:checked').value;
  if (tp === 'none') spec.throughput = null;
  else if (tp === 'manual') spec.throughput = parseInt(q('.s-tp-manual').value, 10);
  else spec.throughput = { autoscale_max: parseInt(q('.s-tp-auto').value, 10) };
  const r = await api('PUT', `/containers/${enc(t.container)}`, { spec });
  S.specs[t.container] = r.spec;
  await loadSettings(t);
  say(`saved the settings of ${t.container} · ${counters(r.info)}`);
}

async function deleteContainer(t) {
  if (!confirm(`Delete the container ${t.container} and everything in it?`)) return;
  await api('DELETE', `/containers/${enc(t.container)}`);
  for (const x of S.tabs.filter((x) => x.container === t.container)) closeTab(x);
  delete S.specs[t.container];
  await loadContainers();
  say(`deleted ${t.container}`);
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// Procedures and triggers
// ----------------------------------------------------------------------
BUILD.scripts = async (t) => {
  const q = t.q;
  t.errorBox = q('.result-error');
  t.ed = editor(q('.p-editor'), 'lua', 'return function(ctx, ...)\n  return ...\nend\n');
  t.editors = [t.ed];
  q('.p-kind').addEventListener('change', () => scriptKind(t));
  q('.p-create').addEventListener('click', act(() => saveScript(t, false), t.errorBox));
  q('.p-replace').addEventListener('click', act(() => saveScript(t, true), t.errorBox));
  q('.p-delete').addEventListener('click', act(() => deleteScript(t), t.errorBox));
  q('.p-run').addEventListener('click', act(() => runProcedure(t), t.errorBox));
  scriptKind(t);
  await act(() => listScripts(t), t.errorBox)();
};

function scriptKind(t) {
  const kind = t.q('.p-kind').value;
  t.q('.p-trigger-opts').hidden = kind !== 'triggers';
  t.q('.p-run-bar').hidden = kind !== 'procedures';
  return kind;
}

async function listScripts(t) {
  const c = await api('GET', `/containers/${enc(t.container)}`);
  for (const kind of ['procedures', 'triggers']) {
    const ul = t.q(`.p-${kind}`);
    ul.textContent = '';
    for (const name of c[kind]) {
      ul.appendChild(node('li', {}, node('button', { type: 'button', class: 'link',
        onclick: act(() => pickScript(t, kind, name), t.errorBox) }, name)));
    }
    if (c[kind].length === 0) ul.appendChild(node('li', { class: 'muted' }, 'none'));
  }
}

async function pickScript(t, kind, name) {
  t.q('.p-kind').value = kind;
  scriptKind(t);
  t.q('.p-name').value = name;
  const r = await api('GET', `/containers/${enc(t.container)}/${kind}/${enc(name)}`);
  const def = r.definition;
  t.ed.setValue(typeof def === 'string' ? def : def.source);
  if (kind === 'triggers') {
    t.q('.p-type').value = def.type;
    t.q('.p-op').value = def.operation;
    t.q('.p-auto').checked = !!def.automatic;
  }
  say(`${kind === 'procedures' ? 'procedure' : 'trigger'} ${name}`);
}

function scriptBody(t) {
  const body = { name: t.q('.p-name').value.trim(), source: t.ed.getValue() };
  if (scriptKind(t) === 'triggers') {
    body.type = t.q('.p-type').value;
    body.operation = t.q('.p-op').value;
    body.automatic = t.q('.p-auto').checked;
  }
  return body;
}

async function saveScript(t, replace) {
  const kind = scriptKind(t);
  const body = scriptBody(t);
  const base = `/containers/${enc(t.container)}/${kind}`;
  if (replace) await api('PUT', `${base}/${enc(body.name)}`, body);
  else await api('POST', base, body);
  await listScripts(t);
  say(`${replace ? 'replaced' : 'created'} ${body.name}`);
}

async function deleteScript(t) {
  const kind = scriptKind(t);
  const name = t.q('.p-name').value.trim();
  await api('DELETE', `/containers/${enc(t.container)}/${kind}/${enc(name)}`);
  await listScripts(t);
  say(`deleted ${name}`);
}

async function runProcedure(t) {
  const name = t.q('.p-name').value.trim();
  t.q('.p-out').textContent = '';
  t.q('.p-log').hidden = true;
  const r = await api('POST', `/containers/${enc(t.container)}/procedures/${enc(name)}/execute`, {
    partition_key: pkValue(t.q('.p-run-pk').value),
    args: parseJSON(t.q('.p-run-args').value || '[]', 'The arguments') });
  showJSON(t.q('.p-out'), r.result, 2);
  const log = (r.info.log || []).map((l) => `log: ${l}`).join('\n');
  t.q('.p-log').textContent = `${log}${log ? '\n' : ''}${counters(r.info)}`;
  t.q('.p-log').hidden = false;
  say(`ran ${name} · ${counters(r.info)}`);
}
// }---------------------------------------------------------------------

// {---------------------------------------------------------------------
// The change feed and processors
// ----------------------------------------------------------------------
BUILD.feed = async (t) => {
  const q = t.q;
  t.errorBox = q('.result-error');
  t.changes = [];
  q('.c-read').addEventListener('click', act(() => readFeed(t, false), t.errorBox));
  q('.c-follow').addEventListener('change', () => {
    clearInterval(t.timer);
    t.timer = null;
    if (q('.c-follow').checked) t.timer = setInterval(act(() => readFeed(t, true), t.errorBox), 1500);
  });
  q('.c-show').addEventListener('click', act(() => showProcessor(t), t.errorBox));
};

async function readFeed(t, cont) {
  const q = t.q;
  let query = `?mode=${enc(q('.c-mode').value)}&max_items=100`;
  query += cont && t.token ? `&continuation=${enc(t.token)}` : `&start=${enc(q('.c-start').value)}`;
  const r = await api('GET', `/containers/${enc(t.container)}/feed${query}`);
  if (!cont) t.changes = [];
  t.changes = t.changes.concat(r.changes);
  t.token = r.info.continuation;
  showJSON(q('.c-rows'), t.changes, 1);
  q('.c-info').textContent = `${t.changes.length} changes · ${counters(r.info)}`;
}

async function showProcessor(t) {
  const q = t.q;
  const name = q('.c-proc').value.trim();
  const mode = q('.c-proc-mode').value;
  const base = `/containers/${enc(t.container)}/processors/${enc(name)}`;
  const st = await api('GET', `${base}${mode ? `?mode=${mode}` : ''}`);
  const out = q('.c-proc-out');
  out.textContent = '';
  out.appendChild(node('p', { class: 'info' },
    `${st.name} (${st.mode}) · lag ${st.lag} · ${st.dead.length} dead letter(s)`));
  const cols = ['range', 'owner', 'expires', 'lag', 'failures', 'attempts', 'delivered'];
  const table = node('table', { class: 'ranges' });
  table.appendChild(node('tr', {}, ...cols.map((c) => node('th', { scope: 'col' }, c))));
  for (const r of st.ranges) {
    table.appendChild(node('tr', {}, ...cols.map((c) => node('td', {},
      c === 'owner' ? (r.owner || '(free)') : c === 'expires' && r.expires !== undefined
        ? `${Math.round(r.expires)} s` : String(r[c] ?? '-')))));
  }
  out.appendChild(table);
  st.dead.forEach((d, i) => {
    out.appendChild(node('div', { class: 'toolbar' },
      `dead letter ${i + 1}: range ${d.range}, ${d.changes.length} change(s), ${d.attempts} attempt(s): ${d.error} `,
      node('button', { type: 'button', class: 'btn', onclick: act(async () => {
        const r = await api('POST', `${base}/redrive`, { letter: i + 1 });
        say(`re-drove: ${r.written} written again, ${r.skipped} skipped · ${r.charge} RU`);
      }, t.errorBox) }, 'Re-drive')));
  });
  if (st.dead.length) {
    out.appendChild(node('button', { type: 'button', class: 'btn danger', onclick: act(async () => {
      if (!confirm('Drop every dead letter of this processor?')) return;
      const r = await api('POST', `${base}/drop`, {});
      say(`dropped ${r.dropped} dead letter(s)`);
      await showProcessor(t);
    }, t.errorBox) }, 'Drop every dead letter'));
  }
  say(`processor ${name}`);
}
// }---------------------------------------------------------------------

async function start() {
  $('tree').addEventListener('keydown', treeKeys);
  $('tabstrip').addEventListener('keydown', tabKeys);
  $('nc-open').addEventListener('click', () => {
    $('new-container').hidden = !$('new-container').hidden;
    if (!$('new-container').hidden) $('nc-name').focus();
  });
  $('nc-cancel').addEventListener('click', () => { $('new-container').hidden = true; });
  $('new-container').addEventListener('submit', act(createContainer));
  window.addEventListener('hashchange', act(followHash));
  const db = await api('GET', '/database');
  $('db-path').textContent = db.path;
  const list = await loadContainers();
  say(`${list.length} containers · ${db.stats.items} items`);
  if (!(await followHash()) && list.length) toggle(list[0].name, true);
}

document.addEventListener('DOMContentLoaded', act(start));
