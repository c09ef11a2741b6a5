--[[
regolith.cli.scripts: `procedures` and `triggers` (list, show, create,
replace, delete; execute for procedures).
]]

local common = require "regolith.cli.common"

local EXIT = common.EXIT
local fail, check, note = common.fail, common.check, common.note

local M = {}

-- The source of a stored procedure or trigger (c:procedure, c:trigger).
local function show(c, kind, name)
  local getter = kind == "procedures" and c.procedure or c.trigger
  local def, info = check(getter(c, name))
  if type(def) == "table" then
    io.stdout:write(("-- type %s, operation %s%s\n"):format(def.type,
      def.operation, def.automatic and ", automatic" or ""), def.source)
  else
    io.stdout:write(def)
  end
  common.note_info(info)
end

local function run(args)
  local kind, action = args.command, args.action
  local readonly = action == "list" or action == "show"
  local db = common.open(args.dir, { readonly = readonly })
  local c = common.container(db, args.container)
  if action == "list" then
    local names = kind == "procedures" and c:procedures() or c:triggers()
    if #names == 0 then note("no %s on '%s'", kind, args.container) end
    for _, name in ipairs(names) do print(name) end
    return
  elseif action == "show" then
    return show(c, kind, args.name)
  elseif action == "delete" then
    local del = kind == "procedures" and c.delete_procedure or c.delete_trigger
    local _, info = check(del(c, args.name))
    common.note_info(info)
    return
  elseif action == "execute" then
    if args.partition_key == nil then
      common.usage("procedures execute needs the partition key (-k)")
    end
    local pk = common.value_arg(args.partition_key)
    local values = {}
    for i, text in ipairs(args.args) do
      values[i] = common.json_arg(text, ("argument %d"):format(i))
    end
    local result, info = check(c:execute(args.name, pk,
      (table.unpack or unpack)(values, 1, #args.args)))
    for _, line in ipairs(info.log or {}) do note("log: %s", line) end
    common.write_json(result)
    common.note_info(info)
    return
  end
  -- create or replace, from a file
  local source = common.read_file(args.file, args.file)
  local ok, done, info, status
  if kind == "procedures" then
    local put = action == "create" and c.create_procedure or
      c.replace_procedure
    ok, done, info, status = pcall(put, c, args.name, source)
  else
    local put = action == "create" and c.create_trigger or c.replace_trigger
    ok, done, info, status = pcall(put, c, args.name, {
      type = args.type, operation = args.operation,
      automatic = args.automatic or nil, source = source })
  end
  if not ok then common.usage("%s", (tostring(done):gsub("^[^:]*:%d+: ", ""))) end
  check(done, info, status)
  common.note_info(info)
end

M.procedures = run
M.triggers = run

return M
