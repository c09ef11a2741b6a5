local regolith = require "regolith"
local H = require "helper"

-- The article's truncateFeed post-trigger, in Lua: keeps the newest
-- `maxDocs` items of the (single-partition) feed.  A query in a
-- post-trigger already counts the item just written.
local function truncate_feed(maxDocs)
  return ([[
return function(ctx)
  local maxDocs = %d
  local count = assert(ctx:query("SELECT VALUE COUNT(1) FROM f"))[1]
  if count <= maxDocs then return end
  local old = assert(ctx:query(
    ("SELECT TOP %%d VALUE f.id FROM f ORDER BY f.creationDate"):format(count - maxDocs)))
  for _, id in ipairs(old) do assert(ctx:delete(id)) end
end]]):format(maxDocs)
end

local STAMP = [[
return function(ctx)
  local doc = ctx:body()
  doc.stamped = ctx.operation
  ctx:set_body(doc)
end]]

describe("triggers", function()
  local db, path, c
  before_each(function()
    db, path = H.open()
    c = assert(db:create_container("things", { partition_key = "/pk" }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  describe("management", function()
    it("creates, lists, replaces and deletes triggers", function()
      local ok, info = c:create_trigger("b", { type = "pre", source = STAMP })
      assert.is_true(ok)
      assert.are.equal(201, info.status)
      assert(c:create_trigger("a", { type = "post", operation = "delete",
                                     automatic = false, source = "return function() end" }))
      assert.are.same({ "a", "b" }, c:triggers())
      ok, info = c:replace_trigger("b", { type = "post", source = "return function() end" })
      assert.is_true(ok)
      assert.are.equal(200, info.status)
      ok, info = c:delete_trigger("a")
      assert.is_true(ok)
      assert.are.equal(204, info.status)
      assert.are.same({ "b" }, c:triggers())
      H.fails(409, c:create_trigger("b", { type = "pre", source = STAMP }))
      H.fails(404, c:replace_trigger("z", { type = "pre", source = STAMP }))
      H.fails(404, c:delete_trigger("z"))
    end)

    it("reads a trigger's definition back", function()
      assert(c:create_trigger("s", { type = "pre", operation = "replace",
                                     automatic = true, source = STAMP }))
      local def, info = c:trigger("s")
      assert.are.same({ type = "pre", operation = "replace", automatic = true,
                        source = STAMP }, def)
      assert.are.equal(200, info.status)
      assert(c:create_trigger("t", { type = "post", source = "return function() end" }))
      assert.are.same({ type = "post", operation = "all", automatic = false,
                        source = "return function() end" }, (c:trigger("t")))
      H.fails(404, c:trigger("z"))
      H.fails(400, c:trigger(""))
    end)

    it("raises for a wrong key or value in the definition", function()
      assert.has_error(function() c:create_trigger("t", { type = "pre", source = STAMP, oops = 1 }) end)
      assert.has_error(function() c:create_trigger("t", { type = "middle", source = STAMP }) end)
      assert.has_error(function() c:create_trigger("t", { source = STAMP }) end)
      assert.has_error(function() c:create_trigger("t", { type = "pre", operation = "upsert", source = STAMP }) end)
      assert.has_error(function() c:create_trigger("t", { type = "pre", automatic = "yes", source = STAMP }) end)
      assert.has_error(function() c:create_trigger("t", "return function() end") end)
      assert.has_error(function() c:create_trigger(1, { type = "pre", source = STAMP }) end)
      assert.are.same({}, c:triggers())
    end)

    it("treats the source as data: 400 when it is not a string or does not compile", function()
      H.fails(400, c:create_trigger("t", { type = "pre" }))
      H.fails(400, c:create_trigger("t", { type = "pre", source = 12 }))
      local msg = H.fails(400, c:create_trigger("t", { type = "pre", source = "return function(" }))
      assert.matches("trigger 't' does not compile", msg, 1, true)
      H.fails(400, c:create_trigger("t", { type = "pre", source = "return {}" }))
      H.fails(400, c:create_trigger("a/b", { type = "pre", source = STAMP }))
      assert.are.same({}, c:triggers())
    end)
  end)

  describe("pre-triggers", function()
    it("rewrite the document before it is written", function()
      assert(c:create_trigger("stamp", { type = "pre", source = STAMP }))
      local doc, info = assert(c:create({ id = "a", pk = "p", n = 1 }, { pre_trigger = "stamp" }))
      assert.are.equal("create", doc.stamped)
      assert.are.equal(201, info.status)
      assert.are.equal("create", c:read("a", "p").stamped)
      assert(c:replace({ id = "a", pk = "p" }, { pre_trigger = "stamp" }))
      assert.are.equal("replace", c:read("a", "p").stamped)
      assert.is_nil(c:read("a", "p").n)
    end)

    it("see an upsert as create or replace, a patch as replace, a delete as its id", function()
      assert(c:create_trigger("seen", { type = "pre", source = [[
        return function(ctx)
          local body = ctx:body()
          assert(ctx:upsert({ id = "log-" .. body.id .. "-" .. ctx.operation, pk = ctx.partition_key,
                              keys = body.pk == nil and "id only" or "doc" }))
        end]] }))
      assert(c:upsert({ id = "a", pk = "p" }, { pre_trigger = "seen" }))
      assert(c:upsert({ id = "a", pk = "p" }, { pre_trigger = "seen" }))
      assert(c:patch("a", "p", { { op = "set", path = "/x", value = 1 } }, { pre_trigger = "seen" }))
      assert(c:delete("a", "p", { pre_trigger = "seen" }))
      assert(c:read("log-a-create", "p"))
      assert.are.equal("doc", c:read("log-a-replace", "p").keys)
      assert.are.equal("id only", c:read("log-a-delete", "p").keys)
    end)

    it("cannot change the id or the partition key", function()
      assert(c:create_trigger("move", { type = "pre", source = [[
        return function(ctx) local d = ctx:body() d.pk = "elsewhere" ctx:set_body(d) end]] }))
      assert(c:create_trigger("rename", { type = "pre", source = [[
        return function(ctx) local d = ctx:body() d.id = "other" ctx:set_body(d) end]] }))
      local msg = H.fails(400, c:create({ id = "a", pk = "p" }, { pre_trigger = "move" }))
      assert.matches("pre-trigger 'move' failed", msg, 1, true)
      assert.matches("cannot change the id or the partition key", msg, 1, true)
      H.fails(400, c:create({ id = "a", pk = "p" }, { pre_trigger = "rename" }))
      H.fails(404, c:read("a", "p"))
      H.fails(404, c:read("a", "elsewhere"))
      H.fails(404, c:read("other", "p"))
    end)

    it("write in the partition along with the item, and roll back with it", function()
      assert(c:create_trigger("side", { type = "pre", source = [[
        return function(ctx)
          assert(ctx:create({ id = "side-" .. ctx:body().id, pk = ctx.partition_key }))
          local _, msg = ctx:create({ id = "x", pk = "other" })
          if ctx:body().fail then ctx:abort(msg, 422) end
        end]] }))
      assert(c:create({ id = "a", pk = "p" }, { pre_trigger = "side" }))
      assert(c:read("side-a", "p"))
      local msg = H.fails(422, c:create({ id = "b", pk = "p", fail = true }, { pre_trigger = "side" }))
      assert.matches("pre-trigger 'side' aborted: scripts cannot reference partition keys", msg, 1, true)
      H.fails(404, c:read("b", "p"))
      H.fails(404, c:read("side-b", "p"))
    end)
  end)

  describe("post-triggers", function()
    it("run after the write, see it, and change what the caller receives", function()
      assert(c:create_trigger("reply", { type = "post", source = [[
        return function(ctx)
          local stored = ctx:body()
          local again = ctx:read(stored.id)
          ctx:set_body({ etag_seen = again ~= nil and again._etag == stored._etag,
                         op = ctx.operation })
        end]] }))
      local r, info = assert(c:create({ id = "a", pk = "p", n = 1 }, { post_trigger = "reply" }))
      assert.are.same({ etag_seen = true, op = "create" }, r)
      assert.are.equal(201, info.status)
      assert.are.equal(1, c:read("a", "p").n)
      r = assert(c:delete("a", "p", { post_trigger = "reply" }))
      assert.are.same({ etag_seen = false, op = "delete" }, r)
      H.fails(404, c:read("a", "p"))
    end)

    it("see the deleted document on a delete", function()
      assert(c:create({ id = "a", pk = "p", keep = "me" }))
      assert(c:create_trigger("gone", { type = "post", operation = "delete", source = [[
        return function(ctx) ctx:set_body(ctx:body().keep) end]] }))
      assert.are.equal("me", (c:delete("a", "p", { post_trigger = "gone" })))
    end)

    it("roll the whole write back when they fail", function()
      assert(c:create({ id = "a", pk = "p", v = 1 }))
      assert(c:create_trigger("boom", { type = "post", source = [[
        return function(ctx)
          assert(ctx:create({ id = "side", pk = ctx.partition_key }))
          error("post failed")
        end]] }))
      local msg = H.fails(400, c:replace({ id = "a", pk = "p", v = 2 }, { post_trigger = "boom" }))
      assert.matches("post-trigger 'boom' failed", msg, 1, true)
      assert.matches("post failed", msg, 1, true)
      assert.are.equal(1, c:read("a", "p").v)
      H.fails(404, c:read("side", "p"))
      H.fails(400, c:create({ id = "b", pk = "p" }, { post_trigger = "boom" }))
      H.fails(404, c:read("b", "p"))
      assert(c:create({ id = "b", pk = "p" }))
    end)

    it("carry the status given to ctx:abort", function()
      assert(c:create_trigger("deny", { type = "post", source = [[
        return function(ctx) ctx:abort("quota reached", 403) end]] }))
      local msg = H.fails(403, c:upsert({ id = "a", pk = "p" }, { post_trigger = "deny" }))
      assert.matches("post-trigger 'deny' aborted: quota reached", msg, 1, true)
      H.fails(404, c:read("a", "p"))
    end)

    it("keep the newest N items: the article's truncateFeed", function()
      local feed = assert(db:create_container("feed", { partition_key = "/type" }))
      assert(feed:create_trigger("truncateFeed", { type = "post", source = truncate_feed(5) }))
      for i = 1, 12 do
        assert(feed:upsert({ id = "post" .. i, type = "post",
                             creationDate = ("2024-01-%02d"):format(i) },
                           { post_trigger = "truncateFeed" }))
      end
      for i = 1, 7 do H.fails(404, feed:read("post" .. i, "post")) end
      for i = 8, 12 do assert(feed:read("post" .. i, "post")) end
    end)
  end)

  describe("inside an outer transaction", function()
    it("undo only their own write when they fail (a transactional processor's handler)", function()
      local src = assert(db:create_container("src", { partition_key = "/pk" }))
      assert(c:create_trigger("boom", { type = "post", source = [[
        return function(ctx)
          assert(ctx:create({ id = "side-" .. ctx:body().id, pk = ctx.partition_key }))
          if ctx:body().fail then error("refused") end
        end]] }))
      assert(c:create_procedure("proc", [[
        return function(ctx)
          assert(ctx:create({ id = "proc-write", pk = ctx.partition_key }))
          ctx:abort("no", 409)
        end]]))
      local statuses = {}
      local p = assert(db:processor{ name = "copy", source = "src", start = "beginning",
        handler = function(changes)
          local function note(_, _, status) statuses[#statuses + 1] = status or "ok" end
          note(c:create({ id = "bad", pk = "p", fail = true }, { post_trigger = "boom" }))
          note(c:create({ id = "good", pk = "p" }, { post_trigger = "boom" }))
          note(c:execute("proc", "q"))
          note(c:create({ id = "after", pk = "q" }))
        end })
      assert(src:create({ id = "x", pk = "p" }))
      assert.are.equal(1, (p:run_once()))
      assert.are.same({ 400, "ok", 409, "ok" }, statuses)
      H.fails(404, c:read("bad", "p"))
      H.fails(404, c:read("side-bad", "p"))
      H.fails(404, c:read("proc-write", "q"))
      assert(c:read("good", "p"))
      assert(c:read("side-good", "p"))
      assert(c:read("after", "q"))
      -- what was undone left no index entry, feed record or count behind
      assert.is_true(db:verify())
    end)
  end)

  describe("naming", function()
    before_each(function()
      assert(c:create_trigger("pre_create", { type = "pre", operation = "create", source = STAMP }))
      assert(c:create_trigger("post_all", { type = "post", source = "return function() end" }))
    end)

    it("fails with 400 when the operation does not match, writing nothing", function()
      assert(c:create({ id = "a", pk = "p", v = 1 }))
      local msg = H.fails(400, c:replace({ id = "a", pk = "p", v = 2 }, { pre_trigger = "pre_create" }))
      assert.matches("trigger 'pre_create' runs on create; this write is a replace", msg, 1, true)
      H.fails(400, c:upsert({ id = "a", pk = "p", v = 2 }, { pre_trigger = "pre_create" }))
      H.fails(400, c:patch("a", "p", { { op = "set", path = "/v", value = 2 } }, { pre_trigger = "pre_create" }))
      H.fails(400, c:delete("a", "p", { pre_trigger = "pre_create" }))
      assert.are.equal(1, c:read("a", "p").v)
      assert(c:upsert({ id = "b", pk = "p" }, { pre_trigger = "pre_create" }))
      assert.are.equal("create", c:read("b", "p").stamped)
    end)

    it("fails with 400 for a pre-trigger named as post_trigger and the reverse", function()
      local msg = H.fails(400, c:create({ id = "a", pk = "p" }, { post_trigger = "pre_create" }))
      assert.matches("is a pre-trigger; it cannot be named as post_trigger", msg, 1, true)
      H.fails(400, c:create({ id = "a", pk = "p" }, { pre_trigger = "post_all" }))
      H.fails(404, c:read("a", "p"))
    end)

    it("fails with 404 for an unknown trigger, writing nothing", function()
      local msg = H.fails(404, c:create({ id = "a", pk = "p" }, { pre_trigger = "nope" }))
      assert.matches("trigger 'nope' not found", msg, 1, true)
      H.fails(404, c:create({ id = "a", pk = "p" }, { pre_trigger = "pre_create", post_trigger = "nope" }))
      H.fails(404, c:read("a", "p"))
    end)
  end)

  describe("automatic triggers", function()
    it("fire on every matching write without being named", function()
      assert(c:create_trigger("auto", { type = "pre", operation = "create", automatic = true,
                                        source = STAMP }))
      assert(c:create({ id = "a", pk = "p" }))
      assert.are.equal("create", c:read("a", "p").stamped)
      assert(c:replace({ id = "a", pk = "p" }))
      assert.is_nil(c:read("a", "p").stamped)
      assert(c:delete_trigger("auto"))
      assert(c:create({ id = "b", pk = "p" }))
      assert.is_nil(c:read("b", "p").stamped)
    end)

    it("run once when also named, after the named one otherwise", function()
      assert(c:create_trigger("count", { type = "pre", automatic = true, source = [[
        return function(ctx) local d = ctx:body() d.n = (d.n or 0) + 1 d.last = "count" ctx:set_body(d) end]] }))
      assert(c:create_trigger("named", { type = "pre", source = [[
        return function(ctx) local d = ctx:body() d.last = "named" ctx:set_body(d) end]] }))
      assert(c:create({ id = "a", pk = "p" }, { pre_trigger = "count" }))
      assert.are.equal(1, c:read("a", "p").n)
      assert(c:create({ id = "b", pk = "p" }, { pre_trigger = "named" }))
      assert.are.equal("count", c:read("b", "p").last)
    end)

    it("are seen when another process creates or replaces them", function()
      assert(c:create({ id = "a", pk = "p" }))          -- no trigger yet (cached)
      local child = H.script(([[
        local regolith = require "regolith"
        local db = assert(regolith.open(%q))
        local c = assert(db:container("things"))
        assert(c:create_trigger("auto", { type = "pre", automatic = true,
          source = "return function(ctx) local d = ctx:body() d.by = 'child' ctx:set_body(d) end" }))
        db:close()
      ]]):format(path))
      assert.is_true(H.execute(H.lua_cmd(child)))
      assert(c:create({ id = "b", pk = "p" }))
      assert.are.equal("child", c:read("b", "p").by)
    end)

    it("fire inside a batch, and their failure fails the batch", function()
      assert(c:create_trigger("auto", { type = "pre", automatic = true, source = [[
        return function(ctx)
          local d = ctx:body()
          if d and d.bad then error("refused") end
          if ctx.operation ~= "delete" then d.stamped = true ctx:set_body(d) end
        end]] }))
      local results = assert(c:batch("p", {
        { op = "create", doc = { id = "a", pk = "p" } },
        { op = "upsert", doc = { id = "b", pk = "p" } },
      }))
      assert.are.equal(201, results[1].status)
      assert.is_true(c:read("a", "p").stamped)
      assert.is_true(c:read("b", "p").stamped)
      local _, msg, status, res = c:batch("p", {
        { op = "create", doc = { id = "c", pk = "p" } },
        { op = "create", doc = { id = "d", pk = "p", bad = true } },
      })
      assert.are.equal(400, status)
      assert.matches("pre-trigger 'auto' failed", msg, 1, true)
      assert.are.equal(424, res[1].status)
      H.fails(404, c:read("c", "p"))
    end)

    it("do not fire for writes made by scripts", function()
      assert(c:create_trigger("auto", { type = "post", automatic = true, source = [[
        return function(ctx) assert(ctx:create({ id = "echo-" .. ctx:body().id, pk = ctx.partition_key })) end]] }))
      assert(c:create({ id = "a", pk = "p" }))
      assert(c:read("echo-a", "p"))
      H.fails(404, c:read("echo-echo-a", "p"))
    end)
  end)
end)
