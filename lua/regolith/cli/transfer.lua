--[[
regolith.cli.transfer: import and export.

import reads JSON lines (one document a line, blank lines skipped) or one
JSON array, and writes the documents into a container.  A rejected item
(malformed JSON, not an object, no id or partition key, too large, a
conflict with --create...) is reported on stderr with its line number,
and the import goes on unless --stop-on-error; the exit code is then 3.
JSON lines are read a line at a time (constant memory); an array is read
whole, and split into its elements by a scanner that knows strings and
nesting (not a parser: each element is then decoded by the codec), so
that each element keeps the line it starts on.

Writing goes through one function, write_run: runs of up to RUN items are
written by c:bulk_load (a transaction per run; docs/api.md, "Bulk load"),
which refuses items one by one and keeps the others, so each rejected item
gets its own error.  Bulk load runs no trigger (an import never named
any).  With --stop-on-error the import stops after the run that holds the
first rejected item: the items of that run after it are written.

export pages through `SELECT * FROM c` (a streaming query: each page
continues where the last ended, so memory stays constant) and writes every
item as one line of JSON with its members in sorted order, without the
system properties _etag, _ts and _lsn unless --system.  Exporting, then
importing into an empty container and exporting again gives the same
bytes.
]]

local regolith = require "regolith"
local common = require "regolith.cli.common"
local data = require "regolith.cli.data"

local EXIT = common.EXIT
local fail, check, note = common.fail, common.check, common.note
local decode = regolith.json.decode

local M = {}

local RUN = 5000                -- items per bulk-load transaction

