// Stored procedures and triggers written in Lua, registered and run
// through @azure/cosmos's script calls.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { TriggerType, TriggerOperation } from "@azure/cosmos";
import { startGateway, rejects } from "./gateway.mjs";

let gw, client, c;
before(async () => {
  gw = await startGateway();
  client = gw.client();
  const { database } = await client.databases.create({ id: "s" });
  ({ container: c } = await database.containers.create({ id: "posts",
    partitionKey: { paths: ["/postId"] } }));
});
after(() => gw.stop());

// A procedure in Lua: tags a post and records the change, in one step.
const TAG = `
return function(ctx, postId, change)
  local post, msg, status = ctx:read(postId)
  if not post then ctx:abort(msg, status) end
  post.tags = post.tags or regolith.array()
  post.tags[#post.tags + 1] = change.tag
  local ok, err = ctx:replace(post)
  if not ok then ctx:abort(err, 500) end
  change.postId = postId
  assert(ctx:create(change))
  ctx:log("tags:", #post.tags)
  return #post.tags
end`;

test("a procedure: create, read its source, list, execute atomically, replace, delete", async () => {
  const { resource, statusCode } = await c.scripts.storedProcedures.create({
    id: "tag", body: TAG });
  assert.equal(statusCode, 201);
  assert.equal(resource.body, TAG);
  assert.ok(resource._rid && resource._self && resource._etag);
  const { resource: read } = await c.scripts.storedProcedure("tag").read();
  assert.equal(read.body, TAG);
  const { resources } = await c.scripts.storedProcedures.readAll().fetchAll();
  assert.deepEqual(resources.map((s) => s.id), ["tag"]);
  await c.items.create({ id: "p1", postId: "p1" });
  const run = await c.scripts.storedProcedure("tag").execute("p1",
    ["p1", { id: "c1", tag: "first" }], { enableScriptLogging: true });
  assert.equal(run.resource, 1);
  assert.ok(run.requestCharge > 10, `the procedure's writes are charged, got ${run.requestCharge}`);
  assert.equal(decodeURIComponent(run.headers["x-ms-documentdb-script-log-results"]), "tags: 1");
  assert.equal((await c.item("c1", "p1").read()).resource.tag, "first");
  // the same comment again: the create fails, the replace is rolled back
  await rejects(assert, c.scripts.storedProcedure("tag").execute("p1",
    ["p1", { id: "c1", tag: "again" }]), 400);
  assert.deepEqual((await c.item("p1", "p1").read()).resource.tags, ["first"]);
  // ctx:abort with a status: the status comes back
  await rejects(assert, c.scripts.storedProcedure("tag").execute("p9",
    ["p9", { id: "c2" }]), 404, "aborted");
  // replace and delete
  await c.scripts.storedProcedure("tag").replace({ id: "tag",
    body: "return function(ctx, x) return { got = x, pk = ctx.partition_key } end" });
  const again = await c.scripts.storedProcedure("tag").execute("p1", [{ a: [1, null] }]);
  assert.deepEqual(again.resource, { got: { a: [1, null] }, pk: "p1" });
  await c.scripts.storedProcedure("tag").delete();
  await rejects(assert, c.scripts.storedProcedure("tag").read(), 404);
  await rejects(assert, c.scripts.storedProcedure("tag").execute("p1", []), 404);
});

test("a JavaScript body is refused with the reason; Lua that does not compile too", async () => {
  const err = await rejects(assert, c.scripts.storedProcedures.create({ id: "js",
    body: function () { return 1; } }), 400, "Lua in regolith");
  assert.match(err.message, /compile/);
  await rejects(assert, c.scripts.storedProcedures.create({ id: "bad", body: "return 42" }), 400,
    "Lua in regolith");
  const raw = await gw.raw("POST", "/dbs/s/colls/posts/sprocs",
    { body: { id: "x?y", body: "return function() end" } });
  assert.equal(raw.status, 400);
  const { resources } = await c.scripts.storedProcedures.readAll().fetchAll();
  assert.deepEqual(resources, []);
});

