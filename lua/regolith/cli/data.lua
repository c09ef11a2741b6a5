--[[
regolith.cli.data: the subcommands on containers, items, queries and the
database as a whole: containers, create-container, delete-container, get,
put, delete, query, stats, verify, backup.
]]

local regolith = require "regolith"
local common = require "regolith.cli.common"
local keys = require "regolith.keys"
local grid = require "regolith.cli.grid"

local EXIT = common.EXIT
local fail, check, note = common.fail, common.check, common.note

local M = {}

-- A spec argument: JSON text or @FILE.  A spec printed by `containers
-- --json` (or c:spec()) carries the name: it is dropped.
function M.spec_arg(text, what)
  if text:sub(1, 1) == "@" then
    text = common.read_file(text:sub(2), what)
  end
  local spec = common.json_arg(text, what)
  if type(spec) ~= "table" then common.usage("%s must be a JSON object", what) end
  spec.name = nil
  return spec
end

-- Creates a container; misuse in the spec (an unknown option, a wrong
-- type) is raised by the core: it is the user's input here, so a usage
-- error.
function M.create_container_from(db, name, spec)
  local ok, c, msg, status = pcall(db.create_container, db, name, spec)
  if not ok then
    common.usage("bad container spec: %s", (tostring(c):gsub("^[^:]*:%d+: ", "")))
  end
  return check(c, msg, status)
end

-- {=====================================================================
-- Containers
-- ======================================================================
function M.containers(args)
  local db = common.open(args.dir, { readonly = true })
  local stats = db:stats()
  local names = db:containers()
  if args.json then
    for _, name in ipairs(names) do
      local c = common.container(db, name)
      local st = stats.containers[name] or {}
      common.write_json({ name = name, items = st.items, bytes = st.bytes,
                          spec = c:spec() })
    end
    return
  end
  if #names == 0 then
    note("no containers")
    return
  end
  print(("%-24s %10s %12s  %-24s %s"):format("container", "items", "bytes",
    "partition key", "physical partitions"))
  for _, name in ipairs(names) do
    local c = common.container(db, name)
    local spec = c:spec()
    local st = stats.containers[name] or {}
    local pk = spec.partition_key
    if type(pk) == "table" then pk = table.concat(pk, ", ") end
    print(("%-24s %10d %12d  %-24s %d"):format(name, st.items or 0,
      st.bytes or 0, pk, spec.physical_partitions or 1))
  end
end

M["create_container"] = function(args)
  if args.spec and args.spec_text then
    common.usage("give the spec once: --spec SPEC (or SPEC alone)")
  end
  local text = args.spec or args.spec_text
  if not text then
    common.usage("create-container needs the spec: --spec '{\"partition_key\": \"/id\"}'")
  end
  local spec = M.spec_arg(text, "the spec")
  local db = common.open(args.dir, { create = true })
  local _, info = M.create_container_from(db, args.name, spec)
  common.note_info(info)
end

M["delete_container"] = function(args)
  local db = common.open(args.dir)
  local _, info = check(db:delete_container(args.container))
  if info == nil then return end
  common.note_info(info)
end
-- }=====================================================================

