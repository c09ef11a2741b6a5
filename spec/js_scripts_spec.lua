-- Procedures, triggers and user-defined functions in JavaScript, through
-- Cosmos DB's server-side API (docs/scripts.md, JavaScript): the samples
-- Microsoft publishes for it (bulk import, bulk delete, count, update with
-- $inc-style operators, the pre- and post-trigger of its article, the tax
-- UDF) run as they are written.
local regolith = require "regolith"
local H = require "helper"

local json = regolith.json

-- The bulk import sample of Microsoft's article on bounded execution.
local BULK_IMPORT = [==[
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
}]==]

-- The bulk delete sample (azure-cosmosdb-js-server), with its continuation.
local BULK_DELETE = [==[
function bulkDeleteSproc(query) {
    var collection = getContext().getCollection();
    var collectionLink = collection.getSelfLink();
    var response = getContext().getResponse();
    var responseBody = { deleted: 0, continuation: true };
    if (!query) throw new Error("The query is undefined or null.");
    tryQueryAndDelete();
    function tryQueryAndDelete(continuation) {
        var requestOptions = {continuation: continuation};
        var isAccepted = collection.queryDocuments(collectionLink, query, requestOptions, function (err, retrievedDocs, responseOptions) {
            if (err) throw err;
            if (retrievedDocs.length > 0) {
                tryDelete(retrievedDocs);
            } else if (responseOptions.continuation) {
                tryQueryAndDelete(responseOptions.continuation);
            } else {
                responseBody.continuation = false;
                response.setBody(responseBody);
            }
        });
        if (!isAccepted) {
            response.setBody(responseBody);
        }
    }
    function tryDelete(documents) {
        if (documents.length > 0) {
            var isAccepted = collection.deleteDocument(documents[0]._self, {}, function (err, responseOptions) {
                if (err) throw err;
                responseBody.deleted++;
                documents.shift();
                tryDelete(documents);
            });
            if (!isAccepted) {
                response.setBody(responseBody);
            }
        } else {
            tryQueryAndDelete();
        }
    }
}]==]

-- The count sample: pages of 25 through readDocuments or queryDocuments,
-- returning a continuation when it stops.
local COUNT = [==[
function count(filterQuery, continuationToken) {
    var collection = getContext().getCollection();
    var maxResult = 25;
    var result = 0;
    tryQuery(continuationToken);
    function tryQuery(nextContinuationToken) {
        var responseOptions = { continuation: nextContinuationToken, pageSize : maxResult };
        if (result >= maxResult || !query(responseOptions)) {
            setBody(nextContinuationToken);
        }
    }
    function query(responseOptions) {
        return (filterQuery && filterQuery.length) ?
            collection.queryDocuments(collection.getSelfLink(), filterQuery, responseOptions, onReadDocuments) :
            collection.readDocuments(collection.getSelfLink(), responseOptions, onReadDocuments);
    }
    function onReadDocuments(err, docFeed, responseOptions) {
        if (err) {
            throw 'Error while reading document: ' + err;
        }
        result += docFeed.length;
        if (responseOptions.continuation) {
            tryQuery(responseOptions.continuation);
        } else {
            setBody(null);
        }
    }
    function setBody(continuationToken) {
        var body = { count: result, continuationToken: continuationToken };
        getContext().getResponse().setBody(body);
    }
}]==]

