// The account, databases, containers and partition key ranges through
// @azure/cosmos; authentication; what regolith does not have.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { Agent } from "node:https";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { startGateway, rejects } from "./gateway.mjs";

let gw, client;
before(async () => {
  gw = await startGateway();
  client = gw.client();
});
after(() => gw.stop());

test("the account names the gateway's own endpoint, Session consistency", async () => {
  const { resource } = await client.getDatabaseAccount();
  assert.equal(resource.consistencyPolicy, "Session");
  assert.deepEqual(resource.writableLocations.map((l) => l.databaseAccountEndpoint),
    [gw.endpoint]);
  const raw = await gw.raw("GET", "/");
  assert.equal(raw.status, 200);
  assert.notEqual(raw.body.id, "localhost");
  assert.match(raw.headers.get("x-ms-activity-id"), /^[0-9a-f-]{36}$/);
});

test("databases: create, read, list, query, 409, 404, delete", async () => {
  const { resource: db, statusCode } = await client.databases.create({ id: "d1" });
  assert.equal(statusCode, 201);
  assert.equal(db.id, "d1");
  assert.match(db._rid, /^[A-Za-z0-9+=-]{8}$/);
  assert.equal(db._self, `dbs/${db._rid}/`);
  assert.ok(db._etag && db._ts);
  await rejects(assert, client.databases.create({ id: "d1" }), 409, "already exists");
  const { database } = await client.databases.createIfNotExists({ id: "d1" });
  assert.equal((await database.read()).resource._rid, db._rid);
  await client.databases.create({ id: "with space é" });
  const { resources: all } = await client.databases.readAll().fetchAll();
  assert.deepEqual(all.map((d) => d.id).sort(), ["d1", "with space é"]);
  const { resources: found } = await client.databases.query({
    query: "SELECT * FROM r WHERE r.id = @id", parameters: [{ name: "@id", value: "with space é" }],
  }).fetchAll();
  assert.equal(found.length, 1);
  assert.equal(found[0]._lsn, undefined);
  await rejects(assert, client.database("nope").read(), 404);
  await client.database("with space é").delete();
  await rejects(assert, client.database("with space é").read(), 404);
  await rejects(assert, client.database("with space é").delete(), 404);
  // (the SDK refuses such ids itself; the gateway does too)
  for (const id of ["a/b", "a?b", "", "x".repeat(256), "trailing "]) {
    const res = await gw.raw("POST", "/dbs", { body: { id } });
    assert.equal(res.status, 400, id);
  }
});

test("containers: create, read, list, query, replace, delete", async () => {
  const db = client.database("d1");
  const { resource: c, statusCode } = await db.containers.create({
    id: "posts",
    partitionKey: { paths: ["/postId"], kind: "Hash", version: 2 },
    indexingPolicy: {
      indexingMode: "consistent", automatic: true,
      includedPaths: [{ path: "/*" }], excludedPaths: [{ path: "/content/?" }],
      compositeIndexes: [[{ path: "/userId", order: "ascending" },
        { path: "/creationDate", order: "descending" }]],
    },
    uniqueKeyPolicy: { uniqueKeys: [{ paths: ["/slug"] }] },
    defaultTtl: -1,
    conflictResolutionPolicy: { mode: "LastWriterWins", conflictResolutionPath: "/_ts" },
  });
  assert.equal(statusCode, 201);
  assert.deepEqual(c.partitionKey.paths, ["/postId"]);
  assert.equal(c.defaultTtl, -1);
  assert.deepEqual(c.uniqueKeyPolicy.uniqueKeys, [{ paths: ["/slug"] }]);
  assert.deepEqual(c.indexingPolicy.excludedPaths.map((p) => p.path).sort(),
    ['/"_etag"/?', "/content/?"]);
  assert.equal(c.indexingPolicy.compositeIndexes[0][1].order, "descending");
  const rid = Buffer.from(c._rid.replace(/-/g, "/"), "base64");
  assert.equal(rid.length, 8);
  assert.ok(rid[4] & 0x80, "a collection RID has the high bit set");
  await rejects(assert, db.containers.create({ id: "posts", partitionKey: { paths: ["/x"] } }), 409);
  // created without a partition key: the SDK's /_partitionKey
  const { resource: plain } = await db.containers.create({ id: "plain" });
  assert.deepEqual(plain.partitionKey.paths, ["/_partitionKey"]);
  const { resources: list } = await db.containers.readAll().fetchAll();
  assert.deepEqual(list.map((x) => x.id).sort(), ["plain", "posts"]);
  const { resources: q } = await db.containers.query(
    "SELECT VALUE c.id FROM c WHERE c.defaultTtl = -1").fetchAll();
  assert.deepEqual(q, ["posts"]);
  const { resource: read } = await db.container("posts").read();
  assert.equal(read._rid, c._rid);
  // replace: a new indexing policy and TTL
  const def = { ...read, defaultTtl: 3600,
    indexingPolicy: { ...read.indexingPolicy, excludedPaths: [{ path: "/secret/?" }] } };
  const { resource: replaced } = await db.container("posts").replace(def);
  assert.equal(replaced.defaultTtl, 3600);
  assert.equal(replaced._rid, c._rid);
  assert.deepEqual(replaced.indexingPolicy.excludedPaths.map((p) => p.path).sort(),
    ['/"_etag"/?', "/secret/?"]);
  assert.equal(replaced.conflictResolutionPolicy.mode, "LastWriterWins");
  await rejects(assert, db.container("posts").replace({ ...def, partitionKey: { paths: ["/other"] } }),
    400, "partition key cannot change");
  await rejects(assert, db.container("nope").read(), 404);
  await db.container("plain").delete();
  await rejects(assert, db.container("plain").read(), 404);
  await rejects(assert, db.containers.create({ id: "v", partitionKey: { paths: ["/a"] },
    indexingPolicy: { spatialIndexes: [{ path: "/loc/*", types: ["Point"] }] } }), 400, "spatial");
  await rejects(assert, db.containers.create({ id: "h4",
    partitionKey: { paths: ["/a", "/b", "/c", "/d"], kind: "MultiHash", version: 2 } }), 400);
});