-- {=====================================================================
-- Items
-- ======================================================================
local function pk_of(args)
  if args.partition_key == nil then return nil end
  return common.value_arg(args.partition_key)
end

-- Finds an item by id alone: a query over every partition.
local function find_by_id(c, id)
  local rows, msg, status = c:query("SELECT * FROM c WHERE c.id = @id",
    { id = id })
  check(rows, msg, status)
  local info = msg
  if #rows == 0 then fail(EXIT.failed, "item not found (status 404)") end
  if #rows > 1 then
    fail(EXIT.failed, "%d items have the id '%s': name the partition key " ..
      "with -k", #rows, id)
  end
  return rows[1], info
end

function M.get(args)
  local db = common.open(args.dir, { readonly = true })
  local c = common.container(db, args.container)
  local doc, info
  local pk = pk_of(args)
  if pk == nil then doc, info = find_by_id(c, args.id)
  else doc, info = check(c:read(args.id, pk)) end
  common.write_json(doc)
  common.note_info(info)
end

function M.put(args)
  local text = common.read_file(args.file, "the document")
  local doc, msg = regolith.json.decode(text)
  if doc == nil then fail(EXIT.failed, "the document is not JSON: %s (status 400)", msg) end
  local db = common.open(args.dir, { create = true })
  local c = common.container(db, args.container)
  local opts = { if_match = args.if_match, pre_trigger = args.pre_trigger,
                 post_trigger = args.post_trigger }
  local write = args.create and c.create or args.replace and c.replace or
    c.upsert
  local stored, info = check(write(c, doc, opts))
  common.write_json(stored)
  common.note_info(info)
end

function M.delete(args)
  local db = common.open(args.dir)
  local c = common.container(db, args.container)
  local pk = pk_of(args)
  if pk == nil then
    local doc = find_by_id(c, args.id)
    pk = keys.of(doc, keys.paths(c:spec()))
  end
  local _, info = check(c:delete(args.id, pk, { if_match = args.if_match }))
  common.note_info(info)
end
-- }=====================================================================

-- {=====================================================================
-- Queries
-- ======================================================================
function M.query(args)
  local sql = args.sql
  if sql == "-" then sql = common.read_file("-", "the query") end
  local params = common.params_arg(args.param)
  if args.max_items and (args.max_items < 1 or
      args.max_items ~= math.floor(args.max_items)) then
    common.usage("--max-items must be a whole number from 1")
  end
  local db = common.open(args.dir, { readonly = true })
  local c = common.container(db, args.container)
  local rows, info, status = c:query(sql, params, {
    partition_key = pk_of(args), max_items = args.max_items,
    continuation = args.continuation,
    full_text_score_scope = args.score_scope })
  check(rows, info, status)
  if args.format == "table" then
    for _, line in ipairs(grid.lines(rows)) do print(line) end
  else
    for _, row in ipairs(rows) do common.write_json(row) end
  end
  common.note_info(info)
  if info.continuation then note("continuation: %s", info.continuation) end
end
-- }=====================================================================

-- {=====================================================================
-- The database
-- ======================================================================
-- The lines of a throughput budget's counters (db:stats()'s
-- `throughput`; docs/throughput.md), indented by `pad`.
local function throughput_lines(t, pad)
  local setting
  if t.mode == "shared" then
    setting = "shares the database's budget"
  elseif t.mode == "autoscale" then
    setting = ("autoscale up to %g RU/s (scaled to %g)"):format(
      t.autoscale_max, t.scaled_to)
  else
    setting = ("manual %g RU/s"):format(t.ru_per_second)
  end
  local out = { ("%sthroughput: %s%s over %d partition%s; %g RU/s consumed " ..
    "(last %d s), %g RU in all; %d of %d requests throttled"):format(pad,
    setting, t.burst and ", burst" or "", t.physical_partitions,
    t.physical_partitions == 1 and "" or "s", t.consumed_per_second,
    10, t.consumed_ru, t.throttled, t.requests + t.throttled) }
  local hot = {}
  for _, p in ipairs(t.hot_partitions) do
    if t.physical_partitions > 1 and (p.consumed_per_second > 0 or
        p.throttled > 0) then
      local s = ("partition %d %g RU/s"):format(p.partition,
        p.consumed_per_second)
      if p.utilization then
        s = s .. (" (%.0f %% of its share, balance %g RU)"):format(
          p.utilization * 100, p.balance)
      end
      hot[#hot + 1] = s .. (", %d throttled"):format(p.throttled)
    end
  end
  if #hot > 0 then out[2] = pad .. "hottest: " .. table.concat(hot, "; ") end
  return out
end

function M.stats(args)
  local db = common.open(args.dir, { readonly = true })
  local st = db:stats()
  if args.json then
    common.write_json(st)
    return
  end
  print(("items %d, %d bytes of JSON; last lsn %d"):format(st.items, st.bytes,
    st.lsn))
  if st.page_size > 0 then           -- (a cluster database has no map)
    print(("map %d bytes, %d in use (pages of %d bytes); readers %d"):format(
      st.map_size, st.used_bytes, st.page_size, st.readers))
  end
  if st.throughput then
    for _, line in ipairs(throughput_lines(st.throughput, "database ")) do
      print(line)
    end
  end
  local names = {}
  for name in pairs(st.containers) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local c = st.containers[name]
    print(("  %-24s %10d items %12d bytes"):format(name, c.items, c.bytes))
    if c.throughput then
      for _, line in ipairs(throughput_lines(c.throughput, "      ")) do
        print(line)
      end
    end
  end
end

-- A damaged file is refused by opening (docs/guarantees.md, A damaged
-- file): verify reports it as what it found.
local function open_to_verify(dir)
  local ok, db, msg, status = pcall(regolith.open, dir, { readonly = true })
  if ok and db then return db end
  if not ok then return common.open(dir, { readonly = true }) end
  if status == 500 and msg:find("is damaged:", 1, true) then
    io.stdout:write(msg, "\n")
    fail(EXIT.failed, "verify found problems (the report is on stdout)")
  end
  return common.open(dir, { readonly = true })
end

function M.verify(args)
  local db = open_to_verify(args.dir)
  local ok, report = db:verify()
  if ok then
    note("ok: every invariant holds")
    return
  end
  io.stdout:write(tostring(report), "\n")
  fail(EXIT.failed, "verify found problems (the report is on stdout)")
end

function M.backup(args)
  local db = common.open(args.dir, { readonly = true })
  local _, info = check(db:backup(args.dest))
  note("backed up %s into %s", args.dir, args.dest)
  common.note_info(info)
end

function M.compact(args)
  local db = common.open(args.dir, { readonly = true })
  local _, info = check(db:compact(args.dest))
  note("compacted %s into %s (%s bytes)", args.dir, args.dest,
    common.num(info.bytes))
end

function M.upgrade(args)
  local ok, info, status = regolith.upgrade(args.dir, {
    history = args.drop_history and "drop" or "keep",
    keep_old = not args.remove_old })
  if not ok then
    if status == 404 then common.fail(EXIT.no_database, "%s", info) end
    check(ok, info, status)
  end
  if not info.upgraded then
    note("%s is of storage format %d already: nothing to do", args.dir,
      info.to)
    return
  end
  note("upgraded %s from format %d to %d: %d containers, %d items, %d " ..
    "change-feed records; %s bytes (was %s)%s", args.dir, info.from, info.to,
    info.containers, info.items, info.feed_records, common.num(info.new_bytes),
    common.num(info.old_bytes), info.old_file and
    ("; the old data file is kept as " .. info.old_file) or "")
end
-- }=====================================================================

return M
