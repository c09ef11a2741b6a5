// Items through @azure/cosmos: create, read, replace with if-match,
// upsert, delete, patch with a condition, the none partition key, read
// many, transactional batch, bulk, concurrent writers.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { BulkOperationType, PatchOperationType } from "@azure/cosmos";
import { startGateway, rejects } from "./gateway.mjs";

let gw, client, db, c;
before(async () => {
  gw = await startGateway();
  client = gw.client();
  ({ database: db } = await client.databases.create({ id: "items" }));
  ({ container: c } = await db.containers.create({ id: "c", partitionKey: { paths: ["/pk"] } }));
});
after(() => gw.stop());

test("create, read, replace, upsert, delete with statuses, etags and charges", async () => {
  const created = await c.items.create({ id: "a", pk: "p1", n: 1, tags: [], o: {} });
  assert.equal(created.statusCode, 201);
  assert.ok(created.requestCharge >= 5, `a write costs about 5 RU, got ${created.requestCharge}`);
  assert.equal(created.etag, created.resource._etag);
  assert.ok(created.activityId);
  assert.deepEqual(created.resource.tags, []);
  assert.deepEqual(created.resource.o, {});
  await rejects(assert, c.items.create({ id: "a", pk: "p1" }), 409, "already exists");
  const read = await c.item("a", "p1").read();
  assert.equal(read.statusCode, 200);
  // the resource fields of an item: given on the way out, never stored
  // (an item's RID is its container's 8 bytes and the JSON of [id, key])
  const rid = Buffer.from(read.resource._rid.replace(/-/g, "/"), "base64");
  assert.equal(rid.subarray(8).toString(), '["a","p1"]');
  assert.match(read.resource._self, /^dbs\/.+\/colls\/.+\/docs\/.+\/$/);
  assert.equal(read.requestCharge, 1);
  assert.equal(read.resource.n, 1);
  const missing = await c.item("zz", "p1").read();
  assert.equal(missing.statusCode, 404);
  assert.equal(missing.resource, undefined);
  // If-None-Match on a read: 304 while the etag holds
  const notModified = await c.item("a", "p1").read({ accessCondition: { type: "IfNoneMatch",
    condition: created.etag } });
  assert.equal(notModified.statusCode, 304);
  // replace with if-match: 412 once the etag moved
  const replaced = await c.item("a", "p1").replace({ id: "a", pk: "p1", n: 2 },
    { accessCondition: { type: "IfMatch", condition: created.etag } });
  assert.equal(replaced.statusCode, 200);
  assert.notEqual(replaced.etag, created.etag);
  await rejects(assert, c.item("a", "p1").replace({ id: "a", pk: "p1", n: 3 },
    { accessCondition: { type: "IfMatch", condition: created.etag } }), 412);
  await rejects(assert, c.item("nope", "p1").replace({ id: "nope", pk: "p1" }), 404);
  // the document's key must be the one the request names
  await rejects(assert, c.item("a", "p2").replace({ id: "a", pk: "p1", n: 3 }), 400);
  const { resource: again } = await c.item("a", "p1").read();
  await c.item("a", "p1").replace(again);
  const { resources: stored } = await c.items.query(
    "SELECT VALUE IS_DEFINED(c._self) OR IS_DEFINED(c._rid) FROM c WHERE c.id = 'a'").fetchAll();
  assert.deepEqual(stored, [false]);
  // upsert: 201 then 200
  assert.equal((await c.items.upsert({ id: "u", pk: "p1", v: 1 })).statusCode, 201);
  const up = await c.items.upsert({ id: "u", pk: "p1", v: 2 });
  assert.equal(up.statusCode, 200);
  assert.equal(up.resource.v, 2);
  // unique keys within a logical partition (an item lacking the path
  // counts as one value, as in Cosmos DB)
  const { container: u } = await db.containers.create({ id: "u", partitionKey: { paths: ["/pk"] },
    uniqueKeyPolicy: { uniqueKeys: [{ paths: ["/slug"] }] } });
  await u.items.create({ id: "s1", pk: "p1", slug: "x" });
  await rejects(assert, u.items.create({ id: "s2", pk: "p1", slug: "x" }), 409);
  await u.items.create({ id: "s2", pk: "p2", slug: "x" });
  await u.items.create({ id: "s3", pk: "p1" });
  await rejects(assert, u.items.create({ id: "s4", pk: "p1" }), 409);
  // delete: 204, 404, 412
  await rejects(assert, c.item("u", "p1").delete({ accessCondition: { type: "IfMatch",
    condition: created.etag } }), 412);
  const del = await c.item("u", "p1").delete();
  assert.equal(del.statusCode, 204);
  await rejects(assert, c.item("u", "p1").delete(), 404);
});