-- {=====================================================================
-- Reading: JSON lines, or a JSON array split into its elements
-- ======================================================================
-- Calls emit(text, line) for each element of the array in `text` (which
-- starts, after white space, with "["); returns nil, or an error and the
-- line where the array stopped making sense (then the rest is skipped).
local function split_array(text, emit)
  local pos = text:find("%S")
  local line = 1
  local function lines_in(a, b)
    local _, n = text:sub(a, b):gsub("\n", "")
    line = line + n
  end
  lines_in(1, pos)
  pos = pos + 1
  while true do
    local _, e = text:find("^%s*", pos)
    lines_in(pos, e)
    pos = e + 1
    local ch = text:sub(pos, pos)
    if ch == "]" then
      if text:find("%S", pos + 1) then
        return "unexpected text after the array", line
      end
      return nil
    elseif ch == "" then
      return "the array is not closed", line
    end
    local start, start_line, depth = pos, line, 0
    while true do
      local i = text:find('[][{}",\n]', pos)
      if not i then return "the array is not closed", start_line end
      local c = text:sub(i, i)
      pos = i + 1
      if c == "\n" then
        line = line + 1
      elseif c == '"' then
        while true do
          local k = text:find('["\\\n]', pos)
          if not k then return "a string is not closed", start_line end
          local ck = text:sub(k, k)
          if ck == "\\" then pos = k + 2
          else
            pos = k + 1
            if ck == '"' then break end
            line = line + 1
          end
        end
      elseif c == "[" or c == "{" then
        depth = depth + 1
      elseif c == "]" or c == "}" then
        if depth == 0 then
          if c == "}" then return "unbalanced '}'", line end
          emit(text:sub(start, i - 1), start_line)
          pos = i
          break
        end
        depth = depth - 1
      elseif c == "," and depth == 0 then
        emit(text:sub(start, i - 1), start_line)
        break
      end
    end
  end
end

-- The input as a sequence of (text, line) elements, given to emit; bytes
-- read so far are given to progress(bytes).
local function read_input(f, emit, progress)
  local first = f:read("*l")
  if first == nil then return end
  if first:match("^%s*%[") then
    local text = first .. "\n" .. (f:read("*a") or "")
    progress(#text)
    local err, line = split_array(text, emit)
    if err then return err, line end
    return
  end
  local n, bytes = 1, #first + 1
  local line = first
  while line do
    if line:find("%S") then emit(line, n) end
    progress(bytes)
    line = f:read("*l")
    n = n + 1
    if line then bytes = bytes + #line + 1 end
  end
end
-- }=====================================================================

-- {=====================================================================
-- Writing
-- ======================================================================
-- Writes a run of items in one bulk load.  Calls rejected(item, message,
-- status) for each item not written; returns the items written and the
-- charge.
local function write_run(c, run, mode, rejected)
  local docs = {}
  for i, item in ipairs(run) do docs[i] = item.doc end
  local res, info, status = c:bulk_load(docs, { mode = mode, batch = #run })
  if not res then              -- the transaction itself failed: none written
    for _, item in ipairs(run) do
      if rejected(item, info, status) then break end
    end
    return 0, 0
  end
  for _, err in ipairs(res.errors) do
    if rejected(run[err.index], err.message, err.status) then break end
  end
  return res.written, info.charge
end
-- }=====================================================================

-- {=====================================================================
-- Progress, on a terminal only
-- ======================================================================
local function progress_bar(total)
  if common.quiet or not common.is_tty(2) then
    local nop = function() end
    return { update = nop, done = nop, clear = nop }
  end
  local t0, last = common.now(), 0
  local self = {}
  function self.update(bytes, items, bad)
    local t = common.now()
    if t - last < 0.2 then return end
    last = t
    local rate = items / math.max(t - t0, 1e-6)
    local bar = ""
    if total and total > 0 then
      local f = math.min(bytes / total, 1)
      local w = math.floor(f * 30 + 0.5)
      bar = ("[%s%s] %3d%%  "):format(("#"):rep(w), ("."):rep(30 - w),
        math.floor(f * 100))
    end
    io.stderr:write(("\r%s%d items, %d rejected, %.0f items/s   "):format(
      bar, items, bad, rate))
  end
  -- clears the bar's line, so that a message written next has a line of
  -- its own (the bar is drawn again at the next update)
  function self.clear()
    if last > 0 then io.stderr:write("\r", (" "):rep(78), "\r") end
  end
  self.done = self.clear
  return self
end
-- }=====================================================================

function M.import(args)
  local f, total = io.stdin, nil
  if args.file and args.file ~= "-" then
    local err
    f, err = io.open(args.file, "rb")
    if not f then fail(EXIT.io, "cannot read %s: %s", args.file, err) end
    total = f:seek("end")
    f:seek("set", 0)
  end
  local spec = args.spec and data.spec_arg(args.spec, "--spec")
  local db = common.open(args.dir, { create = true, sync = args.sync })
  local c = db:container(args.container)
  if not c then
    if not spec then
      c = common.container(db, args.container)       -- fails, naming them
    end
    c = data.create_container_from(db, args.container, spec)
  end
  local mode = args.create and "create" or "upsert"
  local bar = progress_bar(total)
  local t0 = common.now()
  local written, bad, charge, bytes = 0, 0, 0, 0
  local stop = false

  local function rejected(item, message, status)
    bad = bad + 1
    bar.clear()
    io.stderr:write(("line %d: %s%s%s\n"):format(item.line,
      item.id and ("item '" .. tostring(item.id) .. "': ") or "",
      message, status and (" (status " .. status .. ")") or ""))
    if args.stop_on_error then stop = true end
    return stop
  end

  local run = {}
  local function flush()
    if #run == 0 then return end
    local n, ch = write_run(c, run, mode, rejected)
    written, charge = written + n, charge + ch
    run = {}
    bar.update(bytes, written, bad)
  end

  local function emit(text, line)
    if stop then return end
    local doc, msg = decode(text)
    local item = { line = line, doc = doc }
    if doc == nil then
      flush()
      if not stop then rejected(item, msg, 400) end
      return
    end
    if type(doc) ~= "table" or getmetatable(doc) == getmetatable(regolith.array())
        or doc[1] ~= nil then
      flush()
      if not stop then rejected(item, "not a JSON object", 400) end
      return
    end
    item.id = doc.id
    run[#run + 1] = item
    if #run >= RUN then flush() end
  end

  local err, line = read_input(f, emit, function(b) bytes = b end)
  if not stop then flush() end
  if f ~= io.stdin then f:close() end
  bar.done()
  if err then
    bad = bad + 1
    io.stderr:write(("line %d: %s; the rest of the input is skipped\n")
      :format(line, err))
  end
  local seconds = common.now() - t0
  note("imported %d items into '%s' in %.2f s (%.0f items/s), %s RU%s",
    written, args.container, seconds, written / math.max(seconds, 1e-6),
    common.num(charge), bad > 0 and ("; %d rejected"):format(bad) or "")
  db:close()
  if bad > 0 then return EXIT.rejected end
end

local SYSTEM = { "_etag", "_ts", "_lsn" }

function M.export(args)
  local size = args.page_size
  if not size or size < 1 or size ~= math.floor(size) then
    common.usage("--page-size must be a whole number from 1")
  end
  local db = common.open(args.dir, { readonly = true })
  local c = common.container(db, args.container)
  local pk = args.partition_key and common.value_arg(args.partition_key)
  local out, is_file = common.output(args.file)
  local opts = { max_items = size, partition_key = pk }
  local n, charge = 0, 0
  repeat
    local rows, info, status = c:query("SELECT * FROM c", nil, opts)
    check(rows, info, status)
    for _, doc in ipairs(rows) do
      if not args.system then
        for _, k in ipairs(SYSTEM) do doc[k] = nil end
      end
      local ok, err = out:write(common.encode(doc), "\n")
      if not ok then fail(EXIT.io, "cannot write: %s", err) end
    end
    n, charge = n + #rows, charge + info.charge
    opts.continuation = info.continuation
  until not info.continuation
  if is_file then
    local ok, err = out:close()
    if not ok then fail(EXIT.io, "cannot write %s: %s", args.file, err) end
  end
  note("exported %d items from '%s', %s RU", n, args.container,
    common.num(charge))
end

M._split_array = split_array
return M