-- The update sample, with its MongoDB-style operators (a part of them).
local UPDATE = [==[
function updateSproc(id, update) {
    var collection = getContext().getCollection();
    var collectionLink = collection.getSelfLink();
    var response = getContext().getResponse();
    if (!id) throw new Error("The id is undefined or null.");
    if (!update) throw new Error("The update is undefined or null.");
    tryQueryAndUpdate();
    function tryQueryAndUpdate(continuation) {
        var query = {query: "select * from root r where r.id = @id", parameters: [{name: "@id", value: id}]};
        var requestOptions = {continuation: continuation};
        var isAccepted = collection.queryDocuments(collectionLink, query, requestOptions, function (err, documents, responseOptions) {
            if (err) throw err;
            if (documents.length > 0) {
                tryUpdate(documents[0]);
            } else if (responseOptions.continuation) {
                tryQueryAndUpdate(responseOptions.continuation);
            } else {
                throw new Error("Document not found.");
            }
        });
        if (!isAccepted) {
            throw new Error("The stored procedure timed out.");
        }
    }
    function tryUpdate(document) {
        var requestOptions = {etag: document._etag};
        inc(document, update);
        set(document, update);
        unset(document, update);
        push(document, update);
        var isAccepted = collection.replaceDocument(document._self, document, requestOptions, function (err, updatedDocument, responseOptions) {
            if (err) throw err;
            response.setBody(updatedDocument);
        });
        if (!isAccepted) {
            throw new Error("The stored procedure timed out.");
        }
    }
    function inc(document, update) {
        var fields, i;
        if (update.$inc) {
            fields = Object.keys(update.$inc);
            for (i = 0; i < fields.length; i++) {
                if (isNaN(update.$inc[fields[i]])) {
                    throw new Error("Bad $inc parameter - value must be a number")
                } else if (document[fields[i]]) {
                    document[fields[i]] += update.$inc[fields[i]];
                } else {
                    document[fields[i]] = update.$inc[fields[i]];
                }
            }
        }
    }
    function set(document, update) {
        var fields, i;
        if (update.$set) {
            fields = Object.keys(update.$set);
            for (i = 0; i < fields.length; i++) {
                document[fields[i]] = update.$set[fields[i]];
            }
        }
    }
    function unset(document, update) {
        var fields, i;
        if (update.$unset) {
            fields = Object.keys(update.$unset);
            for (i = 0; i < fields.length; i++) {
                delete document[fields[i]];
            }
        }
    }
    function push(document, update) {
        var fields, i;
        if (update.$push) {
            fields = Object.keys(update.$push);
            for (i = 0; i < fields.length; i++) {
                if (!Array.isArray(document[fields[i]])) {
                    throw new Error("Bad $push parameter - field in document must be an array.")
                } else {
                    document[fields[i]].push(update.$push[fields[i]]);
                }
            }
        }
    }
}]==]

-- The article's pre-trigger and post-trigger.
local VALIDATE = [==[
function validateToDoItemTimestamp() {
    var context = getContext();
    var request = context.getRequest();
    var itemToCreate = request.getBody();
    if (!("timestamp" in itemToCreate)) {
        var ts = new Date();
        itemToCreate["timestamp"] = ts.getTime();
    }
    request.setBody(itemToCreate);
}]==]

local UPDATE_METADATA = [==[
function updateMetadata() {
    var context = getContext();
    var container = context.getCollection();
    var response = context.getResponse();
    var createdItem = response.getBody();
    var filterQuery = 'SELECT * FROM root r WHERE r.id = "_metadata"';
    var accept = container.queryDocuments(container.getSelfLink(), filterQuery,
        updateMetadataCallback);
    if(!accept) throw "Unable to update metadata, abort";
    function updateMetadataCallback(err, items, responseOptions) {
        if(err) throw new Error("Error" + err.message);
        if(items.length != 1) throw 'Unable to find metadata document';
        var metadataItem = items[0];
        metadataItem.createdItems += 1;
        metadataItem.createdNames += " " + createdItem.id;
        var accept = container.replaceDocument(metadataItem._self,
            metadataItem, function(err, itemReplaced) {
                    if(err) throw "Unable to update metadata, abort";
            });
        if(!accept) throw "Unable to update metadata, abort";
        return;
    }
}]==]

local TAX = [==[
function tax(income) {
    if (income == undefined)
        throw 'no input';
    if (income < 1000)
        return income * 0.1;
    else if (income < 10000)
        return income * 0.2;
    else
        return income * 0.4;
}]==]

