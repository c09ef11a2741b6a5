--[[
A short tour of regolith: a database, a partitioned container, items and
their request charges, a conditional write, a partial update and a
transactional batch.

  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/tour.lua
]]

local regolith = require "regolith"

local path = os.tmpname()
os.remove(path)
local db = assert(regolith.open(path))

local function show(what, info)
  print(("%-44s %7.2f RU  status %d"):format(what, info.charge, info.status))
end

-- A container of posts, partitioned by post id, on 4 physical partitions.
local posts = assert(db:create_container("posts", {
  partition_key = "/postId",
  physical_partitions = 4,
}))

-- Create a post and its comments: they share the post's logical partition.
local post, info = assert(posts:create({
  id = "p1", postId = "p1", type = "post", title = "Hello, regolith",
  content = "A document database inside a Lua process.", commentCount = 0,
}))
show("create the post", info)

for i = 1, 3 do
  local _, ci = assert(posts:create({
    id = "c" .. i, postId = "p1", type = "comment",
    content = "Comment number " .. i,
  }))
  show("create comment " .. i, ci)
end

-- A point read costs 1 RU per KB.
local got, ri = assert(posts:read("p1", "p1"))
show("read the post", ri)

-- Optimistic concurrency: a write conditioned on the etag we read.
local _, ui = assert(posts:replace({
  id = "p1", postId = "p1", type = "post", title = got.title,
  content = got.content, commentCount = 3,
}, { if_match = got._etag }))
show("replace it, if unchanged since the read", ui)
local _, msg, status = posts:replace(got, { if_match = got._etag })
print(("%-44s %s (%d)"):format("replace again with the old etag", msg, status))

-- A partial update.
local patched, pi = assert(posts:patch("p1", "p1", {
  { op = "incr", path = "/commentCount", value = 1 },
  { op = "add", path = "/tags", value = { "lua" } },
}))
show("patch: commentCount + 1, add tags", pi)
print(("  commentCount is now %d"):format(patched.commentCount))

-- A transactional batch: all or nothing inside one logical partition.
local results, bi = assert(posts:batch("p1", {
  { op = "create", doc = { id = "c4", postId = "p1", type = "comment" } },
  { op = "patch", id = "p1", ops = { { op = "incr", path = "/commentCount", value = 1 } } },
}))
show(("batch of %d operations"):format(#results), bi)
local failed, bmsg, bstatus = posts:batch("p1", {
  { op = "create", doc = { id = "c5", postId = "p1", type = "comment" } },
  { op = "create", doc = { id = "c1", postId = "p1", type = "comment" } },
})
print(("%-44s %s (%d)"):format("a batch whose second create conflicts", bmsg, bstatus))
print(("  c5 was rolled back: %s"):format(select(3, posts:read("c5", "p1")) == 404))

local stats = db:stats()
print(("\n%d items, %d bytes of JSON, change-feed sequence number %d"):format(
  stats.items, stats.bytes, stats.lsn))

db:close()
os.execute("rm -rf '" .. path .. "'")
