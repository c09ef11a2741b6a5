--[[
tool: what load.sh does outside nginx, in a process of its own on the same
database (run from the repository root, as load.sh does):

    lua5.4 examples/openresty/tool.lua load DB KEYS SCALE
        opens the model on DB, loads the data set at SCALE through it (C1
        to C4) and writes the keys the load mix may use to KEYS
    lua5.4 examples/openresty/tool.lua wait URL SECONDS
        waits until the server's processors have nothing left to do
    lua5.4 examples/openresty/tool.lua check DB URL KEYS
        db:verify(), the model's correctness checks, and the HTTP answers
        compared with the model's own on a sample of keys

Each prints what it did; a failed check makes the exit status 1.
]]

local regolith = require "regolith"
local model = require "model"

local json = regolith.json

local function now()
  local ok, system = pcall(require, "system")
  if ok then return system.monotime() end
  return os.time()
end

-- The body of GET url, decoded, and the HTTP status.
local function get(url)
  local p = assert(io.popen(("curl -s -w '\\n%%{http_code}' '%s'"):format(url)))
  local out = p:read("*a")
  p:close()
  local body, code = out:match("^(.*)\n(%d+)$")
  if not body then return nil, 0 end
  return json.decode(body), tonumber(code)
end

-- The sync mode load.sh gives nginx's workers, for this process too.
local OPTS = { sync = os.getenv("REGOLITH_SYNC") }

local function load(path, keys, scale)
  local db = assert(regolith.open(path, OPTS))
  local m = model.open(db)
  local gen = model.generator(scale)
  local t0 = now()
  local stats = model.load(m, gen)
  local f = assert(io.open(keys, "w"))
  local posts = 0
  for u = 1, gen.users do
    local user = gen:user(u)
    f:write("u ", user.id, " ", user.username, "\n")
    for k = 1, gen:posts_of(u) do
      f:write("p ", gen:post(u, k).post.id, "\n")
      posts = posts + 1
    end
  end
  f:close()
  local st = db:stats()
  db:close()
  io.write(("%s: loaded %d users, %d posts: %d items in %.1f s\n"):format(
    model.name, gen.users, posts, st.items, now() - t0))
  return stats
end

local function wait(url, seconds)
  local t0 = now()
  local st, code
  repeat
    st, code = get(url .. "/admin/processors")
    if code == 200 and st.lag == 0 then
      if st.dead_letters > 0 then
        io.write(("processors: %d dead letters\n"):format(st.dead_letters))
        os.exit(1)
      end
      return
    end
    os.execute("sleep 0.2")
  until now() - t0 > seconds
  io.write(("processors still behind after %d s: %s\n"):format(seconds,
    st and json.encode(st) or ("HTTP " .. tostring(code))))
  os.exit(1)
end

-- A canonical text of a value (keys sorted), to compare answers.
local function canon(v)
  if type(v) ~= "table" then return json.encode(v) end
  if v[1] ~= nil or getmetatable(v) == getmetatable(regolith.array()) then
    local out = {}
    for i = 1, #v do out[i] = canon(v[i]) end
    return "[" .. table.concat(out, ",") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do keys[i] = json.encode(k) .. ":" .. canon(v[k]) end
  return "{" .. table.concat(keys, ",") .. "}"
end

-- Every read request over HTTP and directly, on a sample of the keys.
local function http_answers(m, url, keys)
  local users, posts = {}, {}
  for line in io.lines(keys) do
    local kind, key = line:match("^(%a) (%S+)")
    if kind == "u" then users[#users + 1] = key
    elseif kind == "p" then posts[#posts + 1] = key end
  end
  local asks = { { "/feed", m.list_recent_posts } }
  local function sample(list, n, add)
    local step = math.max(1, math.floor(#list / n))
    for i = 1, #list, step do add(list[i]) end
  end
  sample(users, 10, function(id)
    asks[#asks + 1] = { "/users/" .. id, m.get_user, id }
    asks[#asks + 1] = { "/users/" .. id .. "/posts", m.list_user_posts, id }
  end)
  sample(posts, 10, function(id)
    asks[#asks + 1] = { "/posts/" .. id, m.get_post, id }
    asks[#asks + 1] = { "/posts/" .. id .. "/comments", m.list_comments, id }
    asks[#asks + 1] = { "/posts/" .. id .. "/likes", m.list_likes, id }
  end)
  for _, ask in ipairs(asks) do
    local body, code = get(url .. ask[1])
    local want = ask[2](m, ask[3])
    if code ~= 200 then
      return false, ("GET %s answered %d"):format(ask[1], code)
    end
    if canon(body) ~= canon(want) then
      return false, ("GET %s differs from the model's own answer"):format(ask[1])
    end
  end
  return true, nil, #asks
end

local function check(path, url, keys)
  local db = assert(regolith.open(path, OPTS))
  local m = model.open(db)
  local failed = false
  local function report(name, ok, msg)
    io.write(("  %-50s %s\n"):format(name, ok and "ok" or "FAILED"))
    if not ok then
      failed = true
      if msg then io.write("    ", tostring(msg), "\n") end
    end
  end
  -- waits until the processors, which run in the server, have caught up
  local function wait()
    for _ = 1, 1200 do
      if m:lag() == 0 then return end
      os.execute("sleep 0.1")
    end
    error("the processors are still behind after 120 s")
  end
  local ok, why = db:verify()
  report("db:verify()", ok, why)
  for _, c in ipairs(model.checks(m, wait)) do report(c[1], c[2], c[3]) end
  local same, msg, n = http_answers(m, url, keys)
  report(("HTTP answers = the model's (%s requests)"):format(n or "?"), same,
    msg)
  db:close()
  if failed then os.exit(1) end
end

local cmd = arg[1]
if cmd == "load" then load(arg[2], arg[3], tonumber(arg[4]))
elseif cmd == "wait" then wait(arg[2], tonumber(arg[3]))
elseif cmd == "check" then check(arg[2], arg[3], arg[4])
else
  io.stderr:write("usage: tool.lua load DB KEYS SCALE | wait URL SECONDS | " ..
    "check DB URL KEYS\n")
  os.exit(2)
end
