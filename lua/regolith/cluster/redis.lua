--[[
regolith.cluster.redis: a Redis Cluster client in plain Lua.

    local redis = require "regolith.cluster.redis"
    local c, err = redis.connect({ "127.0.0.1:7000", "127.0.0.1:7001" }, opts)
    c:call("HGET", key, field)            -> reply | nil, message, kind
    c:pipeline{ {"HGET", k1, f}, {"GET", k2} } -> { reply | error, ... }
    c:fcall(name, keys, args) / c:fcall_ro(name, keys, args)
    c:call_node(addr, ...)                -> one command on one node
    c:primaries()                         -> { "host:port", ... }
    c:close()

Transport.  Inside OpenResty, where cosockets can run (`ngx.socket.tcp`),
the client uses them, so no nginx worker blocks; elsewhere (or in phases
without cosockets) it uses LuaSocket.  The choice is made when a client is
created; everything above the transport is the same code.  Under OpenResty a
client belongs to one request (cosockets cannot cross requests): create it
in the request and `close` it, which puts the connections back into nginx's
keepalive pool.

Replies.  RESP2 by default; `opts.protocol = 3` sends HELLO 3 on every
connection and RESP3 replies are understood (maps become tables with keys,
sets arrays, doubles and booleans Lua values).  A null is `redis.null`,
never nil, so nil always means failure.

Errors.  `nil, message, kind` where kind is
  "redis"       the server answered with an error (the message is its text);
  "connection"  no node could be reached within the retry budget;
  "in_doubt"    the connection broke after a write was sent: it may or may
                not have been applied;
  "cluster"     redirections or TRYAGAIN/CLUSTERDOWN went on past the budget.
In a pipeline's result, a failed command's entry is an error object
(`redis.is_error(v)`, with `v.message` and `v.kind`), the others are
replies.

Cluster.  The slot map comes from CLUSTER SLOTS.  MOVED updates the slot and
refreshes the whole map; ASK sends ASKING and the command to the named node
once; TRYAGAIN and CLUSTERDOWN back off (bounded, exponential with jitter)
and retry; a connection that fails is dropped, the map refreshed from
another node, and the command retried.  Commands that only read are retried
after a broken connection too; writes are not (kind "in_doubt").
`c.stats` counts moved, ask, tryagain, clusterdown, reconnects, refreshes,
library_loads and round_trips (one per node per pipeline pass).
]]

local M = {}

local unpack = table.unpack or unpack
local concat, insert = table.concat, table.insert
local floor, random, min = math.floor, math.random, math.min

-- {==================================================================
-- Values
-- ===================================================================

M.null = setmetatable({}, { __tostring = function() return "null" end })

local error_mt = { __tostring = function(e) return e.message end }

local function new_error(message, kind)
  return setmetatable({ message = message, kind = kind }, error_mt)
end

function M.is_error(v)
  return getmetatable(v) == error_mt
end

-- }==================================================================

-- {==================================================================
-- CRC16 (XMODEM) and hash slots
-- ===================================================================

-- The table-driven CRC needs xor and shifts: LuaJIT's bit library, or Lua
-- 5.4's operators compiled from a string (so that LuaJIT never parses them).
local crc16
do
  local tab = {}
  local ok, bit = pcall(require, "bit")
  if ok and type(bit) == "table" and bit.bxor then
    local bxor, band, lshift, rshift = bit.bxor, bit.band, bit.lshift, bit.rshift
    for i = 0, 255 do
      local crc = lshift(i, 8)
      for _ = 1, 8 do
        if band(crc, 0x8000) ~= 0 then crc = bxor(lshift(crc, 1), 0x1021)
        else crc = lshift(crc, 1) end
        crc = band(crc, 0xFFFF)
      end
      tab[i] = crc
    end
    crc16 = function(s)
      local crc = 0
      for i = 1, #s do
        crc = band(bxor(lshift(crc, 8), tab[bxor(rshift(crc, 8), s:byte(i))]), 0xFFFF)
      end
      return crc
    end
  else
    crc16 = assert(load([[
      local tab = {}
      for i = 0, 255 do
        local crc = i << 8
        for _ = 1, 8 do
          if crc & 0x8000 ~= 0 then crc = (crc << 1) ~ 0x1021 else crc = crc << 1 end
          crc = crc & 0xFFFF
        end
        tab[i] = crc
      end
      return function(s)
        local crc = 0
        for i = 1, #s do
          crc = ((crc << 8) ~ tab[(crc >> 8) ~ s:byte(i)]) & 0xFFFF
        end
        return crc
      end]]))()
  end
end
M.crc16 = crc16

-- The hash slot of a key: the CRC of its hash tag (the bytes between the
-- first '{' and the next '}', when not empty), else of the whole key.
function M.slot(key)
  local open = key:find("{", 1, true)
  if open then
    local close = key:find("}", open + 1, true)
    if close and close > open + 1 then key = key:sub(open + 1, close - 1) end
  end
  return crc16(key) % 16384
end

-- }==================================================================