-- A database for these specs.  On a cluster the bulk imports below make
-- write sets of thousands of items, whose apply (one Function call) took
-- 5 s on a loaded machine (load 17), past the client's default timeout
-- (5 s: the call was answered 500 in doubt), and whose replica then
-- takes as long to acknowledge it (sync = "full"), past the default
-- wait_timeout (1 s: 500 "not replicated").  The client waits longer for
-- both here, which changes nothing else.  (What no client setting helps:
-- an apply longer than the test cluster's cluster-node-timeout, 2 s,
-- fails its primary over; docs/cluster.md, Weaker than local mode.)
local function open(opts)
  opts = opts or {}
  if H.cluster then
    opts.timeout = 30
    opts.wait_timeout = 10000
  end
  return H.open(opts)
end

describe("JavaScript scripts", function()
  local db, c
  before_each(function()
    db = open()
    c = assert(db:create_container("todo", { partition_key = "/pk" }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  local items = H.items

  describe("telling the language", function()
    it("takes a source opening with a function and its braces, or a JavaScript comment, for JavaScript", function()
      assert(c:create_procedure("a", "function a() { }"))
      assert(c:create_procedure("b", "  /** a doc comment */\nfunction (x, y) {\n}"))
      assert(c:create_procedure("c", "// hello\nfunction c() {}"))
      assert(c:create_procedure("lua", "return function(ctx) return 1 end"))
      assert(c:create_procedure("lua2", "-- a comment\nreturn function(ctx) return 2 end"))
      assert.are.equal(1, (c:execute("lua", "p")))
      assert.are.equal(regolith.null, (c:execute("a", "p")))
      assert.are.equal("function a() { }", (c:procedure("a")))
    end)

    it("refuses a JavaScript source that is not one function", function()
      local ok, msg, status = c:create_procedure("two", "// two functions\nfunction a() {} function b() {}")
      assert.is_nil(ok)
      assert.are.equal(400, status)
      assert.matches("does not compile", msg, 1, true)
      assert.matches("one function", msg, 1, true)
    end)
  end)

  describe("procedures", function()
    it("run the bulk import sample: its documents commit together, through callbacks thousands deep", function()
      assert(c:create_procedure("bulkImport", BULK_IMPORT))
      -- a call's write set is bounded (its transaction's 64 MiB; on a
      -- cluster, one apply's 1,000 items): the sample returns its count and
      -- is called again with the rest
      local counts = H.import_all(c, "bulkImport", "p", items(10000))
      if H.cluster then
        assert.is_true(#counts >= 10, #counts .. " calls")
        for i = 1, #counts do assert.is_true(counts[i] <= 1000, tostring(counts[i])) end
      else
        assert.is_true(counts[1] >= 4000, tostring(counts[1]))
      end
      assert.are.same({ 10000 }, assert(c:query("SELECT VALUE COUNT(1) FROM c")))
      -- a duplicate fails the whole import with its status; nothing is kept
      local more = items(5, "q")
      more[4] = { id = "i2", pk = "q" }
      local ok, msg, status = c:execute("bulkImport", "q", more)
      assert.is_nil(ok)
      assert.are.equal(409, status)
      assert.matches("already exists", msg, 1, true)
      assert.are.same({ 0 }, assert(c:query("SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'q'")))
    end)

    it("stop accepting operations near the budget, so that bulk import returns what it did", function()
      local small = open({ script_budget = 3000000 })
      local s = assert(small:create_container("s", { partition_key = "/pk" }))
      assert(s:create_procedure("bulkImport", BULK_IMPORT))
      local n = assert(s:execute("bulkImport", "p", items(5000)))
      assert.is_true(n > 0 and n < 5000, tostring(n))
      assert.are.same({ n }, assert(s:query("SELECT VALUE COUNT(1) FROM c")))
      -- called again with the rest, as the article's client does
      local rest = items(5000)
      local left = {}
      for i = n + 1, #rest do left[#left + 1] = rest[i] end
      H.import_all(s, "bulkImport", "p", left)
      assert.are.same({ 5000 }, assert(s:query("SELECT VALUE COUNT(1) FROM c")))
      small:close()
    end)

    -- a Lua procedure creating n items of partition "p"
    local MANY = [[
      return function(ctx, n)
        for i = 1, n do ctx:create({ id = "m" .. i, pk = "p" }) end
        return n
      end]]

    H.cluster_it("stop accepting operations near the write bound of one call",
                 "the bound of one apply is the cluster's", function()
      assert(c:create_procedure("bulkImport", BULK_IMPORT))
      local n = assert(c:execute("bulkImport", "p", items(1500)))
      -- accepted while more than a tenth of the 1,000 items is left
      assert.is_true(n >= 900 and n < 1000, tostring(n))
      assert.are.same({ n }, assert(c:query("SELECT VALUE COUNT(1) FROM c")))
      -- a call stopped by the bound still commits whole or not at all
      local more = items(1500, "q")
      more[500] = { id = "i2", pk = "q" }
      local ok, msg, status = c:execute("bulkImport", "q", more)
      assert.is_nil(ok)
      assert.are.equal(409, status, msg)
      assert.are.same({ 0 }, assert(c:query("SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'q'")))
    end)

    H.cluster_it("count a call's own writes, not those of the transaction it joins",
                 "the bound of one apply is the cluster's", function()
      -- a processor's batch or a group may hold more than a call may write
      assert(c:create_procedure("many", MANY))
      local res = assert(db:group({
        function()
          for i = 1, 1100 do assert(c:create({ id = "g" .. i, pk = "g" })) end
        end,
        function() return assert(c:execute("many", "p", 10)) end,
      }))
      assert.is_true(res[1][1])
      assert.are.same({ true, 10 }, { res[2][1], res[2][2] })
      assert.are.same({ 1110 }, assert(c:query("SELECT VALUE COUNT(1) FROM c")))
    end)

    H.cluster_it("refuse whole a write set over the bound of one call that does not stop",
                 "the bound of one apply is the cluster's", function()
      -- a Lua procedure that does not ask ctx:is_accepted(): past the
      -- items' bound it is stopped
      assert(c:create_procedure("many", MANY))
      local ok, msg, status = c:execute("many", "p", 1001)
      assert.is_nil(ok)
      assert.are.equal(413, status)
      assert.matches("exceeded the write limit of one call on a cluster (1000 items", msg, 1, true)
      assert.are.same({ 0 }, assert(c:query("SELECT VALUE COUNT(1) FROM c")))
      assert.are.equal(1000, (c:execute("many", "p", 1000)))
      -- and past the bytes' bound, here by a few large items in JavaScript,
      -- whose one operation starts while the bound is not near
      assert(c:create_procedure("big", [==[
        function big(n) {
          var coll = getContext().getCollection(), pad = new Array(1500001).join("x");
          for (var i = 0; i < n; i++)
            coll.createDocument(coll.getSelfLink(), { id: "b" + i, pk: "p", pad: pad });
        }]==]))
      ok, msg, status = c:execute("big", "p", 3)
      assert.is_nil(ok)
      assert.are.equal(413, status, msg)
      assert.matches("4194304 bytes", msg, 1, true)
      assert.are.same({ 0 }, assert(c:query("SELECT VALUE COUNT(1) FROM c WHERE STARTSWITH(c.id, 'b')")))
    end)

    it("run the bulk delete sample, with _self links and the query's continuation", function()
      assert(c:create_procedure("bulkImport", BULK_IMPORT))
      assert(c:execute("bulkImport", "p", items(300)))
      assert(c:create_procedure("bulkDelete", BULK_DELETE))
      local r = assert(c:execute("bulkDelete", "p", "SELECT * FROM c WHERE c.n > 100"))
      assert.are.same({ deleted = 200, continuation = false }, r)
      assert.are.same({ 100 }, assert(c:query("SELECT VALUE COUNT(1) FROM c")))
    end)

    it("run the count sample over pages, readDocuments and queryDocuments", function()
      assert(c:create_procedure("bulkImport", BULK_IMPORT))
      assert(c:execute("bulkImport", "p", items(60)))
      assert(c:create_procedure("count", COUNT))
      -- 25 a call: the sample returns after its first full page
      local r = assert(c:execute("count", "p", ""))
      assert.are.equal(25, r.count)
      assert.is_string(r.continuationToken)
      local total, token = r.count, r.continuationToken
      while token ~= regolith.null and token ~= nil do
        r = assert(c:execute("count", "p", "", token))
        total, token = total + r.count, r.continuationToken
      end
      assert.are.equal(60, total)
      r = assert(c:execute("count", "p", "SELECT * FROM c WHERE c.n <= 10"))
      assert.are.same({ count = 10, continuationToken = regolith.null }, r)
    end)

    it("run the update sample: $inc, $set, $unset and $push with the document's etag", function()
      assert(c:create({ id = "foo", pk = "p", counter = 1, tags = { "a" }, gone = true }))
      assert(c:create_procedure("update", UPDATE))
      local doc = assert(c:execute("update", "p", "foo",
        { ["$inc"] = { counter = 5, fresh = 2 }, ["$set"] = { message = "Hello" },
          ["$unset"] = { gone = "" }, ["$push"] = { tags = "b" } }))
      assert.are.equal(6, doc.counter)
      assert.are.equal(2, doc.fresh)
      assert.are.equal("Hello", doc.message)
      assert.is_nil(doc.gone)
      assert.are.same({ "a", "b" }, doc.tags)
      local stored = assert(c:read("foo", "p"))
      assert.are.equal(6, stored.counter)
      assert.is_nil(stored._self)
      local ok, msg, status = c:execute("update", "p", "nope", { ["$inc"] = { x = 1 } })
      assert.is_nil(ok)
      assert.are.equal(400, status)
      assert.matches("Document not found.", msg, 1, true)
    end)

    it("read, replace, upsert and delete by link, with etags and their statuses", function()
      assert(c:create({ id = "a", pk = "p", v = 1 }))
      assert(c:create_procedure("ops", [[
        function ops() {
          var coll = getContext().getCollection(), out = {};
          var link = coll.getAltLink() + "/docs/a";
          coll.readDocument(link, function (err, doc) {
            out.read = doc.v;
            doc.v = 2;
            coll.replaceDocument(doc._self, doc, { etag: doc._etag }, function (err, d2) {
              out.replaced = d2.v;
              coll.replaceDocument(doc._self, doc, { etag: doc._etag }, function (err) {
                out.stale = err.number;
                coll.readDocument(d2._self, { ifNoneMatch: d2._etag }, function (err, d3, opts) {
                  out.notModified = opts.notModified === true && d3 === undefined;
                  coll.upsertDocument(coll.getSelfLink(), { id: "b", pk: "p" }, function (err, d4) {
                    out.upserted = d4.id;
                    coll.deleteDocument(d4._self, function (err, opts) {
                      out.deleted = err === undefined;
                      coll.readDocument(d4._self, function (err) {
                        out.missing = err.number === ErrorCodes.NotFound;
                        getContext().getResponse().setBody(out);
                      });
                    });
                  });
                });
              });
            });
          });
        }]]))
      assert.are.same({ read = 1, replaced = 2, stale = 412, notModified = true, upserted = "b",
                        deleted = true, missing = true },
                      assert(c:execute("ops", "p")))
    end)

    it("give ids to documents that have none, unless asked not to", function()
      assert(c:create_procedure("ids", [[
        function ids() {
          var coll = getContext().getCollection(), out = [];
          coll.createDocument(coll.getSelfLink(), { pk: "p" }, function (err, d) {
            out.push(d.id.length);
            coll.createDocument(coll.getSelfLink(), { pk: "p" }, { disableAutomaticIdGeneration: true },
              function (err) { out.push(err.number); getContext().getResponse().setBody(out); });
          });
        }]]))
      assert.are.same({ 36, 400 }, assert(c:execute("ids", "p")))
    end)

    it("offer the __ object and its query API: filter, map, pluck, chain, sortBy", function()
      for i = 1, 6 do assert(c:create({ id = "d" .. i, pk = "p", n = i, type = i % 2 == 0 and "even" or "odd" })) end
      assert(c:create_procedure("q", [[
        function q() {
          var out = {};
          __.filter(function (d) { return d.type === "even"; }, function (err, docs) {
            out.even = docs.length;
            __.chain().filter(function (d) { return d.n > 2; }).sortByDescending("n").pluck("id").value(
              function (err, ids) {
                out.ids = ids;
                __.map(function (d) { return d.n * 10; }, function (err, ns) {
                  out.sum = ns.reduce(function (a, b) { return a + b; }, 0);
                  __.response.setBody(out);
                });
              });
          });
        }]]))
      assert.are.same({ even = 3, ids = { "d6", "d5", "d4", "d3" }, sum = 210 }, assert(c:execute("q", "p")))
      -- no callback: the result is the response's body
      assert(c:create_procedure("q2", "function q2() { __.filter(function (d) { return d.n < 3; }); }"))
      local r = assert(c:execute("q2", "p"))
      assert.are.equal(2, #r)
    end)

    it("have the parts of the later library the engine lacks that Cosmos DB's has", function()
      assert(c:create_procedure("lib", [==[
        function lib() {
          getContext().getResponse().setBody([[1, 2, 3].find(function (x) { return x > 1; }),
            [1, NaN].includes(NaN), [1, 2, 3].findIndex(function (x) { return x == 3; }),
            Object.values({ a: 1, b: 2 }), Object.entries({ a: 1 }), "5".padStart(3, "0"),
            Array.from("ab"), Array.of(7, 8), new Array(3).fill(0), "abc".startsWith("ab")]);
        }]==]))
      assert.are.same({ 2, true, 2, { 1, 2 }, { { "a", 1 } }, "005", { "a", "b" }, { 7, 8 },
                        { 0, 0, 0 }, true }, assert(c:execute("lib", "p")))
    end)

    it("log with console.log, and keep the log apart from the result", function()
      assert(c:create_procedure("log", [[
        function log(x) { console.log("x is %s and %d", x, 4.5, "extra"); console.log({a: 1});
                          getContext().getResponse().setBody(x); }]]))
      local r, info = assert(c:execute("log", "p", "seven"))
      assert.are.equal("seven", r)
      assert.are.same({ "x is seven and 4 extra", "[object Object]" }, info.log)
    end)

    it("fail with the status of getContext().abort, or 400 for what a script throws", function()
      assert(c:create_procedure("ab", [[
        function ab(kind) {
          __.createDocument(__.getSelfLink(), { id: "w", pk: "p" });
          if (kind === 1) getContext().abort({ number: 412, message: "stale" });
          if (kind === 2) throw new Error("mine");
          if (kind === 3) throw "a string";
        }]]))
      local cases = { { 1, 412, "aborted: stale" }, { 2, 400, "failed: Error: mine" },
                      { 3, 400, "failed: a string" } }
      for _, case in ipairs(cases) do
        local ok, msg, status = c:execute("ab", "p", case[1])
        assert.is_nil(ok)
        assert.are.equal(case[2], status)
        assert.matches(case[3], msg, 1, true)
      end
      H.fails(404, c:read("w", "p"))
    end)

    it("see the partition key as the procedure's scope: queries stay in it", function()
      assert(c:create({ id = "x", pk = "p" }))
      assert(c:create({ id = "y", pk = "other" }))
      assert(c:create_procedure("all", [[
        function all() { __.queryDocuments(__.getSelfLink(), "SELECT VALUE c.id FROM c",
          function (err, ids) { getContext().getResponse().setBody(ids); }); }]]))
      assert.are.same({ "x" }, assert(c:execute("all", "p")))
    end)

    it("are cached per version: a replaced procedure runs its new source", function()
      assert(c:create_procedure("v", "function v() { getContext().getResponse().setBody(1); }"))
      assert.are.equal(1, (c:execute("v", "p")))
      assert(c:replace_procedure("v", "function v() { getContext().getResponse().setBody(2); }"))
      assert.are.equal(2, (c:execute("v", "p")))
      assert(c:replace_procedure("v", "return function(ctx) return 3 end"))
      assert.are.equal(3, (c:execute("v", "p")))
    end)
  end)

  describe("triggers", function()
    it("run the article's pre-trigger, which stamps what is created", function()
      assert(c:create_trigger("validate", { type = "pre", operation = "create", source = VALIDATE }))
      local doc = assert(c:create({ id = "t", pk = "p" }, { pre_trigger = "validate" }))
      assert.is_number(doc.timestamp)
      assert.are.equal(doc.timestamp, assert(c:read("t", "p")).timestamp)
      doc = assert(c:create({ id = "u", pk = "p", timestamp = 7 }, { pre_trigger = "validate" }))
      assert.are.equal(7, doc.timestamp)
    end)

    it("run the article's post-trigger in the write's transaction, and fail it with the write", function()
      assert(c:create_trigger("updateMetadata", { type = "post", operation = "create", source = UPDATE_METADATA }))
      assert(c:create({ id = "_metadata", pk = "p", createdItems = 0, createdNames = "" }))
      assert(c:create({ id = "a", pk = "p" }, { post_trigger = "updateMetadata" }))
      assert(c:create({ id = "b", pk = "p" }, { post_trigger = "updateMetadata" }))
      local meta = assert(c:read("_metadata", "p"))
      assert.are.equal(2, meta.createdItems)
      assert.are.equal(" a b", meta.createdNames)
      -- in another partition there is no metadata: the create fails whole
      local ok, msg, status = c:create({ id = "c", pk = "q" }, { post_trigger = "updateMetadata" })
      assert.is_nil(ok)
      assert.are.equal(400, status)
      assert.matches("Unable to find metadata document", msg, 1, true)
      H.fails(404, c:read("c", "q"))
    end)

    it("give the operation, refuse a pre-trigger's change of id, and let a post-trigger set the reply", function()
      assert(c:create_trigger("op", { type = "pre", source = [[
        function op() { var r = getContext().getRequest(); var b = r.getBody();
          b.op = r.getOperationType(); r.setBody(b); }]] }))
      assert(c:create_trigger("rename", { type = "pre", source = [[
        function rename() { var r = getContext().getRequest(); var b = r.getBody(); b.id = "other"; r.setBody(b); }]] }))
      assert(c:create_trigger("reply", { type = "post", source = [[
        function reply() { var r = getContext().getResponse(); r.setBody({ wrapped: r.getBody().id }); }]] }))
      assert.are.equal("Create", assert(c:create({ id = "a", pk = "p" }, { pre_trigger = "op" })).op)
      assert.are.equal("Replace", assert(c:replace({ id = "a", pk = "p" }, { pre_trigger = "op" })).op)
      H.fails(400, c:create({ id = "b", pk = "p" }, { pre_trigger = "rename" }))
      assert.are.same({ wrapped = "a" }, assert(c:upsert({ id = "a", pk = "p" }, { post_trigger = "reply" })))
      assert.is_nil(assert(c:read("a", "p")).wrapped)
    end)
  end)

  describe("user-defined functions", function()
    it("run the tax sample in queries, beside Lua ones", function()
      assert(c:create({ id = "a", pk = "p", income = 500 }))
      assert(c:create({ id = "b", pk = "p", income = 5000 }))
      assert(c:create({ id = "c", pk = "q", income = 50000 }))
      assert(c:create_udf("tax", TAX))
      assert(c:create_udf("double", "return function(x) return x * 2 end"))
      local rows = assert(c:query("SELECT c.id, udf.tax(c.income) AS t, udf.double(c.income) AS d FROM c ORDER BY c.id"))
      assert.are.same({ { id = "a", t = 50, d = 1000 }, { id = "b", t = 1000, d = 10000 },
                        { id = "c", t = 20000, d = 100000 } }, rows)
      local ok, msg, status = c:query("SELECT udf.tax(c.missing) FROM c")
      assert.is_nil(ok)
      assert.are.equal(400, status)
      assert.matches("no input", msg, 1, true)
    end)

    it("are called from a JavaScript procedure's query, on its budget", function()
      assert(c:create({ id = "a", pk = "p", income = 500 }))
      assert(c:create_udf("tax", TAX))
      assert(c:create_procedure("taxes", [[
        function taxes() { __.queryDocuments(__.getSelfLink(), "SELECT VALUE udf.tax(c.income) FROM c",
          function (err, t) { if (err) throw err; getContext().getResponse().setBody(t); }); }]]))
      assert.are.same({ 50 }, assert(c:execute("taxes", "p")))
    end)
  end)
end)
