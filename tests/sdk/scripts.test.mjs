// Stored procedures, triggers and user-defined functions, in Lua and in
// JavaScript (Microsoft's published samples among them, written here as the
// SDK's users write them), registered and run through @azure/cosmos's
// script calls.
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

test("a body that does not compile is refused with the reason, naming ES2015 syntax", async () => {
  await rejects(assert, c.scripts.storedProcedures.create({ id: "arrow",
    body: "function arrow() { var f = (x) => x; }" }), 400, "an arrow function");
  await rejects(assert, c.scripts.storedProcedures.create({ id: "bad", body: "return 42" }), 400,
    "must return a function");
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

// Microsoft's bulk import sample (its article on bounded execution), as the
// SDK's users pass it: the function itself, which the SDK sends as text.
function bulkImport(items) {
  var container = getContext().getCollection();
  var containerLink = container.getSelfLink();
  var count = 0;
  if (!items) throw new Error("The array is undefined or null.");
  var itemsLength = items.length;
  if (itemsLength == 0) {
    getContext().getResponse().setBody(0);
  }
  tryCreate(items[count], callback);
  function tryCreate(item, callback) {
    var isAccepted = container.createDocument(containerLink, item, callback);
    if (!isAccepted) getContext().getResponse().setBody(count);
  }
  function callback(err, item, options) {
    if (err) throw err;
    count++;
    if (count >= itemsLength) {
      getContext().getResponse().setBody(count);
    } else {
      tryCreate(items[count], callback);
    }
  }
}

// The bulk delete sample (azure-cosmosdb-js-server), shortened: deletes
// what a query finds, by the documents' _self links.
function bulkDelete(query) {
  var collection = getContext().getCollection();
  var response = getContext().getResponse();
  var body = { deleted: 0, continuation: true };
  tryQueryAndDelete();
  function tryQueryAndDelete(continuation) {
    var accepted = collection.queryDocuments(collection.getSelfLink(), query,
      { continuation: continuation }, function (err, docs, options) {
        if (err) throw err;
        if (docs.length > 0) tryDelete(docs);
        else if (options.continuation) tryQueryAndDelete(options.continuation);
        else { body.continuation = false; response.setBody(body); }
      });
    if (!accepted) response.setBody(body);
  }
  function tryDelete(docs) {
    if (docs.length > 0) {
      var accepted = collection.deleteDocument(docs[0]._self, {}, function (err) {
        if (err) throw err;
        body.deleted++;
        docs.shift();
        tryDelete(docs);
      });
      if (!accepted) response.setBody(body);
    } else {
      tryQueryAndDelete();
    }
  }
}

// The counter of the update sample: {$inc: {field: n}} on a document by id.
function incrementer(id, update) {
  var collection = getContext().getCollection();
  collection.queryDocuments(collection.getSelfLink(),
    { query: "SELECT * FROM root r WHERE r.id = @id", parameters: [{ name: "@id", value: id }] },
    function (err, documents) {
      if (err) throw err;
      if (documents.length === 0) throw new Error("Document not found.");
      var doc = documents[0];
      Object.keys(update.$inc).forEach(function (f) {
        doc[f] = (doc[f] || 0) + update.$inc[f];
      });
      collection.replaceDocument(doc._self, doc, { etag: doc._etag }, function (err, updated) {
        if (err) throw err;
        getContext().getResponse().setBody(updated);
      });
    });
}

test("JavaScript procedures: Microsoft's bulk import, bulk delete and update samples", async () => {
  const { container: js } = await client.database("s").containers.create({ id: "js",
    partitionKey: { paths: ["/pk"] } });
  await js.scripts.storedProcedures.create({ id: "bulkImport", body: bulkImport });
  await js.scripts.storedProcedures.create({ id: "bulkDelete", body: bulkDelete });
  await js.scripts.storedProcedures.create({ id: "incrementer", body: incrementer });
  const { resource: sproc } = await js.scripts.storedProcedure("bulkImport").read();
  assert.match(sproc.body, /^function bulkImport\(items\)/);
  const docs = [];
  for (let i = 0; i < 500; i++) docs.push({ id: "d" + i, pk: "a", n: i });
  const imported = await js.scripts.storedProcedure("bulkImport").execute("a", [docs]);
  assert.equal(imported.resource, 500);
  assert.ok(imported.requestCharge > 500);
  const { resources: [count] } = await js.items.query("SELECT VALUE COUNT(1) FROM c",
    { partitionKey: "a" }).fetchAll();
  assert.equal(count, 500);
  // a duplicate fails the whole import, with the create's own status
  await rejects(assert, js.scripts.storedProcedure("bulkImport").execute("b",
    [[{ id: "x", pk: "b" }, { id: "x", pk: "b" }]]), 409);
  assert.equal((await js.item("x", "b").read()).statusCode, 404);
  const deleted = await js.scripts.storedProcedure("bulkDelete").execute("a",
    ["SELECT * FROM c WHERE c.n >= 100"]);
  assert.deepEqual(deleted.resource, { deleted: 400, continuation: false });
  const updated = await js.scripts.storedProcedure("incrementer").execute("a",
    ["d7", { $inc: { counter: 5 } }]);
  assert.equal(updated.resource.counter, 5);
  assert.equal((await js.item("d7", "a").read()).resource.counter, 5);
  // the log of console.log, when asked for
  await js.scripts.storedProcedures.create({ id: "logs", body:
    "function logs(x) { console.log('got %s', x); getContext().getResponse().setBody(x); }" });
  const logged = await js.scripts.storedProcedure("logs").execute("a", ["it"],
    { enableScriptLogging: true });
  assert.equal(logged.resource, "it");
  assert.equal(decodeURIComponent(logged.headers["x-ms-documentdb-script-log-results"]), "got it");
  // what a script throws is 400 with its message; abort gives its status
  await js.scripts.storedProcedures.create({ id: "fails", body:
    "function fails(k) { if (k) getContext().abort({ number: 412, message: 'stale' }); "
    + "throw new Error('mine'); }" });
  await rejects(assert, js.scripts.storedProcedure("fails").execute("a", [false]), 400, "mine");
  await rejects(assert, js.scripts.storedProcedure("fails").execute("a", [true]), 412, "stale");
});

test("JavaScript triggers: the article's pre-trigger and post-trigger", async () => {
  const { container: js } = await client.database("s").containers.create({ id: "jst",
    partitionKey: { paths: ["/pk"] } });
  await js.scripts.triggers.create({ id: "validate", triggerType: TriggerType.Pre,
    triggerOperation: TriggerOperation.Create, body: function validate() {
      var request = getContext().getRequest();
      var item = request.getBody();
      if (!("timestamp" in item)) item.timestamp = new Date().getTime();
      request.setBody(item);
    } });
  await js.scripts.triggers.create({ id: "updateMetadata", triggerType: TriggerType.Post,
    triggerOperation: TriggerOperation.All, body: function updateMetadata() {
      var container = getContext().getCollection();
      var created = getContext().getResponse().getBody();
      var accepted = container.queryDocuments(container.getSelfLink(),
        'SELECT * FROM root r WHERE r.id = "_metadata"', function (err, items) {
          if (err) throw new Error("Error" + err.message);
          if (items.length != 1) throw "Unable to find metadata document";
          var meta = items[0];
          meta.createdItems += 1;
          meta.createdNames += " " + created.id;
          container.replaceDocument(meta._self, meta, function (err) {
            if (err) throw "Unable to update metadata, abort";
          });
        });
      if (!accepted) throw "Unable to update metadata, abort";
    } });
  await js.items.create({ id: "_metadata", pk: "p", createdItems: 0, createdNames: "" });
  const { resource } = await js.items.create({ id: "a", pk: "p" },
    { preTriggerInclude: ["validate"], postTriggerInclude: ["updateMetadata"] });
  assert.equal(typeof resource.timestamp, "number");
  const { resource: meta } = await js.item("_metadata", "p").read();
  assert.equal(meta.createdItems, 1);
  assert.equal(meta.createdNames, " a");
  // no metadata in another partition: the post-trigger fails the create
  await rejects(assert, js.items.create({ id: "b", pk: "q" },
    { postTriggerInclude: ["updateMetadata"] }), 400, "Unable to find metadata document");
  assert.equal((await js.item("b", "q").read()).statusCode, 404);
});

test("user-defined functions: JavaScript and Lua, created, listed, read and called by queries", async () => {
  await c.scripts.userDefinedFunctions.create({ id: "tax", body: function tax(income) {
    if (income == undefined) throw "no input";
    if (income < 1000) return income * 0.1;
    else if (income < 10000) return income * 0.2;
    else return income * 0.4;
  } });
  await c.scripts.userDefinedFunctions.create({ id: "twice", body: "return function(x) return x * 2 end" });
  const { resources } = await c.scripts.userDefinedFunctions.readAll().fetchAll();
  assert.deepEqual(resources.map((u) => u.id).sort(), ["tax", "twice"]);
  const { resource: tax } = await c.scripts.userDefinedFunction("tax").read();
  assert.match(tax.body, /^function tax\(income\)/);
  await c.items.create({ id: "i1", postId: "u", income: 500 });
  await c.items.create({ id: "i2", postId: "u", income: 50000 });
  const { resources: rows } = await c.items.query(
    "SELECT c.id, udf.tax(c.income) AS t, udf.twice(c.income) AS d FROM c WHERE c.postId = 'u' ORDER BY c.id")
    .fetchAll();
  assert.deepEqual(rows, [{ id: "i1", t: 50, d: 1000 }, { id: "i2", t: 20000, d: 100000 }]);
  await c.scripts.userDefinedFunction("tax").replace({ id: "tax", body: "function tax(x) { return 0; }" });
  const { resources: zero } = await c.items.query(
    "SELECT VALUE udf.tax(c.income) FROM c WHERE c.postId = 'u'").fetchAll();
  assert.deepEqual(zero, [0, 0]);
  await c.scripts.userDefinedFunction("tax").delete();
  await rejects(assert, c.scripts.userDefinedFunction("tax").read(), 404);
  await rejects(assert, c.items.query("SELECT VALUE udf.tax(c.income) FROM c").fetchAll(), 404);
});
