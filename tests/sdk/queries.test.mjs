// Queries through @azure/cosmos: answered whole by the gateway, paged with
// continuation headers, in one partition or across them; the query plan.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startGateway, rejects } from "./gateway.mjs";

let gw, client, c;
const N = 60;
before(async () => {
  gw = await startGateway();
  client = gw.client();
  const { database } = await client.databases.create({ id: "q" });
  ({ container: c } = await database.containers.create({ id: "c",
    partitionKey: { paths: ["/pk"] } }));
  for (let i = 0; i < N; i++) {
    await c.items.create({ id: `i${String(i).padStart(2, "0")}`, pk: `p${i % 4}`, n: i,
      tags: i % 3 === 0 ? ["a", "b"] : ["c"], cat: i % 2 ? "odd" : "even" });
  }
});
after(() => gw.stop());

// Reads a query page by page; returns the pages' items and tokens.
async function pages(iterator) {
  const out = [];
  while (iterator.hasMoreResults()) {
    const page = await iterator.fetchNext();
    if (page.resources.length === 0 && !page.continuationToken) break;
    out.push(page);
  }
  return out;
}

test("one partition, by option or by the WHERE, with parameters", async () => {
  const { resources, requestCharge } = await c.items.query(
    { query: "SELECT VALUE c.n FROM c WHERE c.n >= @min", parameters: [{ name: "@min", value: 40 }] },
    { partitionKey: "p1" }).fetchAll();
  assert.deepEqual(resources.sort((a, b) => a - b), [41, 45, 49, 53, 57]);
  assert.ok(requestCharge > 0);
  const where = await c.items.query({ query: "SELECT VALUE COUNT(1) FROM c WHERE c.pk = @p",
    parameters: [{ name: "@p", value: "p2" }] }).fetchAll();
  assert.deepEqual(where.resources, [15]);
});

test("cross-partition ORDER BY, TOP, DISTINCT, OFFSET LIMIT, JOIN, aggregates", async () => {
  const all = (q) => c.items.query(q).fetchAll().then((r) => r.resources);
  assert.deepEqual(await all("SELECT TOP 3 VALUE c.n FROM c ORDER BY c.n DESC"), [59, 58, 57]);
  assert.deepEqual(await all("SELECT DISTINCT VALUE c.cat FROM c ORDER BY c.cat"), ["even", "odd"]);
  assert.deepEqual(await all("SELECT VALUE c.n FROM c ORDER BY c.n OFFSET 10 LIMIT 3"), [10, 11, 12]);
  assert.deepEqual(await all("SELECT VALUE COUNT(1) FROM c JOIN t IN c.tags WHERE t = 'a'"), [20]);
  const [agg] = await all("SELECT COUNT(1) AS n, SUM(c.n) AS s, MIN(c.n) AS lo, MAX(c.n) AS hi, "
    + "AVG(c.n) AS mean FROM c");
  assert.deepEqual(agg, { n: 60, s: 1770, lo: 0, hi: 59, mean: 29.5 });
  const proj = await all("SELECT c.id, c.n * 2 AS twice, ARRAY_LENGTH(c.tags) AS k FROM c WHERE c.n = 3");
  assert.deepEqual(proj, [{ id: "i03", twice: 6, k: 2 }]);
  const starts = await all("SELECT VALUE c.id FROM c WHERE STARTSWITH(c.id, 'i5') ORDER BY c.id");
  assert.equal(starts.length, 10);
});

test("GROUP BY, subqueries, LIKE and system functions through the SDK", async () => {
  const all = (q) => c.items.query(q).fetchAll().then((r) => r.resources);
  const groups = await all("SELECT c.cat, COUNT(1) AS n, SUM(c.n) AS s FROM c GROUP BY c.cat");
  groups.sort((a, b) => (a.cat < b.cat ? -1 : 1));
  assert.deepEqual(groups, [{ cat: "even", n: 30, s: 870 }, { cat: "odd", n: 30, s: 900 }]);
  assert.deepEqual(await all("SELECT VALUE c.n FROM c WHERE EXISTS(SELECT VALUE t FROM t IN "
    + "c.tags WHERE t = 'a') AND c.n < 4 ORDER BY c.n"), [0, 3]);
  assert.deepEqual(await all("SELECT VALUE c.id FROM c WHERE c.id LIKE 'i0%' AND c.n BETWEEN 2 AND 3 "
    + "ORDER BY c.id"), ["i02", "i03"]);
  assert.deepEqual(await all("SELECT VALUE ROUND(ABS(-2.6)) FROM c WHERE c.n = 1"), [3]);
});

