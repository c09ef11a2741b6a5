--[[
mix: the load wrk drives (wrk -s mix.lua URL -- KEYS [reads|static]): a
read-heavy mix of the blog's ten requests on the keys tool.lua wrote (with
`reads`, its reads alone; with `static`, GET /static alone).

    reads  90%: Q1 user 15, Q2 post 25, Q3 user's posts 15,
                Q4 comments 15, Q5 likes 10, Q6 feed 10
    writes 10%: C1 user edit 1, C2 new post 2, C3 comment 4, C4 like 3

New posts, comments and likes get ids no other thread or run uses; a user
edit sends the user's own name (an edit that renames would set the
processors off to rename everything the user wrote).  done() prints one
line, RESULT ..., that load.sh reads.
]]

local users, names, posts = {}, {}, {}
local run = tostring(os.time())
local seq = 0
local REQUESTS, total         -- below; total: the sum of their shares

function setup(thread)
  counter = (counter or 0) + 1
  thread:set("tid", counter)
end

function init(args)
  for line in io.lines(args[1]) do
    local kind, key, extra = line:match("^(%a) (%S+) ?(%S*)")
    if kind == "u" then
      users[#users + 1] = key
      names[key] = extra
    elseif kind == "p" then
      posts[#posts + 1] = key
    end
  end
  math.randomseed(os.time() * 100 + tid)
  -- `reads`: the reads alone, in the same proportions; `static`: only
  -- GET /static (nginx's own answer, no Lua: load.sh's anchor)
  if args[2] == "reads" then
    for i = #REQUESTS, 7, -1 do REQUESTS[i] = nil end
  elseif args[2] == "static" then
    REQUESTS = { { 1, function() return wrk.format("GET", "/static") end } }
  end
  total = 0
  for _, r in ipairs(REQUESTS) do total = total + r[1] end
end

local function pick(list) return list[math.random(#list)] end

local function unique()
  seq = seq + 1
  return ("%s-%d-%d"):format(run, tid, seq)
end

-- An ISO 8601 date, 7 decimals as the data set's, unique to this request.
local function date()
  return os.date("!%Y-%m-%dT%H:%M:%S", os.time()) ..
    (".%07dZ"):format((tid * 1000000 + seq) % 10000000)
end

local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return ("\\u%04x"):format(c:byte())
  end) .. '"'
end

local function post(path, fields, method)
  local parts = {}
  for i = 1, #fields, 2 do
    parts[#parts + 1] = json_string(fields[i]) .. ":" .. json_string(fields[i + 1])
  end
  return wrk.format(method or "POST", path,
    { ["Content-Type"] = "application/json" },
    "{" .. table.concat(parts, ",") .. "}")
end

REQUESTS = {
  { 15, function() return wrk.format("GET", "/users/" .. pick(users)) end },
  { 25, function() return wrk.format("GET", "/posts/" .. pick(posts)) end },
  { 15, function() return wrk.format("GET", "/users/" .. pick(users) .. "/posts") end },
  { 15, function() return wrk.format("GET", "/posts/" .. pick(posts) .. "/comments") end },
  { 10, function() return wrk.format("GET", "/posts/" .. pick(posts) .. "/likes") end },
  { 10, function() return wrk.format("GET", "/feed") end },
  { 1, function()
    local u = pick(users)
    return post("/users/" .. u, { "username", names[u] }, "PUT")
  end },
  { 2, function()
    local u = pick(users)
    local id = "w" .. unique()
    return post("/posts", { "id", id, "userId", u, "username", names[u],
      "title", "a post written under load", "content",
      ("under load, " .. id .. ". "):rep(8), "creationDate", date() })
  end },
  { 4, function()
    local u = pick(users)
    return post("/posts/" .. pick(posts) .. "/comments", { "id", "wc" .. unique(),
      "userId", u, "username", names[u], "content", "a comment under load",
      "creationDate", date() })
  end },
  { 3, function()
    local u = pick(users)
    return post("/posts/" .. pick(posts) .. "/likes", { "id", "wl" .. unique(),
      "userId", u, "username", names[u], "creationDate", date() })
  end },
}

function request()
  local x = math.random(total)
  for _, r in ipairs(REQUESTS) do
    if x <= r[1] then return r[2]() end
    x = x - r[1]
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(("RESULT requests=%d seconds=%.2f rps=%.1f p50=%.2f p90=%.2f " ..
    "p99=%.2f p999=%.2f max=%.2f errors=%d status=%d connect=%d read=%d " ..
    "write=%d timeout=%d\n"):format(summary.requests,
    summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency:percentile(99.9) / 1000,
    latency.max / 1000, e.status + e.connect + e.read + e.write + e.timeout,
    e.status, e.connect, e.read, e.write, e.timeout))
end
