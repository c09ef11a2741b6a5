--[[
regolith.cli.common: what every subcommand of the `regolith` command
shares: failing with one line and an exit code, opening the database,
reading values given on the command line, writing JSON lines and the
request charge, and telling whether a stream is a terminal.

Exit codes (docs/cli.md):

    0   success
    1   the database refused the operation (not found, conflict, bad query,
        precondition failed...), or verify found a problem
    2   usage: an unknown command or option, a missing or malformed argument
    3   import: some items were rejected (each one reported on stderr)
    4   no database at DIR, or it cannot be opened
    5   a file cannot be read or written
    70  an internal error (a bug): one line; REGOLITH_DEBUG=1 adds a trace
    130 interrupted (Ctrl-C)
]]

local regolith = require "regolith"
local cjson = require "regolith.cli.json"
local failure = require "regolith.failure"

local M = {}

M.EXIT = {
  ok = 0, failed = 1, usage = 2, rejected = 3, no_database = 4, io = 5,
  internal = 70, interrupted = 130,
}

-- {=====================================================================
-- Failing: a failure (regolith.failure) raised and caught by main
-- ======================================================================
-- Stops the command with `message` on stderr and exit code `code`.
function M.fail(code, message, ...)
  if select("#", ...) > 0 then message = message:format(...) end
  failure.raise{ code = code, message = message }
end

M.is_failure = failure.is

function M.usage(message, ...) M.fail(M.EXIT.usage, message, ...) end

-- What a regolith call returned as `nil, message, status`: exit 1.
function M.refused(message, status)
  if status then message = ("%s (status %s)"):format(message, status) end
  M.fail(M.EXIT.failed, message)
end

-- check(v, message, status, ...): v, ... or the failure.
function M.check(v, ...)
  if v == nil or v == false then M.refused(...) end
  return v, ...
end
-- }=====================================================================

-- {=====================================================================
-- The database
-- ======================================================================
local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

M.exists = exists

-- Is `dir` a cluster database's URL (redis://host:port[,...]/name, as
-- regolith.open takes it; docs/cluster.md) rather than a directory?
function M.is_url(dir)
  return dir:sub(1, 8) == "redis://"
end

-- regolith.open, or exit 4 (a cluster's 404: no database of that name)
local function open(dir, opts)
  local ok, db, msg, status = pcall(regolith.open, dir, opts)
  if not ok then M.fail(M.EXIT.no_database, "cannot open %s: %s", dir, db) end
  if db then return db end
  if status == 404 and M.is_url(dir) then
    M.fail(M.EXIT.no_database, "no database at %s", dir)
  end
  M.fail(M.EXIT.no_database, "cannot open %s: %s (status %s)", dir, msg,
    status)
end

-- Opens the database in `dir`, a directory or a cluster URL.  opts.create:
-- make one when there is none (commands that write: create-container,
-- import, put); otherwise no database there is exit 4, so that a typo
-- never creates one (on a cluster a read-only open, which makes nothing,
-- looks first).  opts.readonly, opts.sync are passed on.
function M.open(dir, opts)
  opts = opts or {}
  local url = M.is_url(dir)
  if not opts.create and not url and not exists(dir .. "/data.mdb") then
    M.fail(M.EXIT.no_database, "no database at %s", dir)
  end
  if url and not opts.create and not opts.readonly then
    open(dir, { readonly = true }):close()
  end
  return open(dir, { readonly = opts.readonly or nil, sync = opts.sync })
end

-- The container `name` of db, or exit 1 naming the containers there are.
function M.container(db, name)
  local c, msg, status = db:container(name)
  if c then return c end
  if status == 404 then
    local names = db:containers()
    M.fail(M.EXIT.failed, "no container '%s' (containers: %s)", name,
      #names > 0 and table.concat(names, ", ") or "none")
  end
  M.refused(msg, status)
end
-- }=====================================================================

-- {=====================================================================
-- Values from the command line
-- ======================================================================
-- A JSON argument (a document, a spec, procedure arguments): malformed is
-- a usage error naming the argument.
function M.json_arg(text, what)
  local v, msg = regolith.json.decode(text)
  if v == nil and msg then M.usage("%s is not JSON: %s", what, msg) end
  return v
end

-- A value such as a partition key or a parameter: JSON when it parses as
-- JSON (42, true, null, "7", ["a", 1]), else the text itself as a string,
-- so that -k user-17 needs no quotes and -k '"42"' is the string "42".
function M.value_arg(text)
  local v = regolith.json.decode(text)
  if v == nil then return text end
  return v
end

-- --param name=value (repeatable) -> {name = value}
function M.params_arg(list)
  if not list or #list == 0 then return nil end
  local params = {}
  for _, p in ipairs(list) do
    local name, value = p:match("^@?([%a_][%w_]*)=(.*)$")
    if not name then
      M.usage("--param %s: expected name=value", p)
    end
    params[name] = M.value_arg(value)
  end
  return params
end

-- A whole file, or stdin for "-" or nil.
function M.read_file(path, what)
  if path == nil or path == "-" then return io.stdin:read("*a") or "" end
  local f, err = io.open(path, "rb")
  if not f then M.fail(M.EXIT.io, "cannot read %s: %s", what or path, err) end
  local text = f:read("*a")
  f:close()
  return text
end

-- An output stream: a file (created), or stdout for "-" or nil.
function M.output(path)
  if path == nil or path == "-" then return io.stdout, false end
  local f, err = io.open(path, "wb")
  if not f then M.fail(M.EXIT.io, "cannot write %s: %s", path, err) end
  return f, true
end

-- Seconds since the epoch from "1700000000" or an ISO 8601 UTC time
-- ("2024-05-01", "2024-05-01T12:00:00Z", fractions ignored); nil if it is
-- neither.
function M.time_arg(text)
  local n = tonumber(text)
  if n then return n end
  local y, mo, d, rest = text:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)(.*)$")
  if not y then return nil end
  local h, mi, s = 0, 0, 0
  if rest ~= "" then
    h, mi, s = rest:match("^[T ](%d%d):(%d%d):(%d%d)%.?%d*Z?$")
    if not h then return nil end
  end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  -- days from the civil date (proleptic Gregorian), without os.time's
  -- local time zone
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((mo + 9) % 12) + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  local days = era * 146097 + doe - 719468
  return days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(s)
end
-- }=====================================================================