test("ids with spaces and non-ASCII characters, values of every JSON type", async () => {
  const doc = { id: "a b/é?".replace(/[/?]/g, "_"), pk: "p é", big: 9007199254740991,
    f: 1.5, nul: null, arr: [1, "two", [3], { four: 4 }], t: true };
  await c.items.create(doc);
  const { resource } = await c.item(doc.id, "p é").read();
  for (const k of Object.keys(doc)) assert.deepEqual(resource[k], doc[k], k);
  // null and numbers and booleans are partition key values too
  await c.items.create({ id: "n", pk: null });
  await c.items.create({ id: "n", pk: 7 });
  await c.items.create({ id: "n", pk: false });
  assert.equal((await c.item("n", null).read()).resource.pk, null);
  assert.equal((await c.item("n", 7).read()).resource.pk, 7);
  assert.equal((await c.item("n", false).read()).resource.pk, false);
});

test("patch with a condition: the ops, 412 when the condition is false", async () => {
  await c.items.create({ id: "p", pk: "p1", count: 1, list: [1], gone: true, from: "x" });
  const { resource, statusCode } = await c.item("p", "p1").patch({
    operations: [
      { op: PatchOperationType.incr, path: "/count", value: 2 },
      { op: PatchOperationType.add, path: "/list/-", value: 2 },
      { op: PatchOperationType.set, path: "/new", value: { a: 1 } },
      { op: PatchOperationType.replace, path: "/list/0", value: 0 },
      { op: PatchOperationType.remove, path: "/gone" },
      { op: "move", from: "/from", path: "/to" },   // not in the SDK's enum, in the wire format
    ],
    condition: "FROM c WHERE c.count = 1",
  });
  assert.equal(statusCode, 200);
  assert.equal(resource.count, 3);
  assert.deepEqual(resource.list, [0, 2]);
  assert.deepEqual(resource.new, { a: 1 });
  assert.equal(resource.gone, undefined);
  assert.equal(resource.to, "x");
  await rejects(assert, c.item("p", "p1").patch({
    operations: [{ op: "incr", path: "/count", value: 1 }],
    condition: "FROM c WHERE c.count = 1" }), 412);
  await rejects(assert, c.item("p", "p1").patch([{ op: "remove", path: "/absent" }]), 400);
  await rejects(assert, c.item("p", "p1").patch([{ op: "set", path: "/pk", value: "other" }]), 400);
  assert.equal((await c.item("p", "p1").read()).resource.count, 3);
});