test("a replaced indexing policy is rebuilt over the items the container holds", async () => {
  const db = client.database("d1");
  const { container } = await db.containers.create({ id: "reidx", partitionKey: { paths: ["/pk"] } });
  for (let i = 0; i < 30; i++) await container.items.create({ id: `i${i}`, pk: `p${i % 3}`, n: i });
  const count = async () => (await container.items.query({
    query: "SELECT VALUE COUNT(1) FROM c WHERE c.n >= 10" }).fetchAll());
  const before = await count();
  const { resource: def } = await container.read();
  await container.replace({ ...def, indexingPolicy: { indexingMode: "consistent",
    includedPaths: [{ path: "/*" }], excludedPaths: [{ path: "/n/?" }] } });
  const after = await count();
  assert.deepEqual(after.resources, before.resources);
  assert.deepEqual(after.resources, [20]);
  assert.ok(after.requestCharge > before.requestCharge, "a scan costs more than a seek");
  await container.replace({ ...def, defaultTtl: 1 });
  await new Promise((r) => setTimeout(r, 2200));
  const { resources: left } = await container.items.query("SELECT VALUE COUNT(1) FROM c").fetchAll();
  assert.deepEqual(left, [0]);
});

test("partition key ranges: one range, 304 on its etag", async () => {
  const c = client.database("d1").container("posts");
  const { resources } = await c.readPartitionKeyRanges().fetchAll();
  assert.equal(resources.length, 1);
  assert.equal(resources[0].id, "0");
  assert.equal(resources[0].maxExclusive, "FF");
  const ranges = await c.getFeedRanges();
  assert.equal(ranges.length, 1);
  const raw = await gw.raw("GET", "/dbs/d1/colls/posts/pkranges");
  assert.equal(raw.status, 200);
  const etag = raw.headers.get("etag");
  const again = await gw.raw("GET", "/dbs/d1/colls/posts/pkranges", { headers: { "if-none-match": etag } });
  assert.equal(again.status, 304);
});

test("every request is signed: a bad signature, key or date is 401", async () => {
  const ok = await gw.raw("GET", "/dbs");
  assert.equal(ok.status, 200);
  const wrongKey = Buffer.alloc(64, 7).toString("base64");
  for (const res of [
    await gw.raw("GET", "/dbs", { signKey: wrongKey }),
    await gw.raw("GET", "/dbs/d1", { date: new Date(Date.now() - 3600e3).toUTCString() }),
    await gw.raw("GET", "/dbs", { headers: { authorization: "type=master&ver=1.0&sig=AAAA" } }),
    await gw.raw("GET", "/dbs", { headers: { authorization: "type=aad&ver=1.0&sig=x" } }),
  ]) {
    assert.equal(res.status, 401);
    assert.equal(res.body.code, "Unauthorized");
    assert.ok(res.body.message);
  }
  const bad = new (await import("@azure/cosmos")).CosmosClient({ endpoint: gw.endpoint, key: wrongKey });
  await rejects(assert, bad.databases.readAll().fetchAll(), 401);
  // the signature covers the decoded path: ids with spaces and non-ASCII
  const res = await gw.raw("GET", "/dbs/" + encodeURIComponent("d1"));
  assert.equal(res.status, 200);
});