test("pages with continuation tokens: every item once, in order", async () => {
  const it = c.items.query("SELECT * FROM c ORDER BY c.n DESC", { maxItemCount: 7 });
  const got = await pages(it);
  const ns = got.flatMap((p) => p.resources.map((d) => d.n));
  assert.deepEqual(ns, Array.from({ length: N }, (_, i) => N - 1 - i));
  assert.ok(got.length >= 9, `expected at least 9 pages, got ${got.length}`);
  assert.ok(got.slice(0, -1).every((p) => p.continuationToken), "a token on every page but the last");
  // a token taken to another iterator continues where it was
  const first = await c.items.query("SELECT VALUE c.n FROM c WHERE c.pk = 'p0' ORDER BY c.n",
    { maxItemCount: 5 }).fetchNext();
  assert.deepEqual(first.resources, [0, 4, 8, 12, 16]);
  const next = await c.items.query("SELECT VALUE c.n FROM c WHERE c.pk = 'p0' ORDER BY c.n",
    { maxItemCount: 5, continuationToken: first.continuationToken }).fetchNext();
  assert.deepEqual(next.resources, [20, 24, 28, 32, 36]);
  // readAll pages too, 100 to a page unless told
  const { resources } = await c.items.readAll({ maxItemCount: 25 }).fetchAll();
  assert.equal(resources.length, N);
});

test("an altered continuation token and bad SQL are 400 with the reason", async () => {
  const first = await c.items.query("SELECT * FROM c", { maxItemCount: 5 }).fetchNext();
  const bad = first.continuationToken.slice(0, -3) + "AAA";
  const res = await gw.raw("POST", "/dbs/q/colls/c/docs", {
    body: { query: "SELECT * FROM c", parameters: [] },
    headers: { "content-type": "application/query+json", "x-ms-documentdb-isquery": "true",
      "x-ms-continuation": bad, "x-ms-max-item-count": "5" } });
  assert.equal(res.status, 400);
  assert.match(res.body.message, /continuation/);
  await rejects(assert, c.items.query("SELECT * FORM c").fetchAll(), 400, "expected FROM");
  await rejects(assert, c.items.query("SELECT * FROM c WHERE c.n = @missing").fetchAll(), 400, "not bound");
});

test("the query plan: a static answer the SDK can drive (forceQueryPlan)", async () => {
  const plan = await gw.raw("POST", "/dbs/q/colls/c/docs", {
    body: { query: "SELECT * FROM c" },
    headers: { "content-type": "application/query+json", "x-ms-documentdb-isquery": "true",
      "x-ms-cosmos-is-query-plan-request": "True", "x-ms-cosmos-query-version": "1.4" } });
  assert.equal(plan.status, 200);
  assert.deepEqual(plan.body.queryRanges, [{ min: "", max: "FF", isMinInclusive: true,
    isMaxInclusive: false }]);
  const it = c.items.query("SELECT VALUE c.n FROM c ORDER BY c.n DESC",
    { forceQueryPlan: true, maxItemCount: 20 });
  const ns = (await pages(it)).flatMap((p) => p.resources);
  assert.deepEqual(ns, Array.from({ length: N }, (_, i) => N - 1 - i));
  const { resources } = await c.items.query("SELECT VALUE COUNT(1) FROM c", { forceQueryPlan: true })
    .fetchAll();
  assert.deepEqual(resources, [N]);
});

test("query metrics on request, charges summed over pages", async () => {
  const res = await c.items.query("SELECT * FROM c WHERE c.cat = 'odd'",
    { populateQueryMetrics: true }).fetchAll();
  assert.equal(res.resources.length, 30);
  const metrics = Object.values(res.queryMetrics ?? {})[0];
  assert.ok(metrics, "query metrics are returned");
  assert.equal(metrics.outputDocumentCount, 30);
  const paged = await c.items.query("SELECT * FROM c WHERE c.cat = 'odd'", { maxItemCount: 10 }).fetchAll();
  assert.ok(paged.requestCharge >= res.requestCharge);
});