test("items without the partition key: the none value, apart from null", async () => {
  // a container created without a key gets /_partitionKey, and its items lack it
  const { container: plain } = await db.containers.create({ id: "plain" });
  const { resource, statusCode } = await plain.items.create({ id: "a", v: 1 });
  assert.equal(statusCode, 201);
  assert.equal(resource._partitionKey, undefined);
  await plain.items.create({ id: "a", _partitionKey: null, v: 2 });
  assert.equal((await plain.item("a", undefined).read()).resource.v, 1);
  assert.equal((await plain.item("a", null).read()).resource.v, 2);
  await plain.items.upsert({ id: "a", v: 3 });
  assert.equal((await plain.item("a").read()).resource.v, 3);
  const { resources } = await plain.items.query("SELECT VALUE c.v FROM c").fetchAll();
  assert.deepEqual(resources.sort(), [2, 3]);
  const only = await plain.items.query("SELECT VALUE c.v FROM c", { partitionKey: undefined }).fetchAll();
  assert.ok(only.resources.length >= 1);
  await plain.item("a", undefined).delete();
  assert.equal((await plain.item("a", undefined).read()).statusCode, 404);
  assert.equal((await plain.item("a", null).read()).resource.v, 2);
  // a hierarchical key: none at every level
  const { container: h } = await db.containers.create({ id: "hpk",
    partitionKey: { paths: ["/t", "/u"], kind: "MultiHash", version: 2 } });
  await h.items.create({ id: "x" });
  await h.items.create({ id: "x", t: "a", u: 1 });
  assert.equal((await h.item("x", ["a", 1]).read()).resource.t, "a");
  assert.equal((await h.item("x", [{}, {}]).read()).resource.t, undefined);
  await rejects(assert, h.items.create({ id: "y", t: "only" }), 400);
});

test("read many: the query the SDKs build for it", async () => {
  for (let i = 0; i < 6; i++) await c.items.upsert({ id: `m${i}`, pk: `q${i % 2}`, i });
  const pairs = [["m0", "q0"], ["m3", "q1"], ["m5", "q1"], ["absent", "q0"]];
  const where = pairs.map((_, k) => `(c.id = @id${k} AND c["pk"] = @pk${k})`).join(" OR ");
  const parameters = pairs.flatMap(([id, pk], k) => [{ name: `@id${k}`, value: id },
    { name: `@pk${k}`, value: pk }]);
  const { resources } = await c.items.query({ query: `SELECT * FROM c WHERE ${where}`, parameters })
    .fetchAll();
  assert.deepEqual(resources.map((d) => d.id).sort(), ["m0", "m3", "m5"]);
  const { resources: byIn } = await c.items.query({
    query: "SELECT VALUE c.i FROM c WHERE c.id IN ('m1', 'm3')" }, { partitionKey: "q1" }).fetchAll();
  assert.deepEqual(byIn.sort(), [1, 3]);
});

test("transactional batch: all or nothing, 207 with the failing op and 424s", async () => {
  const ok = await c.items.batch([
    { operationType: "Create", resourceBody: { id: "b1", pk: "B", n: 1 } },
    { operationType: "Upsert", resourceBody: { id: "b2", pk: "B", n: 2 } },
    { operationType: "Read", id: "b1" },
    { operationType: "Patch", id: "b2", resourceBody: { operations: [{ op: "incr", path: "/n", value: 1 }] } },
    { operationType: "Replace", id: "b1", resourceBody: { id: "b1", pk: "B", n: 10 } },
  ], "B");
  assert.equal(ok.code, 200);
  assert.deepEqual(ok.result.map((x) => x.statusCode), [201, 201, 200, 200, 200]);
  assert.equal(ok.result[3].resourceBody.n, 3);
  assert.ok(ok.result[4].eTag);
  const failed = await c.items.batch([
    { operationType: "Create", resourceBody: { id: "b3", pk: "B" } },
    { operationType: "Create", resourceBody: { id: "b1", pk: "B" } },
    { operationType: "Delete", id: "b2" },
  ], "B");
  assert.equal(failed.code, 207);
  assert.deepEqual(failed.result.map((x) => x.statusCode), [424, 409, 424]);
  assert.equal((await c.item("b3", "B").read()).statusCode, 404, "nothing half-written");
  assert.equal((await c.item("b2", "B").read()).resource.n, 3);
  // if-match in a batch
  const { resource: b1 } = await c.item("b1", "B").read();
  const cond = await c.items.batch([
    { operationType: "Replace", id: "b1", ifMatch: '"0-0"', resourceBody: { id: "b1", pk: "B" } },
  ], "B");
  assert.deepEqual(cond.result.map((x) => x.statusCode), [412]);
  assert.equal((await c.item("b1", "B").read()).resource._etag, b1._etag);
  // an op of another partition fails the batch
  const other = await c.items.batch([
    { operationType: "Create", resourceBody: { id: "b9", pk: "B" } },
    { operationType: "Create", resourceBody: { id: "b9", pk: "other" } },
  ], "B");
  assert.deepEqual(other.result.map((x) => x.statusCode), [424, 400]);
  assert.equal((await c.item("b9", "B").read()).statusCode, 404);
});

