--[[
regolith.cluster.util: what the cluster modules share: options tables
checked as the local core checks them (misuse raises), failures as
`nil, message, status`, request charges from work counters, and the stored
form of a document (the text the Functions library stores, so that a write
can hand back the document it stored without reading it).
]]

local core = require "regolith.core"
local json = core.json

local M = {}

local floor = math.floor

-- Raises on an options table with an unknown key or a value of the wrong
-- type; `allowed` maps names to a Lua type, "text" (a string that is data:
-- what is wrong with it is 400, text_option) or true (any).  A "string"
-- option holding NUL raises, as C strings would cut it.
function M.check_options(opts, allowed, what, level)
  level = (level or 2) + 1
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(what .. ": options must be a table, not " .. type(opts), level)
  end
  for k, v in pairs(opts) do
    if type(k) ~= "string" then error(what .. ": option names must be strings", level) end
    local want = allowed[k]
    if want == nil then
      local z = k:find("\0", 1, true)      -- as far as a C string reads
      error(what .. ": unknown option '" .. (z and k:sub(1, z - 1) or k) .. "'", level)
    end
    local t = want == "text" and "string" or want
    if t ~= true and type(v) ~= t then
      error(what .. ": option '" .. k .. "' must be a " .. t, level)
    end
    if want == "string" and v:find("\0", 1, true) then
      error(what .. ": option '" .. k .. "' must not contain NUL", level)
    end
  end
  return opts
end

function M.integer_option(opts, name, default, lo, hi, what, level)
  local v = opts[name]
  if v == nil then return default end
  if type(v) ~= "number" or v ~= floor(v) or v < lo or v > hi then
    error(("%s: option '%s' must be an integer from %d to %d"):format(
      what, name, lo, hi), (level or 2) + 1)
  end
  return v
end

-- A string option that is data: NUL in it is 400, as locally.
function M.text_option(opts, name, what, level)
  local v = opts[name]
  if v == nil then return nil end
  if type(v) ~= "string" then
    error(what .. ": option '" .. name .. "' must be a string", (level or 2) + 1)
  end
  if v:find("\0", 1, true) then
    return nil, "option '" .. name .. "' must not contain NUL"
  end
  return v
end

function M.fail(msg, status)
  return nil, msg, status
end

-- Work counters -> an info table, as the local core makes them.
function M.info(work, status)
  return { charge = core.charge(work or {}), status = status or 200 }
end

-- The KB a written item adds to its charge beyond its first (charge.c).
function M.extra_kb(bytes)
  if bytes > 1024 then return floor((bytes - 1) / 1024) end
  return 0
end

function M.add_work(into, w)
  for k, v in pairs(w) do into[k] = (into[k] or 0) + v end
  return into
end

-- The text the Functions library stores for `text` (the client's compact
-- JSON without system properties) written under etag, ts and lsn.
function M.stored_text(text, etag, ts, lsn)
  local sys = '"_etag":"\\"' .. etag:sub(2, -2) .. '\\"","_ts":' ..
    string.format("%.0f", ts) .. ',"_lsn":' .. tostring(lsn) .. "}"
  if text == "{}" then return "{" .. sys end
  return text:sub(1, -2) .. "," .. sys
end

-- A document as a script sees it before its commit: a provisional etag,
-- the time, and no _lsn (nil until the commit gives it one).
function M.pending_text(text, etag, ts)
  local sys = '"_etag":"\\"' .. etag:sub(2, -2) .. '\\"","_ts":' ..
    string.format("%.0f", ts) .. "}"
  if text == "{}" then return "{" .. sys end
  return text:sub(1, -2) .. "," .. sys
end

function M.decode(text)
  local v, err = json.decode(text)
  if v == nil then return nil, "corrupt item: " .. tostring(err), 500 end
  return v
end

-- The current time in seconds (a whole number).
function M.now()
  return os.time()
end

-- 16 random bytes (a database's secret, a writer's lock token).
function M.random_bytes(n)
  local f = io.open("/dev/urandom", "rb")
  if f then
    local s = f:read(n)
    f:close()
    if s and #s == n then return s end
  end
  local t = {}
  for i = 1, n do t[i] = string.char(math.random(0, 255)) end
  return table.concat(t)
end

return M
