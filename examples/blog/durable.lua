--[[
A durable write beside SQLite's, interleaved: the blog's C3 (create a
comment) with sync "full" in regolith's V1 and in SQLite (WAL,
synchronous=FULL), one call of each in turn, so that both meet the same
disk (on a shared machine a flush can take 0.1 ms one second and 4 ms the
next).

  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/blog/durable.lua --dir DIR [--n 2000] [--sync none]
                                     [--indexes sqlite]

DIR holds the databases examples/blog/bench.lua --dir DIR loaded (V1 and
sqlite.db); the comments go to posts sampled from the data set, as the
bench's own C3 does.  Prints the median and 99th percentile of each, and their ratio.
With --sync none neither side flushes: what is left is the request's own
work and its writes to the page cache, the part of a durable write that is
not the flush.

The V1 container indexes every property of a comment (the default policy,
as in the article): a create writes about eight index entries where
SQLite's schema keeps two B-trees for comments (the rows by id and
comments_by_post).  --indexes sqlite times the same creates in a container
that indexes what SQLite's schema does (the id, which is the key, and
/postId), made once in the V1 database from a copy of its posts container,
so that its trees are as big: the same work on both sides.
]]

local here = (arg and arg[0] or ""):match("^(.*)/blog/durable%.lua$") or "examples"
package.path = here .. "/?.lua;" .. package.path

local regolith = require "regolith"
local system = require "system"
local data = require "blog.data"
local v1 = require "blog.v1"
local sqlite = require "blog.sqlite"

local USAGE = "usage: durable.lua --dir DIR [--n N] [--sync full|none] [--indexes all|sqlite]"

local args = { n = 2000, dir = nil, sync = "full", indexes = "all" }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or arg[i + 1] == nil then
      error(USAGE)
    end
    args[k] = arg[i + 1]
    i = i + 2
  end
  args.n = tonumber(args.n)
  if not args.dir or (args.sync ~= "full" and args.sync ~= "none")
     or (args.indexes ~= "all" and args.indexes ~= "sqlite") then
    error(USAGE)
  end
end

local now = system.monotime
local db = assert(regolith.open(args.dir .. "/V1", { sync = args.sync }))
local m = v1.open(db)
local create = function (c) return m:create_comment(c) end
if args.indexes == "sqlite" then
  local same = db:container("c3_same_indexes")
  if not same then
    local spec = {}
    for k, v in pairs(v1.POSTS_SPEC) do spec[k] = v end
    spec.indexing = { included = { "/postId/?" }, excluded = { "/*" } }
    same = assert(db:create_container("c3_same_indexes", spec))
    local rows = assert(m.posts:query("SELECT * FROM c"))
    assert(same:bulk_load(rows))   -- each copy gets system properties of its own
  end
  create = function (c)
    return same:create(v1.comment_item(c))
  end
end
local s = sqlite.open(args.dir .. "/sqlite.db", { sync = args.sync })
local tag = ("d%d-%d"):format(os.time(), math.random(1, 1e9))   -- two runs in one second

-- The posts commented on: sampled from the data set as bench.lua samples
-- them, so that the writes land all over the trees.
local posts = {}
do
  local f = assert(io.open(args.dir .. "/V1.json"))
  local marker = assert(regolith.json.decode(f:read("*a")))
  f:close()
  local gen = data.new(marker.scale, marker.seed)
  local r = data.rng(marker.seed, 0, 99991)
  for i = 1, 500 do
    local u = r:int(1, gen.users)
    posts[i] = gen:post_id(u, r:int(1, gen:posts_of(u)))
  end
end

local function comment(i)
  return { id = ("%s-c%d"):format(tag, i), postId = posts[(i - 1) % #posts + 1],
    userId = "u-durable", username = "durable",
    content = "A comment timed beside SQLite's.",
    creationDate = data.iso(-10 ^ 12 + i) }
end

local function quantile(t, q)
  table.sort(t)
  return t[math.max(1, math.ceil(#t * q))]
end

local rl, sl = {}, {}
for i = 1, args.n do
  local t0 = now()
  assert(create(comment(i)))
  local t1 = now()
  assert(s:create_comment(comment(i)))
  local t2 = now()
  if i > 50 then rl[#rl + 1], sl[#sl + 1] = t1 - t0, t2 - t1 end
end
local r50, s50 = quantile(rl, 0.5) * 1e6, quantile(sl, 0.5) * 1e6
local same = args.indexes == "sqlite"
print(("C3 create a comment, sync %s, %d calls each, interleaved%s"):format(args.sync, #rl,
  same and ", the indexes of SQLite's schema" or ""))
print(("  regolith %-3s p50 %6.0f µs  p99 %7.0f µs"):format(
  same and "" or "V1", r50, quantile(rl, 0.99) * 1e6))
print(("  SQLite       p50 %6.0f µs  p99 %7.0f µs"):format(s50, quantile(sl, 0.99) * 1e6))
print(("  ratio of the medians: %.2f"):format(r50 / s50))
s:close()
db:close()