test("bulk: each operation on its own, statuses and charges per operation", async () => {
  const ops = [];
  for (let i = 0; i < 40; i++) {
    ops.push({ operationType: BulkOperationType.Create, partitionKey: `k${i % 5}`,
      resourceBody: { id: `bulk${i}`, pk: `k${i % 5}`, i } });
  }
  ops.push({ operationType: BulkOperationType.Create, partitionKey: "k0",
    resourceBody: { id: "bulk0", pk: "k0" } });
  ops.push({ operationType: BulkOperationType.Read, partitionKey: "k1", id: "bulk1" });
  ops.push({ operationType: BulkOperationType.Delete, partitionKey: "k2", id: "bulk2" });
  ops.push({ operationType: BulkOperationType.Patch, partitionKey: "k3", id: "bulk3",
    resourceBody: { operations: [{ op: "set", path: "/patched", value: true }] } });
  ops.push({ operationType: BulkOperationType.Upsert, partitionKey: "k4",
    resourceBody: { id: "bulk4", pk: "k4", up: true } });
  ops.push({ operationType: BulkOperationType.Replace, partitionKey: "k0", id: "missing",
    resourceBody: { id: "missing", pk: "k0" } });
  const results = await c.items.executeBulkOperations(ops);
  const statuses = results.map((r) => r.response?.statusCode ?? r.error?.code);
  assert.deepEqual(statuses.slice(0, 40), new Array(40).fill(201));
  assert.deepEqual(statuses.slice(40), [409, 200, 204, 200, 200, 404]);
  assert.ok(results[0].response.requestCharge > 0);
  assert.equal((await c.item("bulk3", "k3").read()).resource.patched, true);
  assert.equal((await c.item("bulk2", "k2").read()).statusCode, 404);
});

test("concurrent writers: etags let every increment through exactly once", async () => {
  await c.items.create({ id: "counter", pk: "cc", n: 0 });
  const writers = 8, each = 10;
  let conflicts = 0;
  const clients = Array.from({ length: 4 }, () => gw.client());
  await Promise.all(Array.from({ length: writers }, async (_, w) => {
    const item = clients[w % clients.length].database("items").container("c").item("counter", "cc");
    for (let k = 0; k < each; k++) {
      for (;;) {
        const { resource } = await item.read();
        try {
          await item.replace({ ...resource, n: resource.n + 1 },
            { accessCondition: { type: "IfMatch", condition: resource._etag } });
          break;
        } catch (err) {
          assert.equal(err.code, 412);
          conflicts++;
        }
      }
    }
  }));
  assert.equal((await c.item("counter", "cc").read()).resource.n, writers * each);
  // concurrent creates of one id: exactly one wins
  const tries = await Promise.allSettled(Array.from({ length: 10 }, (_, k) =>
    clients[k % clients.length].database("items").container("c").items.create({ id: "race", pk: "cc", k })));
  assert.equal(tries.filter((t) => t.status === "fulfilled").length, 1);
  assert.ok(tries.filter((t) => t.status === "rejected").every((t) => t.reason.code === 409));
  assert.ok(conflicts >= 0);
});