test("execute in the none partition: execute(undefined)", async () => {
  const { container: plain } = await client.database("s").containers.create({ id: "plain" });
  await plain.scripts.storedProcedures.create({ id: "add", body:
    "return function(ctx, id) assert(ctx:create({ id = id })) "
    + "return ctx:query('SELECT VALUE COUNT(1) FROM c')[1] end" });
  assert.equal((await plain.scripts.storedProcedure("add").execute(undefined, ["a"])).resource, 1);
  assert.equal((await plain.scripts.storedProcedure("add").execute(undefined, ["b"])).resource, 2);
  assert.equal((await plain.item("b", undefined).read()).statusCode, 200);
});

test("triggers: pre and post, named by the write, in Lua", async () => {
  const { resource } = await c.scripts.triggers.create({ id: "stamp",
    triggerType: TriggerType.Pre, triggerOperation: TriggerOperation.Create,
    body: "return function(ctx) local d = ctx:body(); d.stamped = true; ctx:set_body(d) end" });
  assert.equal(resource.triggerType, TriggerType.Pre);
  assert.equal(resource.triggerOperation, TriggerOperation.Create);
  await c.scripts.triggers.create({ id: "count",
    triggerType: TriggerType.Post, triggerOperation: TriggerOperation.All,
    body: `return function(ctx)
      local n = ctx:query("SELECT VALUE COUNT(1) FROM c")[1]
      assert(ctx:upsert({ id = "counter", postId = ctx.partition_key, n = n }))
    end` });
  await c.scripts.triggers.create({ id: "upd", triggerType: TriggerType.Pre,
    triggerOperation: TriggerOperation.Update, body: "return function(ctx) end" });
  const { resource: upd } = await c.scripts.trigger("upd").read();
  assert.equal(upd.triggerOperation, TriggerOperation.Update);
  const { resources } = await c.scripts.triggers.readAll().fetchAll();
  assert.deepEqual(resources.map((t) => t.id).sort(), ["count", "stamp", "upd"]);
  const created = await c.items.create({ id: "t1", postId: "tp" },
    { preTriggerInclude: ["stamp"], postTriggerInclude: ["count"] });
  assert.equal(created.resource.stamped, true);
  assert.equal((await c.item("counter", "tp").read()).resource.n, 1);
  // a trigger of another operation, of the other type, or two of one kind: 400
  await rejects(assert, c.items.upsert({ id: "t1", postId: "tp" }, { preTriggerInclude: ["stamp"] }), 400);
  await rejects(assert, c.items.create({ id: "t2", postId: "tp" }, { postTriggerInclude: ["stamp"] }), 400);
  await rejects(assert, c.items.create({ id: "t2", postId: "tp" },
    { preTriggerInclude: ["stamp", "upd"] }), 400, "one pre-trigger");
  await rejects(assert, c.items.create({ id: "t2", postId: "tp" }, { preTriggerInclude: ["nope"] }), 404);
  // a failing post-trigger rolls the write back
  await c.scripts.trigger("count").replace({ id: "count", triggerType: "Post",
    triggerOperation: "All", body: "return function(ctx) ctx:abort('no', 409) end" });
  await rejects(assert, c.items.create({ id: "t3", postId: "tp" }, { postTriggerInclude: ["count"] }), 409);
  assert.equal((await c.item("t3", "tp").read()).statusCode, 404);
  await c.scripts.trigger("upd").delete();
  await rejects(assert, c.scripts.trigger("upd").read(), 404);
});

test("user-defined functions: none, and creating one says why not", async () => {
  const { resources } = await c.scripts.userDefinedFunctions.readAll().fetchAll();
  assert.deepEqual(resources, []);
  await rejects(assert, c.scripts.userDefinedFunctions.create({ id: "f", body: "function() {}" }),
    400, "not supported");
});
