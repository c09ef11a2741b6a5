-- The blog example (docs/tutorial-blog.md, examples/blog): the article's
-- three models at a tiny scale, loaded through their own commands, with the
-- checks the benchmark runs.  Loading is the slow part, so each model is
-- loaded once; the tests that change data (renames, new comments) leave the
-- data sets equal to one another, as the checks require.
package.path = "examples/?.lua;" .. package.path

local H = require "helper"
local data = require "blog.data"
local load = require "blog.load"
local checks = require "blog.checks"
local common = require "blog.common"
local scripts = require "blog.scripts"

-- 4 users, 132 posts (so the feed is truncated), 1,610 comments, 6,324 likes
local SCALE, SEED = 0.00004, 3
local NAMES = { "V1", "V2", "V3" }

describe("blog example", function()
  local gen = data.new(SCALE, SEED)
  local size = gen:size()
  local models = {}

  lazy_setup(function()
    for _, name in ipairs(NAMES) do
      local db = H.open({ sync = "none" })
      local m = require("blog." .. name:lower()).open(db)
      m.stats = load.run(m, gen, { quiet = true })
      models[name] = m
    end
  end)

  lazy_teardown(function()
    for _, m in pairs(models) do m.db:close() end
    H.cleanup()
  end)

  -- Every user and every post of the data set as sample keys.
  local function all_keys()
    local keys = { users = {}, posts = {} }
    for u = 1, gen.users do
      keys.users[#keys.users + 1] = gen:user_id(u)
      for k = 1, gen:posts_of(u) do keys.posts[#keys.posts + 1] = gen:post_id(u, k) end
    end
    return keys
  end

  local function assert_check(ok, msg)
    assert(ok, msg)
  end

  it("generates the same data from the same seed, the same on Lua 5.4 and LuaJIT, and other data from another seed", function()
    assert.are.equal(836848703, gen:digest())
    assert.are.equal(836848703, data.new(SCALE, SEED):digest())
    assert.are_not.equal(gen:digest(), data.new(SCALE, SEED + 1):digest())
    assert.are.same({ users = 4, posts = 132, comments = 1610, likes = 6324 }, size)
  end)

  it("gives every post a distinct creation date, and bounded counts", function()
    local seen = {}
    for u = 1, gen.users do
      local n = gen:posts_of(u)
      assert.is_true(n >= 5 and n <= 50)
      for k = 1, n do
        local p = gen:post(u, k)
        assert.is_nil(seen[p.post.creationDate])
        seen[p.post.creationDate] = true
        assert.is_true(#p.comments <= 25 and #p.likes <= 100)
        assert.are.same({ gen:counts(u, k) }, { #p.comments, #p.likes })
      end
    end
  end)

  it("loads every item of the data set into each model through its commands", function()
    local total = size.users + size.posts + size.comments + size.likes
    for _, name in ipairs(NAMES) do
      local m = models[name]
      assert.are.equal(total, m.stats.items)
      local n = assert(m.posts:query("SELECT VALUE COUNT(1) FROM p"))[1]
      assert.are.equal(size.posts + size.comments + size.likes, n)
    end
  end)

  it("keeps every post's comment and like counts equal to its comments and likes (V2, V3)", function()
    assert_check(checks.counts(models.V2))
    assert_check(checks.counts(models.V3))
  end)

  it("copies every post in short form into its author's partition of users (V3)", function()
    assert_check(checks.copies(models.V3))
    local copy = assert(models.V3.users:read("p1-1", "u1"))
    assert.are.equal("post", copy.type)
    assert.is_true(#copy.content <= common.SHORT)
  end)

  it("keeps exactly the 100 newest posts in feed (V3)", function()
    assert_check(checks.feed(models.V3))
    local n = assert(models.V3.feed:query("SELECT VALUE COUNT(1) FROM f"))[1]
    assert.are.equal(100, n)
  end)

  it("returns the 100 newest posts, newest first, for Q6 in every model", function()
    for _, name in ipairs(NAMES) do assert_check(checks.newest(models[name])) end
  end)

  it("gives the same answers to every request on every key in V1, V2 and V3", function()
    local keys = all_keys()
    local a = checks.answers(models.V1, keys)
    assert_check(checks.same(a, checks.answers(models.V2, keys), "V1", "V2"))
    assert_check(checks.same(a, checks.answers(models.V3, keys), "V1", "V3"))
  end)

  it("carries a renamed user's new name to every post, comment and like, and the users and feed copies, and the old one back", function()
    local newest = assert(models.V1:list_recent_posts())[1]
    for _, name in ipairs(NAMES) do
      assert_check(checks.rename(models[name], newest.userId))
    end
    -- a user whose posts are not in the feed
    for _, name in ipairs(NAMES) do
      assert_check(checks.rename(models[name], "u2"))
    end
  end)

  it("counts comments and likes made through C3 and C4, and the copies follow", function()
    local keys = all_keys()
    local author = gen:user(3)
    for _, name in ipairs(NAMES) do
      local m = models[name]
      for i = 1, 3 do
        assert(m:create_comment({ id = "new-c" .. i, postId = "p1-2",
          userId = author.id, username = author.username,
          content = "Another comment", creationDate = data.iso(10 ^ 9 + i) }))
        assert(m:like_post({ id = "new-l" .. i, postId = "p1-2",
          userId = author.id, username = author.username,
          creationDate = data.iso(10 ^ 9 + i) }))
      end
      m:pump()
    end
    assert_check(checks.counts(models.V2))
    assert_check(checks.counts(models.V3))
    assert_check(checks.copies(models.V3))
    assert_check(checks.feed(models.V3))
    local a = checks.answers(models.V1, keys)
    assert_check(checks.same(a, checks.answers(models.V2, keys), "V1", "V2"))
    assert_check(checks.same(a, checks.answers(models.V3, keys), "V1", "V3"))
    local post = assert(models.V2:get_post("p1-2"))
    local c, l = gen:counts(1, 2)
    assert.are.equal(c + 3, post.commentCount)
    assert.are.equal(l + 3, post.likeCount)
  end)

  it("takes a new post into the feed only while it is among the 100 newest (V3)", function()
    local m = models.V3
    local user = gen:user(4)
    local post = { id = "new-p", userId = user.id, username = user.username,
                   title = "Newest", content = ("word "):rep(60),
                   creationDate = "2030-01-01T00:00:00.0000000Z" }
    for _, name in ipairs(NAMES) do
      assert(models[name]:create_post(post))
      models[name]:pump()
    end
    local newest = assert(m:list_recent_posts())
    assert.are.equal("new-p", newest[1].id)
    assert.are.equal(common.SHORT, #newest[1].content)
    local old = { id = "old-p", userId = user.id, username = user.username,
                  title = "Oldest", content = "old",
                  creationDate = "2001-01-01T00:00:00.0000000Z" }
    for _, name in ipairs(NAMES) do
      assert(models[name]:create_post(old))
      models[name]:pump()
    end
    H.fails(404, m.feed:read("old-p", "post"))
    assert(m.users:read("old-p", user.id))
    assert_check(checks.feed(m))
    for _, name in ipairs(NAMES) do assert_check(checks.newest(models[name])) end
  end)

  it("rolls a createComment back whole: a missing post is 404, a taken id 409, and no count moves", function()
    for _, name in ipairs({ "V2", "V3" }) do
      local m = models[name]
      local before = assert(m:get_post("p2-1"))
      H.fails(404, m:create_comment({ id = "x", postId = "no-such-post",
        userId = "u1", username = "a", content = "c", creationDate = "d" }))
      local first = assert(m.posts:query(
        "SELECT TOP 1 VALUE p.id FROM p WHERE p.postId = 'p2-1' AND p.type = 'comment'"))[1]
      if first then
        H.fails(409, m:create_comment({ id = first, postId = "p2-1",
          userId = "u1", username = "a", content = "c", creationDate = "d" }))
      end
      local after = assert(m:get_post("p2-1"))
      assert.are.equal(before.commentCount, after.commentCount)
      assert.are.equal(before._etag, after._etag)
    end
  end)

  it("charges V3 less than V1 for Q2 to Q6, and the same 1 RU for Q1", function()
    local keys = all_keys()
    local function mean(m, method, list)
      local sum = 0
      for _, key in ipairs(list) do
        local _, charge = assert(m[method](m, key))
        sum = sum + charge
      end
      return sum / #list
    end
    local cases = {
      { "get_post", keys.posts }, { "list_user_posts", keys.users },
      { "list_comments", keys.posts }, { "list_likes", keys.posts },
    }
    for _, case in ipairs(cases) do
      local v1 = mean(models.V1, case[1], case[2])
      local v3 = mean(models.V3, case[1], case[2])
      assert(v3 < v1, ("%s: V3 %.2f RU, V1 %.2f RU"):format(case[1], v3, v1))
    end
    local _, q6v1 = assert(models.V1:list_recent_posts())
    local _, q6v3 = assert(models.V3:list_recent_posts())
    assert(q6v3 * 10 < q6v1, ("Q6: V3 %.2f RU, V1 %.2f RU"):format(q6v3, q6v1))
    for _, name in ipairs(NAMES) do
      local _, q1 = assert(models[name]:get_user("u1"))
      assert.are.equal(1, q1)
    end
  end)

  it("leaves no change unprocessed, no dead letter, and every invariant holding", function()
    for _, name in ipairs(NAMES) do
      local m = models[name]
      if m.lag then
        assert.are.equal(0, m:lag())
        assert.are.equal(0, m:dead_letters())
      end
      assert_check(m.db:verify())
    end
  end)

  it("runs the benchmark end to end: every cell of its table filled and every check true", function()
    local json_path = H.tmpdir() .. ".json"
    local has_sqlite = pcall(require, "luasql.sqlite3")
    local cmd = H.lua_cmd("examples/blog/bench.lua") ..
      (" --scale %g --seed %d --time 0.01 --json %s%s 2>&1"):format(SCALE,
        SEED, json_path, has_sqlite and "" or " --no-sqlite")
    local out, ok = H.run(cmd)
    local f = io.open(json_path, "r")
    local text = f and f:read("*a")
    if f then f:close() end
    os.remove(json_path)
    assert(ok, out)
    assert.matches("every check passed", out)
    local report = assert(require("regolith").json.decode(assert(text, out)))
    assert.are.same(size, report.dataset)
    assert.is_true(report.load.items_per_second > 0)
    for _, r in ipairs(common.REQUESTS) do
      for _, name in ipairs(NAMES) do
        local cell = report.requests[r[1]][name]
        assert.is_true(cell.p50_us > 0 and cell.p99_us >= cell.p50_us, r[1])
        assert.is_true(cell.ru >= 1, r[1])
      end
      if has_sqlite then assert.is_true(report.sqlite[r[1]].p50_us > 0) end
    end
    local n = 0
    for name, passed in pairs(report.checks) do
      assert(passed == true, name)
      n = n + 1
    end
    assert.is_true(n >= 16)
  end)

  it("stores the article's procedures and trigger in the database", function()
    for _, name in ipairs({ "V2", "V3" }) do
      assert.are.same({ "createComment", "createLike", "updateUsernames" },
        models[name].posts:procedures())
    end
    assert.are.same({ "truncateFeed" }, models.V3.feed:triggers())
    assert.are.equal(100, scripts.MAX_FEED)
  end)
end)
