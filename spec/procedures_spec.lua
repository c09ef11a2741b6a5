local regolith = require "regolith"
local H = require "helper"

local BOUND = "scripts cannot reference partition keys other than the one " ..
  "for which the request was submitted"
-- The article's createComment (V2), in Lua.
local CREATE_COMMENT = [[
return function(ctx, postId, comment)
  local post, msg, status = ctx:read(postId)
  if not post then ctx:abort(msg, status) end
  post.commentCount = post.commentCount + 1
  assert(ctx:replace(post))
  comment.postId = postId
  assert(ctx:create(comment))
  return post.commentCount
end]]

describe("procedures", function()
  local db, path, posts
  before_each(function()
    db, path = H.open()
    posts = assert(db:create_container("posts", { partition_key = "/postId" }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  describe("management", function()
    it("creates, lists, replaces and deletes procedures with the statuses of docs/scripts.md, Procedures", function()
      local ok, info = posts:create_procedure("b", "return function() return 1 end")
      assert.is_true(ok)
      assert.are.equal(201, info.status)
      assert(posts:create_procedure("a", "return function() return 2 end"))
      assert.are.same({ "a", "b" }, posts:procedures())
      ok, info = posts:replace_procedure("b", "return function() return 3 end")
      assert.is_true(ok)
      assert.are.equal(200, info.status)
      assert.are.equal(3, (posts:execute("b", "p")))
      ok, info = posts:delete_procedure("a")
      assert.is_true(ok)
      assert.are.equal(204, info.status)
      assert.are.same({ "b" }, posts:procedures())
    end)

    it("reads a stored procedure's source back", function()
      local src = "return function(ctx, a) return a end -- as given"
      assert(posts:create_procedure("p", src))
      local got, info = posts:procedure("p")
      assert.are.equal(src, got)
      assert.are.equal(200, info.status)
      assert(posts:replace_procedure("p", "return function() end"))
      assert.are.equal("return function() end", (posts:procedure("p")))
      H.fails(404, posts:procedure("q"))
      H.fails(400, posts:procedure("a/b"))
      assert.has_error(function() posts:procedure(42) end)
      assert(posts:delete_procedure("p"))
      H.fails(404, posts:procedure("p"))
    end)

    it("refuses a name that exists (409) and one that does not (404)", function()
      assert(posts:create_procedure("p", "return function() end"))
      H.fails(409, posts:create_procedure("p", "return function() end"))
      H.fails(404, posts:replace_procedure("q", "return function() end"))
      H.fails(404, posts:delete_procedure("q"))
    end)

    it("applies the id rules to names and raises for a name that is not a string", function()
      H.fails(400, posts:create_procedure("a/b", "return function() end"))
      H.fails(400, posts:create_procedure("", "return function() end"))
      H.fails(400, posts:create_procedure(("x"):rep(256), "return function() end"))
      assert.has_error(function() posts:create_procedure(42, "return function() end") end)
      assert.are.same({}, posts:procedures())
    end)

    it("treats the source as data: not a string, not compiling or not returning a function is 400", function()
      local msg = H.fails(400, posts:create_procedure("p", 42))
      assert.matches("source must be a string", msg)
      msg = H.fails(400, posts:create_procedure("p", "return function( end"))
      assert.matches("procedure 'p' does not compile", msg, 1, true)
      msg = H.fails(400, posts:create_procedure("p", "return 42"))
      assert.matches("must return a function, not number", msg)
      msg = H.fails(400, posts:create_procedure("p", "error('at load')"))
      assert.matches("at load", msg)
      assert.are.same({}, posts:procedures())
    end)

    it("keeps procedures in the database, for every handle and after reopening", function()
      assert(posts:create_procedure("p", "return function(ctx) return 'stored' end"))
      db:close()
      db = assert(regolith.open(path))
      posts = assert(db:container("posts"))
      assert.are.equal("stored", (posts:execute("p", "x")))
    end)

    -- on a cluster a delete is blind until read: whether the script was
    -- there must be fetched, not guessed from what this handle has seen
    it("deletes a script from a handle that has not read it, and 404s a missing one", function()
      assert(posts:create_procedure("p", "return function(ctx) return 1 end"))
      assert(posts:create_trigger("t", { type = "pre", source = "return function(ctx) end" }))
      db:close()
      db = assert(regolith.open(path))
      posts = assert(db:container("posts"))
      assert(posts:delete_procedure("p"))
      assert(posts:delete_trigger("t"))
      H.fails(404, posts:delete_procedure("p"))
      H.fails(404, posts:delete_trigger("t"))
      assert.are.same({}, posts:procedures())
      assert.are.same({}, posts:triggers())
    end)

    it("uses a procedure replaced by another process", function()
      assert(posts:create_procedure("v", "return function() return 1 end"))
      assert.are.equal(1, (posts:execute("v", "p")))       -- compiled, cached
      local child = H.script(([[
        local regolith = require "regolith"
        local db = assert(regolith.open(%q))
        local posts = assert(db:container("posts"))
        assert(posts:replace_procedure("v", "return function() return 2 end"))
        db:close()
      ]]):format(path))
      assert.is_true(H.execute(H.lua_cmd(child)))
      assert.are.equal(2, (posts:execute("v", "p")))
    end)

    it("drops a container's procedures with the container", function()
      assert(posts:create_procedure("p", "return function() end"))
      assert(db:delete_container("posts"))
      posts = assert(db:create_container("posts", { partition_key = "/postId" }))
      assert.are.same({}, posts:procedures())
      H.fails(404, posts:execute("p", "x"))
    end)

    it("refuses to store or run procedures on a read-only handle", function()
      assert(posts:create_procedure("p", "return function() end"))
      db:close()
      db = assert(regolith.open(path, { readonly = true }))
      posts = assert(db:container("posts"))
      H.fails(403, posts:create_procedure("q", "return function() end"))
      H.fails(403, posts:execute("p", "x"))
      assert.are.same({ "p" }, posts:procedures())
    end)
  end)

  describe("execute", function()
    it("runs the article's createComment: read, replace and create in one step", function()
      assert(posts:create({ id = "p1", postId = "p1", title = "t", commentCount = 0 }))
      assert(posts:create_procedure("createComment", CREATE_COMMENT))
      local n, info = posts:execute("createComment", "p1", "p1",
        { id = "c1", type = "comment", content = "first" })
      assert.are.equal(1, n)
      assert.are.equal(200, info.status)
      assert.are.equal(1, posts:read("p1", "p1").commentCount)
      local comment = assert(posts:read("c1", "p1"))
      assert.are.equal("p1", comment.postId)
      assert.are.equal("first", comment.content)
      -- the post and its comment carry the same _lsn: one transaction
      assert.are.equal(posts:read("p1", "p1")._lsn, comment._lsn)
    end)

    it("fails with the status given to ctx:abort, naming the procedure", function()
      assert(posts:create_procedure("createComment", CREATE_COMMENT))
      local msg = H.fails(404, posts:execute("createComment", "nope", "nope", { id = "c" }))
      assert.matches("procedure 'createComment' aborted", msg, 1, true)
      assert.matches("item not found", msg, 1, true)
    end)

    it("is atomic: an error after two writes leaves neither", function()
      assert(posts:create({ id = "a", postId = "p", n = 0 }))
      assert(posts:create_procedure("two", [[
        return function(ctx)
          assert(ctx:create({ id = "b", postId = "p" }))
          assert(ctx:replace({ id = "a", postId = "p", n = 1 }))
          error("after two writes")
        end]]))
      local msg = H.fails(400, posts:execute("two", "p"))
      assert.matches("procedure 'two' failed", msg, 1, true)
      assert.matches("after two writes", msg, 1, true)
      H.fails(404, posts:read("b", "p"))
      assert.are.equal(0, posts:read("a", "p").n)
    end)

    it("rolls back on ctx:abort even when the script tries to catch it", function()
      assert(posts:create_procedure("abort", [[
        return function(ctx)
          assert(ctx:create({ id = "x", postId = "p" }))
          pcall(ctx.abort, ctx, "changed my mind", 409)
          return "not reached"
        end]]))
      local msg = H.fails(409, posts:execute("abort", "p"))
      assert.matches("procedure 'abort' aborted: changed my mind", msg, 1, true)
      H.fails(404, posts:read("x", "p"))
    end)

    it("reads its own writes", function()
      assert(posts:create_procedure("own", [[
        return function(ctx)
          assert(ctx:create({ id = "x", postId = ctx.partition_key, n = 1 }))
          assert(ctx:patch("x", { { op = "incr", path = "/n", value = 41 } }))
          local seen = assert(ctx:read("x"))
          assert(ctx:delete("x"))
          local gone, msg, status = ctx:read("x")
          return { n = seen.n, gone = status }
        end]]))
      assert.are.same({ n = 42, gone = 404 }, (posts:execute("own", "p")))
    end)

    it("stays in its logical partition", function()
      assert(posts:create({ id = "other", postId = "q", n = 0 }))
      assert(posts:create_procedure("scope", [[
        return function(ctx)
          local ok, msg, status = ctx:create({ id = "x", postId = "q" })
          local ok2, msg2, status2 = ctx:upsert({ id = "other", postId = "q", n = 9 })
          assert(ctx:create({ id = "mine", postId = ctx.partition_key }))
          local r, msg3, status3 = ctx:read("other")
          return { msg, status, msg2, status2, status3 }
        end]]))
      local r = assert(posts:execute("scope", "p"))
      assert.are.same({ BOUND, 400, BOUND, 400, 404 }, r)
      H.fails(404, posts:read("x", "q"))
      assert.are.equal(0, posts:read("other", "q").n)
      assert(posts:read("mine", "p"))
    end)

    it("gives ctx the container methods' returns, and goes on after an expected failure", function()
      assert(posts:create({ id = "x", postId = "p" }))
      assert(posts:create_procedure("shapes", [[
        return function(ctx)
          local r = {}
          local doc, info = ctx:create({ id = "y", postId = "p" })
          r.created = { doc.id, info.status, type(info.etag), info.charge > 0 }
          local _, msg, status = ctx:create({ id = "x", postId = "p" })
          r.conflict = status
          _, _, r.missing = ctx:replace({ id = "z", postId = "p" })
          _, _, r.precondition = ctx:replace({ id = "x", postId = "p" }, { if_match = "nope" })
          local ok, dinfo = ctx:delete("y")
          r.deleted = { ok, dinfo.status }
          _, _, r.patch = ctx:patch("x", { { op = "replace", path = "/nothing", value = 1 } })
          _, _, r.bad_doc = ctx:create({ id = "w", postId = "p", f = 0/0 })
          return r
        end]]))
      local r = assert(posts:execute("shapes", "p"))
      assert.are.same({ "y", 201, "string", true }, r.created)
      assert.are.equal(409, r.conflict)
      assert.are.equal(404, r.missing)
      assert.are.equal(412, r.precondition)
      assert.are.same({ true, 204 }, r.deleted)
      assert.are.equal(400, r.patch)
      assert.are.equal(400, r.bad_doc)
      H.fails(404, posts:read("y", "p"))
      assert(posts:read("x", "p"))
    end)

    it("raises inside the script for misused options, failing the call", function()
      assert(posts:create_procedure("misuse", [[
        return function(ctx) ctx:create({ id = "x", postId = "p" }, { pre_trigger = "t" }) end]]))
      local msg = H.fails(400, posts:execute("misuse", "p"))
      assert.matches("unknown option 'pre_trigger'", msg, 1, true)
    end)

    it("passes arguments through the JSON codec", function()
      assert(posts:create_procedure("echo", [[
        return function(ctx, ...) return { n = select("#", ...), args = { ... } } end]]))
      local r = assert(posts:execute("echo", "p", "a\0b", 2^53 + 1, regolith.null,
        regolith.array(), { x = { 1, 2 } }))
      assert.are.equal(5, r.n)
      assert.are.equal("a\0b", r.args[1])
      assert.are.equal(2^53 + 1, r.args[2])
      assert.are.equal(regolith.null, r.args[3])
      assert.are.equal("[]", regolith.json.encode(r.args[4]))
      assert.are.same({ x = { 1, 2 } }, r.args[5])
      local msg = H.fails(400, posts:execute("echo", "p", "ok", function() end))
      assert.matches("argument 2", msg, 1, true)
      H.fails(400, posts:execute("echo", "p", 0/0))
    end)

    it("keeps nil arguments nil", function()
      assert(posts:create_procedure("nils", [[
        return function(ctx, a, b, c) return { a = a, b = b == nil, c = c } end]]))
      assert.are.same({ a = 1, b = true, c = 3 }, (posts:execute("nils", "p", 1, nil, 3)))
    end)

    it("returns regolith.null when the procedure returns nothing", function()
      assert(posts:create_procedure("nothing", "return function() end"))
      local r, info = posts:execute("nothing", "p")
      assert.are.equal(regolith.null, r)
      assert.are.equal(200, info.status)
    end)

    it("fails with 400 and rolls back when the result is not JSON-clean", function()
      assert(posts:create_procedure("badresult", [[
        return function(ctx)
          assert(ctx:create({ id = "x", postId = "p" }))
          local t = {} t.self = t
          return t
        end]]))
      local msg = H.fails(400, posts:execute("badresult", "p"))
      assert.matches("returned a value JSON cannot carry", msg, 1, true)
      H.fails(404, posts:read("x", "p"))
      assert(posts:create_procedure("fnresult", "return function() return print or function() end end"))
      H.fails(400, posts:execute("fnresult", "p"))
    end)

    it("is 404 for an unknown procedure and 400 for a bad partition key", function()
      local msg = H.fails(404, posts:execute("missing", "p"))
      assert.matches("procedure 'missing' not found", msg, 1, true)
      assert(posts:create_procedure("p", "return function() end"))
      H.fails(400, posts:execute("p"))
      H.fails(400, posts:execute("p", { 1, 2 }))
      H.fails(400, posts:execute("p", function() end))
    end)

    it("binds hierarchical partition keys", function()
      local c = assert(db:create_container("h", { partition_key = { "/t", "/u" } }))
      assert(c:create_procedure("mk", [[
        return function(ctx)
          local pk = ctx.partition_key
          assert(ctx:create({ id = "x", t = pk[1], u = pk[2] }))
          local _, msg = ctx:create({ id = "y", t = pk[1], u = "other" })
          return msg
        end]]))
      assert.are.equal(BOUND, (c:execute("mk", { "a", "b" })))
      assert(c:read("x", { "a", "b" }))
      H.fails(400, c:execute("mk", "a"))
    end)

    it("charges the inner operations plus 1 RU per call", function()
      assert(posts:create_procedure("one", [[
        return function(ctx) local _, info = assert(ctx:create({ id = "x", postId = "p", v = "s" })) return info.charge end]]))
      local inner, info = posts:execute("one", "p")
      assert.are.equal(inner + 1, info.charge)
      local _, direct = assert(posts:create({ id = "x", postId = "q", v = "s" }))
      assert.are.equal(direct.charge, inner)
      assert(posts:create_procedure("empty", "return function() end"))
      local _, einfo = posts:execute("empty", "p")
      assert.are.equal(1, einfo.charge)
    end)

    it("returns ctx:log lines in info.log", function()
      assert(posts:create_procedure("logs", [[
        return function(ctx, x)
          ctx:log("start", x, true)
          ctx:log()
          ctx:log(regolith.null == regolith.null, 1.5)
        end]]))
      local _, info = assert(posts:execute("logs", "p", 7))
      assert.are.same({ "start 7 true", "", "true 1.5" }, info.log)
    end)

    it("starts every execution from the chunk: nothing carries over", function()
      assert(posts:create_procedure("count", [[
        local calls = 0
        return function(ctx)
          calls = calls + 1
          counter = (counter or 0) + 1
          return { calls, counter }
        end]]))
      assert.are.same({ 1, 1 }, (posts:execute("count", "p")))
      assert.are.same({ 1, 1 }, (posts:execute("count", "p")))
    end)

    it("fires no trigger with the writes it makes", function()
      assert(posts:create_trigger("stamp", { type = "pre", automatic = true, source = [[
        return function(ctx) local d = ctx:body() d.stamped = true ctx:set_body(d) end]] }))
      assert(posts:create_procedure("w", [[
        return function(ctx) assert(ctx:create({ id = "x", postId = "p" })) end]]))
      assert(posts:execute("w", "p"))
      assert.is_nil(posts:read("x", "p").stamped)
      assert(posts:create({ id = "y", postId = "p" }))
      assert.is_true(posts:read("y", "p").stamped)
    end)

    it("runs its queries in its own partition", function()
      assert(posts:create({ id = "a", postId = "p", n = 1 }))
      assert(posts:create({ id = "b", postId = "q", n = 2 }))
      assert(posts:create_procedure("q", [[
        return function(ctx)
          assert(ctx:create({ id = "c", postId = "p", n = 3 }))
          local rows = assert(ctx:query("SELECT VALUE c.n FROM c ORDER BY c.n"))
          local _, msg, status = ctx:query("SELECT * FROM c", nil, { partition_key = "q" })
          return { rows = rows, msg = msg, status = status }
        end]]))
      local r = assert(posts:execute("q", "p"))
      assert.are.same({ 1, 3 }, r.rows)
      assert.are.equal(BOUND, r.msg)
      assert.are.equal(400, r.status)
    end)
  end)

  describe("limits", function()
    -- Microsoft's bulk import sample (docs/scripts.md), in Lua: it creates
    -- documents while ctx:is_accepted() and returns how many it created.
    local IMPORT = [[
      return function(ctx, items)
        local count = 0
        for i = 1, #items do
          if not ctx:is_accepted() then break end
          assert(ctx:create(items[i]))
          count = count + 1
        end
        return count
      end]]
    local items = H.items

    it("stop being accepted (ctx:is_accepted) near the instruction budget, so that an import returns what it did", function()
      local small = H.open({ script_budget = 3000000 })
      local s = assert(small:create_container("s", { partition_key = "/pk" }))
      assert(s:create_procedure("import", IMPORT))
      -- accepted from the start of a call
      assert.are.equal(2, (s:execute("import", "q", items(2, "q"))))
      -- each call stops short of the budget with what it wrote, and is
      -- called again with the rest (a call that wrote fewer or more than
      -- it said would fail the rest's creates, or leave some out)
      local counts = H.import_all(s, "import", "p", items(3000))
      assert.is_true(#counts >= 2 and counts[1] < 3000, #counts .. " calls")
      assert.are.same({ 3000 }, assert(s:query("SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'p'")))
      small:close()
    end)

    H.cluster_it("stop being accepted (ctx:is_accepted) near the write bound of one call",
                 "the bound of one apply is the cluster's", function()
      -- accepted while more than a tenth of the 1,000 items is left: as
      -- JavaScript's isAccepted, from the same rule
      local c = assert(db:create_container("imports", { partition_key = "/pk" }))
      assert(c:create_procedure("import", IMPORT))
      local counts = H.import_all(c, "import", "p", items(2500))
      assert.is_true(#counts >= 3, #counts .. " calls")
      for i = 1, #counts - 1 do
        assert.is_true(counts[i] >= 900 and counts[i] < 1000, tostring(counts[i]))
      end
      assert.are.same({ 2500 }, assert(c:query("SELECT VALUE COUNT(1) FROM c")))
    end)

    H.local_it("are set by the first open of a path; a later open naming others is 409",
      "the limits belong to one process's environment of a path", function()
      db:close()
      db = assert(regolith.open(path, { script_budget = 1000000 }))
      local again = assert(regolith.open(path))
      again:close()
      local msg = H.fails(409, regolith.open(path, { script_budget = 2000000 }))
      assert.matches("script_budget", msg, 1, true)
      again = assert(regolith.open(path, { script_budget = 1000000 }))
      again:close()
    end)
  end)
end)