-- {=====================================================================
-- Output
-- ======================================================================
M.encode = cjson.encode

-- One JSON line on `out` (stdout by default).
function M.write_json(v, out)
  (out or io.stdout):write(cjson.encode(v), "\n")
end

-- Notes go to stderr, unless --quiet.
M.quiet = false
function M.note(fmt, ...)
  if M.quiet then return end
  io.stderr:write(select("#", ...) > 0 and fmt:format(...) or fmt, "\n")
end

local function num(v)
  if v == nil then return "-" end
  if v == math.floor(v) then return ("%d"):format(v) end
  return ("%.2f"):format(v)
end
M.num = num

-- The request charge and counters of an info table, on stderr:
-- "charge 3.17 RU; 2 rows; partitions 1; loaded 2; index lookups 1"
function M.note_info(info, extra)
  if M.quiet or not info then return end
  local parts = { ("charge %s RU"):format(num(info.charge)) }
  if info.count then parts[#parts + 1] = ("%s rows"):format(num(info.count)) end
  if info.partitions then
    parts[#parts + 1] = ("partitions %s%s"):format(num(info.partitions),
      info.cross_partition and " (cross-partition)" or "")
  end
  if info.loaded then parts[#parts + 1] = "loaded " .. num(info.loaded) end
  if info.index_lookups then
    parts[#parts + 1] = "index lookups " .. num(info.index_lookups)
  end
  if info.vector_codes then          -- a vector index search (search.md)
    parts[#parts + 1] = ("vector index: %s KB of vectors, %s codes, %s nodes")
      :format(num(math.floor(info.vector_bytes / 1024 + 0.5)),
              num(info.vector_codes), num(info.vector_nodes))
  end
  if info.etag then parts[#parts + 1] = "etag " .. info.etag end
  if info.status then parts[#parts + 1] = "status " .. info.status end
  if extra then parts[#parts + 1] = extra end
  io.stderr:write(table.concat(parts, "; "), "\n")
end

-- Is file descriptor 1 (stdout) or 2 (stderr) a terminal?
local ttys = {}
function M.is_tty(fd)
  if ttys[fd] == nil then
    local ok = os.execute(("test -t %d"):format(fd))
    ttys[fd] = ok == true or ok == 0
  end
  return ttys[fd]
end
-- }=====================================================================

-- Seconds, for rates and intervals: wall time in milliseconds from the
-- core (the processors' clock), and a sleep that Ctrl-C interrupts.
local P = require("regolith.core")._processor
function M.now() return P.clock() / 1000 end
M.sleep = P.sleep

return M