test("users and permissions answer 501 with a reason", async () => {
  const res = await gw.raw("GET", "/dbs/d1/users");
  assert.equal(res.status, 501);
  assert.equal(res.body.code, "NotImplemented");
  assert.match(res.body.message, /not supported by regolith/);
  await rejects(assert, client.database("d1").users.create({ id: "u" }), 501);
});

test("errors are Cosmos-shaped and nothing answers 500", async () => {
  const res = await gw.raw("POST", "/dbs/d1/colls", { body: "{not json" });
  assert.equal(res.status, 400);
  assert.deepEqual(Object.keys(res.body).sort(), ["code", "message"]);
  assert.equal((await gw.raw("GET", "/nothing")).status, 404);
  assert.equal((await gw.raw("DELETE", "/dbs")).status, 405);
  assert.doesNotMatch(gw.errorLog(), /\[error\]|\[crit\]|\[alert\]|\[emerg\]/);
});

test("https with the self-signed certificate the start script makes", async () => {
  const tls = await startGateway({ workers: 1, tls: true });
  try {
    assert.match(tls.endpoint, /^https:/);
    const ca = readFileSync(join(tls.prefix, "tls", "cert.pem"));
    const secure = tls.client({ agent: new Agent({ ca }) });
    const { resource } = await secure.databases.create({ id: "over-tls" });
    assert.equal(resource.id, "over-tls");
    const { resources } = await secure.databases.readAll().fetchAll();
    assert.deepEqual(resources.map((d) => d.id), ["over-tls"]);
    // without the certificate the connection is refused
    await assert.rejects(tls.client().databases.readAll().fetchAll());
  } finally {
    tls.stop();
  }
});

// Runs Lua 5.4 code with regolith from the checkout, on the gateway's root.
function lua(code) {
  const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
  return execFileSync("lua5.4", ["-e", code], { cwd: root, encoding: "utf8",
    env: { ...process.env, LUA_PATH: "lua/?.lua;lua/?/init.lua;;", LUA_CPATH: "build/lua5.4/?.so;;" } });
}

test("a gateway database is a regolith directory: Lua and the SDK see each other's work", async () => {
  const dir = join(gw.prefix, "data", "made%20in%20Lua");
  lua(`local regolith = require "regolith"
    local db = assert(regolith.open(${JSON.stringify(dir)}))
    local c = assert(db:create_container("things", { partition_key = "/k" }))
    assert(c:create({ id = "a", k = "x", from = "lua" }))
    assert(c:create_procedure("hello", "return function(ctx) return 'hi' end"))
    db:close()`);
  // creating the database adopts the directory and its containers
  await client.databases.create({ id: "made in Lua" });
  const db = client.database("made in Lua");
  const { resources } = await db.containers.readAll().fetchAll();
  assert.deepEqual(resources.map((c) => c.id), ["things"]);
  assert.deepEqual(resources[0].partitionKey.paths, ["/k"]);
  const things = db.container("things");
  assert.equal((await things.item("a", "x").read()).resource.from, "lua");
  const { resource: sp } = await things.scripts.storedProcedure("hello").read();
  assert.match(sp.body, /return 'hi'/);
  assert.equal((await things.scripts.storedProcedure("hello").execute("x", [])).resource, "hi");
  // and the reverse: what the SDK writes is there for Lua
  await things.items.create({ id: "b", k: "y", from: "sdk" });
  await db.containers.create({ id: "fromsdk", partitionKey: { paths: ["/p"] } });
  const out = lua(`local regolith = require "regolith"
    local db = assert(regolith.open(${JSON.stringify(dir)}))
    local c = assert(db:container("things"))
    io.write(assert(c:read("b", "y")).from, " ", table.concat(db:containers(), ","))
    db:close()`);
  assert.equal(out, "sdk fromsdk,things");
  // a container deleted from Lua is gone for the SDK (the cached handle too)
  lua(`local regolith = require "regolith"
    local db = assert(regolith.open(${JSON.stringify(dir)}))
    assert(db:delete_container("things"))
    assert(db:create_container("things", { partition_key = "/other" }))
    db:close()`);
  assert.equal((await things.item("a", "x").read()).statusCode, 404);
  const { resource: again } = await things.read();
  assert.deepEqual(again.partitionKey.paths, ["/other"]);
});
