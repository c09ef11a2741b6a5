--[[
Procedure benchmarks: the article's createComment (read the post, count
the comment, replace the post, create the comment) run as a stored
procedure, against the same three calls made one by one through the
container API; and the overhead of calling an empty procedure.  With sync
"none" (the CPU cost) and "full" (the default: every call a durable commit).

Run from the repository root (make bench does):
  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/bench/scripts.lua [--n 5000] [--n_full 300] [--json FILE]

Figures are per call, in microseconds: the median and the 99th percentile
of the individual calls.
]]

local regolith = require "regolith"
local system = require "system"

local args = { n = 5000, n_full = 300, json = nil }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or args[k] == nil and k ~= "json" or arg[i + 1] == nil then
      error("usage: scripts.lua [--n N] [--n_full N] [--json FILE]")
    end
    args[k] = arg[i + 1]
    i = i + 2
  end
  args.n = tonumber(args.n)
  args.n_full = tonumber(args.n_full)
end

local now = system.monotime

local CREATE_COMMENT = [[
return function(ctx, postId, comment)
  local post, msg, status = ctx:read(postId)
  if not post then ctx:abort(msg, status) end
  post.commentCount = post.commentCount + 1
  assert(ctx:replace(post))
  comment.postId = postId
  assert(ctx:create(comment))
end]]

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  return p
end

local function quantiles(t)
  table.sort(t)
  return t[math.floor(#t / 2) + 1], t[math.max(1, math.ceil(#t * 0.99))]
end

-- Times fn(i) for i = 1..n, one call at a time; median and p99 in µs.
local function timed(n, fn)
  local per = {}
  for i = 1, math.floor(n / 10) do fn(-i) end   -- warm up (caches, pages)
  for i = 1, n do
    local t0 = now()
    fn(i)
    per[i] = (now() - t0) * 1e6
  end
  return quantiles(per)
end

local content = ("The quick brown fox jumps over the lazy dog. "):rep(10)

local function post(i)
  return { id = "post" .. i, postId = "post" .. i, type = "post",
           userId = "user" .. (i % 97), userUsername = "someone",
           title = "Post number " .. i, content = content,
           commentCount = 0, likeCount = 0, creationDate = "2024-01-01T00:00:00Z" }
end

local function comment(i, k)
  return { id = ("comment-%d-%d"):format(i, k), type = "comment",
           userId = "user" .. (k % 97), userUsername = "someone",
           content = "A comment of modest length, as comments are.",
           creationDate = "2024-01-02T00:00:00Z" }
end

local function run(sync, n)
  local path = tmpdir()
  local db = assert(regolith.open(path, { sync = sync }))
  local posts = assert(db:create_container("posts", { partition_key = "/postId" }))
  local nposts = 200
  for i = 1, nposts do assert(posts:create(post(i))) end
  assert(posts:create_procedure("createComment", CREATE_COMMENT))
  assert(posts:create_procedure("empty", "return function() end"))
  local k, out, charge = 0, {}, {}

  out.procedure = { timed(n, function()
    k = k + 1
    local pid = "post" .. (k % nposts + 1)
    local _, info = assert(posts:execute("createComment", pid, pid, comment(0, k)))
    charge.procedure = info.charge
  end) }

  out.three_calls = { timed(n, function()
    k = k + 1
    local pid = "post" .. (k % nposts + 1)
    local p, i1 = assert(posts:read(pid, pid))
    p.commentCount = p.commentCount + 1
    local _, i2 = assert(posts:replace(p))
    local c = comment(0, k)
    c.postId = pid
    local _, i3 = assert(posts:create(c))
    charge.three_calls = i1.charge + i2.charge + i3.charge
  end) }

  out.empty_procedure = { timed(n, function()
    local _, info = assert(posts:execute("empty", "post1"))
    charge.empty_procedure = info.charge
  end) }

  out.point_read = { timed(n, function()
    local _, info = assert(posts:read("post1", "post1"))
    charge.point_read = info.charge
  end) }

  -- the counts are right: every comment counted once
  local total = 0
  for i = 1, nposts do total = total + posts:read("post" .. i, "post" .. i).commentCount end
  assert(total == k, "commentCount out of step with the comments created")

  db:close()
  os.execute("rm -rf '" .. path .. "'")
  return out, charge
end

local results = {}
print(("%-8s %-16s %10s %10s %9s"):format("sync", "operation", "median µs", "p99 µs", "charge"))
for _, cfg in ipairs({ { "none", args.n }, { "full", args.n_full } }) do
  local out, charge = run(cfg[1], cfg[2])
  results[cfg[1]] = { times = out, charge = charge }
  for _, op in ipairs({ "procedure", "three_calls", "empty_procedure", "point_read" }) do
    print(("%-8s %-16s %10.1f %10.1f %9.2f"):format(cfg[1], op, out[op][1], out[op][2],
                                                   charge[op]))
  end
  print(("%-8s procedure / three calls: %.2f"):format(cfg[1],
    out.procedure[1] / out.three_calls[1]))
end

if args.json then
  local f = assert(io.open(args.json, "w"))
  f:write(assert(regolith.json.encode(results)), "\n")
  f:close()
end