-- {==================================================================
-- Transports: LuaSocket or ngx.socket.tcp, the same methods
-- ===================================================================

local PHASES_WITHOUT_COSOCKETS = { init = true, init_worker = true, set = true,
  header_filter = true, body_filter = true, log = true }

local function cosockets_usable()
  local ngx = rawget(_G, "ngx")
  if type(ngx) ~= "table" or not (ngx.socket and ngx.socket.tcp) then return false end
  local ok, phase = pcall(ngx.get_phase)
  return ok and not PHASES_WITHOUT_COSOCKETS[phase]
end

-- A transport: connect(host, port, timeout) -> sock | nil, err; sleep(s);
-- now() in seconds; close(sock) (keepalive for cosockets).
local function cosocket_transport()
  local ngx = rawget(_G, "ngx")
  return {
    name = "cosocket",
    connect = function(host, port, timeout)
      local sock = ngx.socket.tcp()
      sock:settimeout(timeout * 1000)
      local ok, err = sock:connect(host, port)
      if not ok then return nil, err end
      return sock
    end,
    settimeout = function(sock, t) sock:settimeout(t * 1000) end,
    sleep = function(s) ngx.sleep(s) end,
    now = function() ngx.update_time(); return ngx.now() end,
    close = function(sock) if not sock:setkeepalive() then sock:close() end end,
  }
end

local function luasocket_transport()
  local ok, socket = pcall(require, "socket")
  if not ok then
    return nil, "LuaSocket is not installed (Debian: lua-socket): " .. tostring(socket)
  end
  return {
    name = "luasocket",
    connect = function(host, port, timeout)
      local sock = socket.tcp()
      sock:settimeout(timeout)
      local done, err = sock:connect(host, port)
      if not done then sock:close(); return nil, err end
      sock:setoption("tcp-nodelay", true)
      return sock
    end,
    settimeout = function(sock, t) sock:settimeout(t) end,
    sleep = socket.sleep,
    now = socket.gettime,
    close = function(sock) sock:close() end,
  }
end

function M.transport(name)
  if name == "cosocket" or (name == nil and cosockets_usable()) then
    return cosocket_transport()
  end
  return luasocket_transport()
end

-- }==================================================================

