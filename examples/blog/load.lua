--[[
blog.load: loads the generated data set into a model.

As the article's own load would, the initial data goes in by bulk load
(c:bulk_load): each model says, in bulk_sources, which documents each of
its containers starts with (V2 and V3 write the counts and usernames the
loader knows into the posts, comments and likes, as createComment,
createLike and the application would have).  Bulk load runs no trigger and
no procedure; the processors see every bulk-loaded item in the change feed
and run as an application would run them, after each container's load and
until idle at the end, so that they make every copy the model keeps (V3's
post copies in users and feed).

With opts.requests, the data goes in through the model's own commands
instead: C1 for every user, then for every post C2, C3 and C4 (each
model's load_post groups them as its semantics allow: V1 in transactional
batches, V2 and V3 through the createComment and createLike procedures
given all of a post's comments or likes at once), the processors running
every few thousand writes.

    local load = require "blog.load"
    local stats = load.run(model, gen, { label = "V2" })
    -- stats = {items, seconds, charge, users, posts, comments, likes}
]]

local system = require "system"

local M = {}

local now = system.monotime

-- Is stderr a terminal?  (Then progress rewrites one line.)
local tty
local function is_tty()
  if tty == nil then
    local ok = os.execute("test -t 2")       -- true (5.4) or 0 (LuaJIT)
    tty = ok == true or ok == 0
  end
  return tty
end

M.is_tty = is_tty

-- A progress reporter: rewrites one line on a terminal (at most every
-- 0.25 s), prints a line every 10 s otherwise.
function M.progress(label, total)
  local t0 = now()
  local last = t0
  local every = is_tty() and 0.25 or 10
  local shown = false
  local self = {}
  function self.update(done)
    local t = now()
    if t - last < every then return end
    last = t
    local rate = done / math.max(t - t0, 1e-9)
    local line = ("%s: %5.1f%%  %d of %d items  %.0f items/s"):format(label,
      100 * done / math.max(total, 1), done, total, rate)
    if is_tty() then io.stderr:write("\r", line, "   ")
    else io.stderr:write(line, "\n") end
    shown = true
  end
  function self.done()
    if shown and is_tty() then io.stderr:write("\r", (" "):rep(72), "\r") end
  end
  return self
end

local PUMP_EVERY = 5000     -- writes between two runs of the processors
-- Documents per bulk-load transaction (BLOG_BULK_BATCH to try others).
-- Larger batches load faster while the database is small, but each batch
-- leaves the pages it rewrote free behind it: 5,000 keeps the file within
-- some 10 % of its pages in use at scale 0.01 (docs/performance.md).
local BULK_BATCH = tonumber(os.getenv("BLOG_BULK_BATCH")) or 5000
M.BULK_BATCH = BULK_BATCH

-- An iterator over gen's users, each made into a document by `make`.
function M.users(gen, make)
  local u = 0
  return function()
    u = u + 1
    if u <= gen.users then return make(gen:user(u)) end
  end
end

-- An iterator over gen's posts, each followed by its comments and its
-- likes, made into documents by make(post, comments, likes, kind, i).
function M.posts(gen, make)
  local u, k, g, kind, i = 1, 0, nil, nil, 0
  return function()
    while true do
      if g and kind == "post" then
        kind, i = "comment", 0
        return make(g, "post", 0)
      end
      if g and kind == "comment" then
        i = i + 1
        if i <= #g.comments then return make(g, "comment", i) end
        kind, i = "like", 0
      end
      if g and kind == "like" then
        i = i + 1
        if i <= #g.likes then return make(g, "like", i) end
        g = nil
      end
      k = k + 1
      if k > gen:posts_of(u) then
        u, k = u + 1, 1
        if u > gen.users then return nil end
      end
      g, kind = gen:post(u, k), "post"
    end
  end
end

-- The bulk load (see the top); nil when the database has none (a
-- cluster's answers 501 before writing anything).
local function bulk_run(m, gen, opts, total, progress)
  local t0 = now()
  local items, charge, done = 0, 0, 0
  for _, src in ipairs(m:bulk_sources(gen)) do
    local res, info, status = src.container:bulk_load(src.docs, {
      batch = opts.batch or BULK_BATCH, transaction = opts.transaction,
      memory = opts.memory,
      progress = function(n)
        if not opts.quiet then progress.update(done + n) end
        if opts.watch then opts.watch(done + n) end
      end })
    if not res and status == 501 and items == 0 then return nil end
    if not res then error(("bulk load of %s: %s (%s)"):format(
      src.container:name(), tostring(info), tostring(status))) end
    if res.failed > 0 then
      error(("bulk load of %s: %d documents refused, the first: %s"):format(
        src.container:name(), res.failed, res.errors[1].message))
    end
    items, charge, done = items + res.written, charge + info.charge,
      done + res.written
    m:pump()
  end
  progress.done()
  assert(items == total, "the load wrote another number of items")
  return items, charge, now() - t0
end

-- Loads gen's data set into model m.  opts.label names it in the progress
-- line; opts.quiet turns progress off; opts.batch is the bulk load's batch
-- (default BULK_BATCH), opts.transaction its transaction ("load": the
-- whole of each container's load in one; opts.memory what it holds
-- before it merges, bulk_load's memory); opts.watch(done) is called after each bulk-load
-- batch with the items loaded so far; opts.requests loads through the
-- model's commands instead of by bulk load (as on a database without
-- one: a cluster).
function M.run(m, gen, opts)
  opts = opts or {}
  local size = gen:size()
  local total = size.users + size.posts + size.comments + size.likes
  local progress = M.progress(opts.label or m.name, total)
  local items, charge, seconds
  if not opts.requests then
    items, charge, seconds = bulk_run(m, gen, opts, total, progress)
  end
  if items then
    return { items = items, seconds = seconds, charge = charge, bulk = true,
             users = size.users, posts = size.posts,
             comments = size.comments, likes = size.likes }
  end
  local t0 = now()
  local since_pump
  items, charge, since_pump = 0, 0, 0
  for u = 1, gen.users do
    local _, c = assert(m:create_user(gen:user(u)))
    items, charge = items + 1, charge + c
    if not opts.quiet then progress.update(items) end
  end
  for u = 1, gen.users do
    for k = 1, gen:posts_of(u) do
      local p = gen:post(u, k)
      local n, c = assert(m:load_post(p.post, p.comments, p.likes))
      items, charge = items + n, charge + c
      since_pump = since_pump + n
      if since_pump >= PUMP_EVERY then
        m:pump()
        since_pump = 0
      end
      if not opts.quiet then progress.update(items) end
    end
  end
  m:pump()
  progress.done()
  assert(items == total, "the load wrote another number of items")
  return { items = items, seconds = now() - t0, charge = charge,
           users = size.users, posts = size.posts, comments = size.comments,
           likes = size.likes }
end

return M
