// Resource ids, offers and hierarchical key prefixes through the gateway:
// RID-addressed paths (the _self links the Python, .NET and Java SDKs
// follow) signed as the SDKs sign them; throughput offers made from the
// budgets (docs/throughput.md); queries on a prefix of a MultiHash key.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { PartitionKeyKind } from "@azure/cosmos";
import { startGateway, rejects } from "./gateway.mjs";

let gw, client;
before(async () => {
  gw = await startGateway();
  client = gw.client();
});
after(() => gw.stop());

// A raw request on a RID-addressed path, signed with its last RID.
function byRid(method, path, options = {}) {
  const segs = path.split("/").filter((s) => s !== "");
  const rid = segs.length % 2 === 0 ? segs[segs.length - 1] : segs[segs.length - 2];
  return gw.raw(method, path, { ...options, signLink: (rid ?? "").toLowerCase() });
}

test("every resource has a stable _rid and _self that address it again", async () => {
  const { database, resource: db } = await client.databases.create({ id: "rid db" });
  const { container, resource: coll } = await database.containers.create({ id: "items",
    partitionKey: { paths: ["/pk"] } });
  assert.equal(db._self, `dbs/${db._rid}/`);
  assert.equal(coll._self, `dbs/${db._rid}/colls/${coll._rid}/`);
  const { resource: item } = await container.items.create({ id: "a b", pk: "p", n: 1 });
  const { resource: again } = await container.item("a b", "p").read();
  assert.equal(again._rid, item._rid);
  assert.equal(again._self, `dbs/${db._rid}/colls/${coll._rid}/docs/${item._rid}/`);
  const { resource: sproc } = await container.scripts.storedProcedures.create({ id: "hello",
    body: "function hello(x) { getContext().getResponse().setBody('hi ' + x); }" });

  // read each by its _self
  let res = await byRid("GET", "/" + db._self);
  assert.equal(res.status, 200);
  assert.equal(res.body.id, "rid db");
  res = await byRid("GET", "/" + coll._self);
  assert.equal(res.status, 200);
  assert.equal(res.body.id, "items");
  res = await byRid("GET", "/" + item._self, { headers: { "x-ms-documentdb-partitionkey": '["p"]' } });
  assert.equal(res.status, 200);
  assert.equal(res.body.id, "a b");
  // the item's RID names its partition key too
  res = await byRid("GET", "/" + item._self);
  assert.equal(res.status, 200);
  res = await byRid("PUT", "/" + item._self, { body: { id: "a b", pk: "p", n: 2 } });
  assert.equal(res.status, 200);
  assert.equal((await container.item("a b", "p").read()).resource.n, 2);
  res = await byRid("POST", "/" + sproc._self, { body: ["you"],
    headers: { "x-ms-documentdb-partitionkey": '["p"]' } });
  assert.equal(res.status, 200);
  assert.equal(res.body, "hi you");
  // feeds under a RID: a container created, items listed
  res = await byRid("POST", `/dbs/${db._rid}/colls`, { body: { id: "more", partitionKey: { paths: ["/pk"] } } });
  assert.equal(res.status, 201);
  assert.equal(res.body.id, "more");
  res = await byRid("GET", `/dbs/${db._rid}/colls/${coll._rid}/docs`);
  assert.equal(res.status, 200);
  assert.equal(res.body.Documents.length, 1);
  res = await byRid("DELETE", "/" + item._self);
  assert.equal(res.status, 204);
  assert.equal((await container.item("a b", "p").read()).statusCode, 404);
});

test("an address that resolves to nothing is 404 with a message, and a bad key is still 401", async () => {
  const { resource: db } = await client.databases.create({ id: "rid404" });
  for (const path of ["/dbs/AAAAAA==", `/dbs/${db._rid}/colls/AAAAAIAAAAA=`,
                      `/dbs/${db._rid}/colls/AAAAAIAAAAA=/docs/AAAA`]) {
    const res = await byRid("GET", path);
    assert.equal(res.status, 404, path);
    assert.match(res.body.message, /Resource Not Found/);
  }
  const res = await gw.raw("GET", "/" + db._self,
    { signLink: db._rid.toLowerCase(), signKey: Buffer.alloc(64, 1).toString("base64") });
  assert.equal(res.status, 401);
});

test("offers: the throughput of a create, read, queried and replaced, manual and autoscale", async () => {
  const { database } = await client.databases.create({ id: "offers", throughput: 1000 });
  const { container: manual } = await database.containers.create({ id: "manual",
    partitionKey: { paths: ["/pk"] }, throughput: 400 });
  const { container: auto } = await database.containers.create({ id: "auto",
    partitionKey: { paths: ["/pk"] }, maxThroughput: 4000 });
  const { container: shared } = await database.containers.create({ id: "shared",
    partitionKey: { paths: ["/pk"] } });

  const { resource: offer, offer: handle } = await manual.readOffer();
  assert.equal(offer.content.offerThroughput, 400);
  assert.equal(offer.offerResourceId, (await manual.read()).resource._rid);
  const { resource: autoOffer } = await auto.readOffer();
  assert.equal(autoOffer.content.offerAutopilotSettings.maxThroughput, 4000);
  assert.equal((await shared.readOffer()).resource, undefined);
  const { resource: dbOffer } = await database.readOffer();
  assert.equal(dbOffer.content.offerThroughput, 1000);

  const { resources: all } = await client.offers.readAll().fetchAll();
  assert.equal(all.length >= 3, true);
  const { resource: byId } = await client.offer(offer.id).read();
  assert.equal(byId.content.offerThroughput, 400);

  offer.content.offerThroughput = 1200;
  const { resource: replaced } = await handle.replace(offer);
  assert.equal(replaced.content.offerThroughput, 1200);
  assert.equal((await manual.readOffer()).resource.content.offerThroughput, 1200);
  // the budget is regolith's: a request over it answers 429, which the SDK retries
  await rejects(assert, client.offer("AAAAAA==").read(), 404);
});

test("a query on a prefix of a hierarchical partition key", async () => {
  const { database } = await client.databases.create({ id: "hpk" });
  const { container } = await database.containers.create({ id: "events",
    partitionKey: { paths: ["/tenant", "/user"], kind: PartitionKeyKind.MultiHash, version: 2 } });
  for (const [tenant, user, i] of [["t1", "u1", 1], ["t1", "u2", 2], ["t2", "u1", 3]]) {
    await container.items.create({ id: "e" + i, tenant, user, i });
  }
  const { resources } = await container.items.query("SELECT VALUE c.i FROM c ORDER BY c.i",
    { partitionKey: ["t1"] }).fetchAll();
  assert.deepEqual(resources, [1, 2]);
  const { resources: one } = await container.items.query("SELECT VALUE c.i FROM c",
    { partitionKey: ["t1", "u2"] }).fetchAll();
  assert.deepEqual(one, [2]);
});