-- {==================================================================
-- RESP
-- ===================================================================

local function arg_string(v)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then
    if v == floor(v) and v > -2^53 and v < 2^53 then return string.format("%d", v) end
    return string.format("%.17g", v)
  end
  return tostring(v)
end

-- Appends the RESP encoding of one command (an array of arguments) to out.
local function encode(out, cmd)
  local n = #out
  out[n + 1] = "*" .. #cmd .. "\r\n"
  n = n + 1
  for i = 1, #cmd do
    local s = arg_string(cmd[i])
    out[n + 1] = "$" .. #s .. "\r\n"
    out[n + 2] = s
    out[n + 3] = "\r\n"
    n = n + 3
  end
end
M.encode = function(cmd) local out = {}; encode(out, cmd); return concat(out) end

-- Reads one reply.  Returns value, or error_object (a Redis error reply),
-- or nil, message on a broken connection.
local read_reply
local function read_aggregate(sock, n, pairs_)
  local t = {}
  for i = 1, pairs_ and 2 * n or n do
    local v, err = read_reply(sock)
    if v == nil then return nil, err end
    t[i] = v
  end
  if not pairs_ then return t end
  local m = {}
  for i = 1, 2 * n, 2 do
    local k = t[i]
    if k == M.null then k = "null" end
    m[k] = t[i + 1]
  end
  return m
end

function read_reply(sock)
  local line, err = sock:receive("*l")
  if not line then return nil, err end
  local kind, rest = line:sub(1, 1), line:sub(2)
  if kind == "+" then return rest
  elseif kind == "-" then return new_error(rest, "redis")
  elseif kind == ":" then return tonumber(rest)
  elseif kind == "$" or kind == "=" or kind == "!" then
    local n = tonumber(rest)
    if n < 0 then return M.null end
    local data, rerr = sock:receive(n + 2)
    if not data then return nil, rerr end
    data = data:sub(1, n)
    if kind == "!" then return new_error(data, "redis") end
    if kind == "=" then data = data:sub(5) end        -- "txt:" prefix
    return data
  elseif kind == "*" or kind == "~" or kind == ">" then
    local n = tonumber(rest)
    if n < 0 then return M.null end
    return read_aggregate(sock, n, false)
  elseif kind == "%" then return read_aggregate(sock, tonumber(rest), true)
  elseif kind == "|" then                             -- attributes: skipped
    local _, aerr = read_aggregate(sock, tonumber(rest), true)
    if aerr then return nil, aerr end
    return read_reply(sock)
  elseif kind == "_" then return M.null
  elseif kind == "#" then return rest == "t"
  elseif kind == "," then
    if rest == "inf" then return math.huge elseif rest == "-inf" then return -math.huge end
    return tonumber(rest) or 0 / 0
  elseif kind == "(" then return tonumber(rest) or rest
  end
  return nil, "protocol error: unexpected reply '" .. line:sub(1, 40) .. "'"
end

-- }==================================================================

-- {==================================================================
-- Commands: where their keys are, and which only read
-- ===================================================================

-- Commands whose first key is not the first argument (or have none).
local KEY_POSITION = {
  FCALL = "numkeys", FCALL_RO = "numkeys", EVAL = "numkeys", EVALSHA = "numkeys",
  EVAL_RO = "numkeys", EVALSHA_RO = "numkeys",
  PING = false, INFO = false, CLUSTER = false, FUNCTION = false, TIME = false,
  DBSIZE = false, FLUSHALL = false, FLUSHDB = false, WAIT = false, HELLO = false,
  READONLY = false, READWRITE = false, ASKING = false, CONFIG = false,
  SCRIPT = false, DEBUG = false, MIGRATE = false, SPUBLISH = 1,
}

-- Commands retried after a connection broke with the command sent.
local READ_ONLY = {}
for name in ([[GET MGET HGET HMGET HGETALL HEXISTS HLEN HKEYS HVALS HSCAN EXISTS
  TYPE TTL PTTL STRLEN GETRANGE LRANGE LLEN LINDEX SMEMBERS SISMEMBER SCARD
  ZRANGE ZRANGEBYLEX ZREVRANGEBYLEX ZRANGEBYSCORE ZREVRANGEBYSCORE ZCARD ZSCORE
  ZRANK ZCOUNT ZLEXCOUNT XRANGE XREVRANGE XLEN FCALL_RO EVAL_RO EVALSHA_RO PING
  INFO CLUSTER TIME DBSIZE]]):gmatch("%S+") do
  READ_ONLY[name] = true
end

-- The key that routes cmd, or nil when it has none.
local function command_key(cmd)
  local name = arg_string(cmd[1]):upper()
  local pos = KEY_POSITION[name]
  if pos == nil then pos = 1 end
  if pos == false then return nil end
  if pos == "numkeys" then
    if (tonumber(cmd[3]) or 0) < 1 then return nil end
    return arg_string(cmd[4])
  end
  return cmd[pos + 1] ~= nil and arg_string(cmd[pos + 1]) or nil
end
M.command_key = command_key

local function is_read_only(cmd)
  return READ_ONLY[arg_string(cmd[1]):upper()] == true
end

-- }==================================================================

