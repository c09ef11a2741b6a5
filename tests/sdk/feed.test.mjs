// The change feed through @azure/cosmos: latest version and all versions
// and deletes, from the beginning, from now, from a continuation, for a
// container and for one partition key.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { ChangeFeedStartFrom, ChangeFeedMode } from "@azure/cosmos";
import { startGateway } from "./gateway.mjs";

let gw, client, c;
before(async () => {
  gw = await startGateway();
  client = gw.client();
  const { database } = await client.databases.create({ id: "f" });
  ({ container: c } = await database.containers.create({ id: "c",
    partitionKey: { paths: ["/pk"] },
    changeFeedPolicy: { retentionDuration: 60 } }));
});
after(() => gw.stop());

// Reads a change feed iterator until it reports nothing new (304); returns
// the items and the last continuation token.
async function drain(iterator) {
  const items = [];
  let token;
  for (let k = 0; k < 1000; k++) {
    const res = await iterator.readNext();
    token = res.continuationToken;
    if (res.statusCode === 304) return { items, token };
    assert.equal(res.statusCode, 200);
    items.push(...res.result);
  }
  assert.fail("the feed never ended");
}

test("latest version from the beginning, then from a continuation", async () => {
  for (let i = 0; i < 12; i++) await c.items.create({ id: `a${i}`, pk: `p${i % 3}`, v: 1 });
  await c.items.upsert({ id: "a0", pk: "p0", v: 2 });   // one item, at its latest version
  const it = c.items.getChangeFeedIterator({
    changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 5 });
  const first = await drain(it);
  assert.equal(first.items.length, 12);
  assert.equal(first.items.find((d) => d.id === "a0").v, 2);
  assert.ok(first.token);
  // nothing new: 304 from the same iterator
  assert.equal((await it.readNext()).statusCode, 304);
  await c.items.create({ id: "b0", pk: "p1" });
  await c.items.upsert({ id: "a1", pk: "p1", v: 3 });
  // a new iterator from the saved continuation sees only what came after
  const resumed = c.items.getChangeFeedIterator({
    changeFeedStartFrom: ChangeFeedStartFrom.Continuation(first.token) });
  const later = await drain(resumed);
  assert.deepEqual(later.items.map((d) => d.id), ["b0", "a1"]);
  assert.equal((await drain(it)).items.length, 2);
});

test("from now, and for one partition key", async () => {
  const now = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Now() });
  assert.equal((await now.readNext()).statusCode, 304);
  await c.items.create({ id: "n1", pk: "p2" });
  await c.items.create({ id: "n2", pk: "p9" });
  assert.deepEqual((await drain(now)).items.map((d) => d.id), ["n1", "n2"]);
  const one = c.items.getChangeFeedIterator({
    changeFeedStartFrom: ChangeFeedStartFrom.Beginning("p9") });
  const got = await drain(one);
  assert.deepEqual(got.items.map((d) => d.id), ["n2"]);
  await c.items.create({ id: "n3", pk: "p9" });
  await c.items.create({ id: "n4", pk: "p2" });
  assert.deepEqual((await drain(one)).items.map((d) => d.id), ["n3"]);
  // from a time: what was written at or after it
  await new Promise((r) => setTimeout(r, 1100));
  const t = new Date();
  await new Promise((r) => setTimeout(r, 1100));
  await c.items.create({ id: "t1", pk: "p2" });
  const since = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Time(t) });
  assert.deepEqual((await drain(since)).items.map((d) => d.id), ["t1"]);
});

test("all versions and deletes: creates, replaces, deletes with metadata", async () => {
  const it = c.items.getChangeFeedIterator({
    changeFeedStartFrom: ChangeFeedStartFrom.Now(),
    changeFeedMode: ChangeFeedMode.AllVersionsAndDeletes });
  assert.equal((await it.readNext()).statusCode, 304);
  await c.items.create({ id: "v", pk: "pv", n: 1 });
  await c.items.upsert({ id: "v", pk: "pv", n: 2 });
  await c.item("v", "pv").patch([{ op: "incr", path: "/n", value: 1 }]);
  await c.item("v", "pv").delete();
  const { items, token } = await drain(it);
  assert.deepEqual(items.map((x) => x.metadata.operationType),
    ["create", "replace", "replace", "delete"]);
  assert.deepEqual(items.slice(0, 3).map((x) => x.current.n), [1, 2, 3]);
  const del = items[3];
  assert.equal(del.current, undefined);
  assert.equal(del.metadata.id, "v");
  assert.deepEqual(del.metadata.partitionKey, { pk: "pv" });
  assert.equal(del.previous.n, 3);
  assert.equal(del.metadata.timeToLiveExpired, false);
  assert.ok(items.every((x, k) => k === 0 || x.metadata.lsn > items[k - 1].metadata.lsn));
  assert.ok(token);
  // deletes are not in the latest-version feed
  const latest = await drain(c.items.getChangeFeedIterator({
    changeFeedStartFrom: ChangeFeedStartFrom.Beginning("pv") }));
  assert.equal(latest.items.length, 0);
});

test("a bad continuation is 400; a feed of part of the key range is refused", async () => {
  const res = await gw.raw("GET", "/dbs/f/colls/c/docs", {
    headers: { "a-im": "Incremental Feed", "x-ms-documentdb-partitionkeyrangeid": "0",
      "if-none-match": '"garbage"' } });
  assert.equal(res.status, 400);
  const part = await gw.raw("GET", "/dbs/f/colls/c/docs", {
    headers: { "a-im": "Incremental Feed", "x-ms-start-epk": "10", "x-ms-end-epk": "20" } });
  assert.equal(part.status, 400);
  const ok = await gw.raw("GET", "/dbs/f/colls/c/docs", {
    headers: { "a-im": "Incremental feed", "x-ms-documentdb-partitionkeyrangeid": "0",
      "x-ms-max-item-count": "2" } });
  assert.equal(ok.status, 200);
  assert.equal(ok.body.Documents.length, 2);
  assert.equal(ok.headers.get("x-ms-item-count"), "2");
  assert.match(ok.headers.get("etag"), /^".+"$/);
});