-- {==================================================================
-- Nodes and the slot map
-- ===================================================================

local Client = {}
Client.__index = Client

local function split_addr(addr)
  local host, port = addr:match("^%[?([^%]]*)%]?:(%d+)$")
  if not host then return nil end
  return host, tonumber(port)
end

-- The connection to addr, made when first needed.
function Client:conn(addr)
  local sock = self.socks[addr]
  if sock then return sock end
  local host, port = split_addr(addr)
  if not host then return nil, "bad node address '" .. tostring(addr) .. "'" end
  local err
  sock, err = self.t.connect(host, port, self.connect_timeout)
  if not sock then return nil, addr .. ": " .. tostring(err) end
  self.t.settimeout(sock, self.timeout)
  local hello = {}
  if self.protocol == 3 then encode(hello, { "HELLO", 3 }) end
  if self.password then encode(hello, { "AUTH", self.user or "default", self.password }) end
  if #hello > 0 then
    local ok, serr = sock:send(concat(hello))
    for _ = 1, (self.protocol == 3 and 1 or 0) + (self.password and 1 or 0) do
      local v, rerr = ok and read_reply(sock)
      if v == nil or M.is_error(v) then
        sock:close()
        return nil, addr .. ": " .. tostring(serr or rerr or v)
      end
    end
  end
  self.socks[addr] = sock
  return sock
end

function Client:drop(addr)
  local sock = self.socks[addr]
  if sock then
    self.socks[addr] = nil
    pcall(sock.close, sock)
  end
end

-- Sends a list of commands to one node and reads their replies.  Returns
-- the replies, or nil, message, sent (sent: the commands reached the
-- socket, so their effect is unknown).
function Client:exchange(addr, cmds)
  local sock, err = self:conn(addr)
  if not sock then return nil, err, false end
  local out = {}
  for i = 1, #cmds do encode(out, cmds[i]) end
  local ok, serr = sock:send(concat(out))
  self.stats.round_trips = self.stats.round_trips + 1
  if not ok then
    self:drop(addr)
    return nil, addr .. ": " .. tostring(serr), false
  end
  local replies = {}
  for i = 1, #cmds do
    local v, rerr = read_reply(sock)
    if v == nil then
      self:drop(addr)
      return nil, addr .. ": " .. tostring(rerr), true
    end
    replies[i] = v
  end
  return replies
end

-- Reads the slot map from the first node that answers CLUSTER SLOTS: known
-- primaries first, then the seeds.
function Client:refresh()
  self.stats.refreshes = self.stats.refreshes + 1
  local tried, order = {}, {}
  for _, a in ipairs(self:primaries()) do order[#order + 1] = a end
  for _, a in ipairs(self.seeds) do order[#order + 1] = a end
  local last = "no node to ask"
  for _, addr in ipairs(order) do
    if not tried[addr] then
      tried[addr] = true
      local r, err = self:exchange(addr, { { "CLUSTER", "SLOTS" } })
      local v = r and r[1]
      if v and not M.is_error(v) and type(v) == "table" and #v > 0 then
        local host0 = split_addr(addr)
        local slots, replicas = {}, {}
        for _, range in ipairs(v) do
          local p = range[3]
          local host = (p[1] == "" or p[1] == M.null) and host0 or p[1]
          local primary = host .. ":" .. p[2]
          local reps = {}
          for j = 4, #range do
            local rh = range[j][1]
            if rh == "" or rh == M.null then rh = host0 end
            reps[#reps + 1] = rh .. ":" .. range[j][2]
          end
          replicas[primary] = reps
          for s = range[1], range[2] do slots[s + 1] = primary end
        end
        self.slots, self.replicas = slots, replicas
        return true
      end
      last = err or tostring(v)
    end
  end
  return nil, "cannot read the cluster's slot map: " .. last
end

function Client:primaries()
  local seen, out = {}, {}
  for s = 1, 16384 do
    local a = self.slots[s]
    if a and not seen[a] then seen[a] = true; out[#out + 1] = a end
  end
  table.sort(out)
  return out
end

function Client:node_for_slot(slot)
  return self.slots[slot + 1]
end

function Client:node_for(key)
  return self.slots[M.slot(key) + 1]
end

-- }==================================================================

-- {==================================================================
-- Calls with redirections and retries
-- ===================================================================

function Client:backoff(attempt)
  local cap = min(self.backoff_max, self.backoff_base * 2 ^ attempt)
  self.t.sleep(cap / 2 + random() * cap / 2)
end

local function error_kind(msg)
  return msg:match("^(%u+)")
end

-- Runs the commands of `cmds` (an array of arrays) through the cluster and
-- returns one result per command: its reply, or an error object.  `at`
-- optionally pins a command to a node address (at[i]).  Commands are grouped
-- by node, every node's group is sent before any reply is read, and the
-- commands that need another try (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, a lost
-- connection) go round again, up to the retry budget; with `no_tryagain`, a
-- TRYAGAIN is answered at once (an error of kind "tryagain": the caller has
-- another way, one key at a time).
function Client:run(cmds, at, no_tryagain)
  local results, pending = {}, {}
  local ask = {}                -- i -> node that answered ASK for command i
  for i = 1, #cmds do pending[#pending + 1] = i end
  local deadline = self.t.now() + self.retry_seconds
  local attempt, redirects = 0, 0
  while #pending > 0 do
    -- group by node
    local groups, order, retry = {}, {}, {}
    local redirected = false          -- (the budget counts rounds, not keys)
    local need_refresh = false
    local prev_addr
    for _, i in ipairs(pending) do
      local addr = ask[i] or (at and at[i])
      if not addr then
        local key = command_key(cmds[i])
        -- a keyless command (WAIT) goes where the command before it went
        addr = key and self:node_for(key) or prev_addr or self:primaries()[1]
      end
      prev_addr = addr
      if not addr then
        need_refresh = true
        retry[#retry + 1] = i
      else
        local g = groups[addr]
        if not g then g = { cmds = {}, idx = {} }; groups[addr] = g; order[#order + 1] = addr end
        if ask[i] then g.cmds[#g.cmds + 1] = { "ASKING" }; g.idx[#g.idx + 1] = false end
        g.cmds[#g.cmds + 1] = cmds[i]
        g.idx[#g.idx + 1] = i
      end
    end
    -- send every group, then read every group's replies
    local socks, sent_ok = {}, {}
    for _, addr in ipairs(order) do
      local g = groups[addr]
      local sock, err = self:conn(addr)
      if sock then
        local out = {}
        for j = 1, #g.cmds do encode(out, g.cmds[j]) end
        local ok, serr = sock:send(concat(out))
        self.stats.round_trips = self.stats.round_trips + 1
        if ok then socks[addr], sent_ok[addr] = sock, true
        else self:drop(addr); g.err = addr .. ": " .. tostring(serr) end
      else
        g.err = err
      end
    end
    for _, addr in ipairs(order) do
      local g = groups[addr]
      local sock = socks[addr]
      for j = 1, #g.cmds do
        local i = g.idx[j]
        local v, rerr
        if sock and not g.err then
          v, rerr = read_reply(sock)
          if v == nil then
            g.err = addr .. ": " .. tostring(rerr)
            self:drop(addr)
          end
        end
        if i then
          ask[i] = nil
          if g.err then
            -- a lost connection: reconnect through a fresh map; a write
            -- whose bytes went out is in doubt and is not sent again
            self.stats.reconnects = self.stats.reconnects + 1
            need_refresh = true
            if sent_ok[addr] and not is_read_only(cmds[i]) then
              results[i] = new_error("connection lost after the command was sent, "
                .. "its outcome is unknown: " .. g.err, "in_doubt")
            else
              retry[#retry + 1] = i
              results[i] = new_error(g.err, "connection")
            end
          elseif M.is_error(v) then
            local kind = error_kind(v.message)
            if kind == "MOVED" then
              local slot, to = v.message:match("^MOVED (%d+) (%S+)")
              self.slots[tonumber(slot) + 1] = to
              self.stats.moved = self.stats.moved + 1
              need_refresh = true
              redirected = true
              retry[#retry + 1] = i
              results[i] = new_error(v.message, "cluster")
            elseif kind == "ASK" then
              ask[i] = v.message:match("^ASK %d+ (%S+)")
              self.stats.ask = self.stats.ask + 1
              redirected = true
              retry[#retry + 1] = i
              results[i] = new_error(v.message, "cluster")
            elseif kind == "TRYAGAIN" and no_tryagain then
              self.stats.tryagain = self.stats.tryagain + 1
              results[i] = new_error(v.message, "tryagain")
            elseif kind == "TRYAGAIN" or kind == "CLUSTERDOWN" then
              local stat = kind == "TRYAGAIN" and "tryagain" or "clusterdown"
              self.stats[stat] = self.stats[stat] + 1
              if kind == "CLUSTERDOWN" then need_refresh = true end
              retry[#retry + 1] = i
              results[i] = new_error(v.message, "cluster")
            elseif self.library and v.message:find("Function not found", 1, true) and
                   not self.library_loaded_on[addr] then
              local ok, lerr = self:load_library(addr)
              if not ok then results[i] = new_error(lerr, "redis")
              else retry[#retry + 1] = i end
            else
              results[i] = v
            end
          else
            results[i] = v
          end
        end
      end
    end
    if #retry == 0 then break end
    if redirected then redirects = redirects + 1 end
    -- ASK alone is answered at once; every other retry waits a little
    local only_ask = not need_refresh
    for _, i in ipairs(retry) do if not ask[i] then only_ask = false end end
    attempt = attempt + 1
    if redirects > self.max_redirects or self.t.now() > deadline then break end
    if not only_ask then self:backoff(attempt) end
    if need_refresh then self:refresh() end
    pending = retry
  end
  return results
end

-- One command; the cluster routes it by its key.
function Client:call(...)
  local r = self:run({ { ... } })[1]
  if M.is_error(r) then return nil, r.message, r.kind end
  return r
end

-- One command on a given node (keyless commands: FUNCTION, INFO, CLUSTER).
-- No redirection is followed for it.
function Client:call_node(addr, ...)
  local r, err, sent = self:exchange(addr, { { ... } })
  if not r then return nil, err, sent and "in_doubt" or "connection" end
  r = r[1]
  if M.is_error(r) then return nil, r.message, r.kind end
  return r
end

-- Several commands in as few round trips as the nodes allow: returns one
-- result per command (replies, or error objects).  A command without a key
-- goes to the node of the command before it, so that {FCALL ..., WAIT 1 t}
-- waits for that write's replica in the same round trip.
function Client:pipeline(cmds, no_tryagain)
  return self:run(cmds, nil, no_tryagain)
end

local function fcall_cmd(verb, name, keys, args)
  local cmd = { verb, name, #(keys or {}) }
  for _, k in ipairs(keys or {}) do cmd[#cmd + 1] = k end
  for _, a in ipairs(args or {}) do cmd[#cmd + 1] = a end
  return cmd
end
M.fcall_cmd = fcall_cmd

function Client:fcall(name, keys, args)
  return self:call(unpack(fcall_cmd("FCALL", name, keys, args)))
end

function Client:fcall_ro(name, keys, args)
  return self:call(unpack(fcall_cmd("FCALL_RO", name, keys, args)))
end

-- }==================================================================

-- {==================================================================
-- A Functions library, loaded and versioned
-- ===================================================================

-- Declares the library the client's FCALLs need: `code` (with its
-- "#!lua name=..." line) and `version`, which the library reports as the
-- description of its function `version_function`.  ensure_library loads
-- it on every primary whose copy is missing or of another version; an
-- FCALL answered "Function not found" loads it on that node and retries.
function Client:use_library(name, code, version, version_function)
  self.library = { name = name, code = code, version = tostring(version),
    version_function = version_function }
  self.library_loaded_on = {}
end

-- The version of the library on addr, or false when absent.
function Client:library_version(addr)
  local lib = self.library
  local v, err, kind = self:call_node(addr, "FUNCTION", "LIST", "LIBRARYNAME", lib.name)
  if v == nil then return nil, err, kind end
  for _, entry in ipairs(v) do
    local e = entry
    if e[1] ~= nil then                      -- RESP2: flat key/value pairs
      e = {}
      for j = 1, #entry, 2 do e[entry[j]] = entry[j + 1] end
    end
    if e.library_name == lib.name then
      for _, f in ipairs(e.functions or {}) do
        local fe = f
        if f[1] ~= nil then
          fe = {}
          for j = 1, #f, 2 do fe[f[j]] = f[j + 1] end
        end
        if fe.name == lib.version_function then
          return type(fe.description) == "string" and fe.description or ""
        end
      end
      return ""
    end
  end
  return false
end

function Client:load_library(addr)
  local lib = self.library
  local ok, err = self:call_node(addr, "FUNCTION", "LOAD", "REPLACE", lib.code)
  if not ok then return nil, "loading the " .. lib.name .. " library on " .. addr .. ": " .. err end
  self.library_loaded_on[addr] = true
  self.stats.library_loads = self.stats.library_loads + 1
  return true
end

-- Is version a newer than b?  Compared number by number ("3.10" after
-- "3.9"; what follows a number's digits is not compared).
local function newer(a, b)
  local x, y = {}, {}
  for d in a:gmatch("[^.]+") do x[#x + 1] = tonumber(d:match("^%d+")) or -1 end
  for d in b:gmatch("[^.]+") do y[#y + 1] = tonumber(d:match("^%d+")) or -1 end
  for i = 1, math.max(#x, #y) do
    local p, q = x[i] or 0, y[i] or 0
    if p ~= q then return p > q end
  end
  return false
end
M.newer = newer

-- Loads the library on every primary where it is missing or of an older
-- (or another, not newer) version.  Returns the number of nodes loaded,
-- or nil, message, "version" where a primary has a newer version: a
-- client never replaces it (two releases would load theirs in turn, each
-- breaking the other's calls); the newer release's clients run on.
function Client:ensure_library()
  local n = 0
  for _, addr in ipairs(self:primaries()) do
    local have, err = self:library_version(addr)
    if have == nil then return nil, err end
    if have and have ~= "" and newer(have, self.library.version) then
      return nil, ("the %s library on %s is version %s, newer than this " ..
        "client's %s: use a client of that release"):format(self.library.name,
        addr, have, self.library.version), "version"
    end
    if have ~= self.library.version then
      local ok, lerr = self:load_library(addr)
      if not ok then return nil, lerr end
      n = n + 1
    end
  end
  return n
end

-- }==================================================================

function Client:close()
  for addr, sock in pairs(self.socks) do
    self.socks[addr] = nil
    pcall(self.t.close, sock)
  end
end

-- Connects to a cluster given seed addresses ("host:port" strings, or one
-- string separated by commas).  opts: timeout (seconds, 5), connect_timeout
-- (1), retry_seconds (total time spent retrying one call, 10: covers a
-- failover with cluster-node-timeout 2000), max_redirects (16),
-- backoff_base (0.005 s), backoff_max (0.2 s), protocol (2 or 3),
-- password, user, transport ("luasocket" | "cosocket", default: cosockets
-- where they can run).
function M.connect(seeds, opts)
  opts = opts or {}
  if type(seeds) == "string" then
    local list = {}
    for a in seeds:gmatch("[^,%s]+") do list[#list + 1] = a end
    seeds = list
  end
  if #seeds == 0 then return nil, "no node address given", "connection" end
  local t, terr = M.transport(opts.transport)
  if not t then return nil, terr, "connection" end
  local c = setmetatable({
    seeds = seeds, t = t, socks = {}, slots = {}, replicas = {},
    timeout = opts.timeout or 5, connect_timeout = opts.connect_timeout or 1,
    retry_seconds = opts.retry_seconds or 10, max_redirects = opts.max_redirects or 16,
    backoff_base = opts.backoff_base or 0.005, backoff_max = opts.backoff_max or 0.2,
    protocol = opts.protocol or 2, password = opts.password, user = opts.user,
    stats = { moved = 0, ask = 0, tryagain = 0, clusterdown = 0, reconnects = 0,
      refreshes = 0, library_loads = 0, round_trips = 0 },
  }, Client)
  if opts.sleep then c.t.sleep = opts.sleep end
  local ok, err = c:refresh()
  if not ok then c:close(); return nil, err, "connection" end
  return c
end

M.Client = Client
return M
