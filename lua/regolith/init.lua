--[[
regolith: an embedded document database for Lua.

This module is the public face of the C core (regolith.core): it re-exports
the core's functions, and assembles here, in one place, the methods written
in Lua: db:processor and db:run_processors (regolith.processor, the loop of
the change-feed processors), closing a database's processors with it,
db:group_commit (regolith.group, concurrent writers sharing transactions),
db:write_queue (regolith.queue, processes sharing transactions),
c:query_rows (paging over c:query) and c:bulk_load (regolith.bulk).
]]

local core = require "regolith.core"
local processor = require "regolith.processor"
local group = require "regolith.group"
local queue = require "regolith.queue"

local M = {}
for k, v in pairs(core) do
  if k:sub(1, 1) ~= "_" then M[k] = v end
end

M._VERSION = "regolith 0.1"

local methods = core._methods

-- The database handle: processors, and closing them with the handle.
local db_methods, db_meta = methods.db_methods, methods.db
if not db_methods.processor then        -- once, whoever requires us first
  local close, on_close = db_methods.close, db_meta.__close
  db_methods.processor = processor.open
  db_methods.run_processors = processor.run_all
  db_methods.group_commit = group.new
  db_methods.write_queue = queue.new
  db_methods.close = function(db, ...)
    processor.close_all(db)
    return close(db, ...)
  end
  if on_close then
    db_meta.__close = function(db, ...)
      processor.close_all(db)
      return on_close(db, ...)
    end
  end
end

-- c:query_rows(sql, params, opts) -> an iterator over every row of every
-- page | nil, message, status.  The first page runs now, so that bad SQL
-- gives nil, message, status; a later page's failure raises.
local function query_rows(c, sql, params, opts)
  local rows, info, status = c:query(sql, params, opts)
  if not rows then return nil, info, status end
  local i, continuation, page_opts = 0, info.continuation, nil
  return function()
    while true do
      i = i + 1
      local row = rows[i]
      if row ~= nil then return row end
      if continuation == nil then return nil end
      if page_opts == nil then
        page_opts = {}
        for k, v in pairs(opts or {}) do page_opts[k] = v end
      end
      page_opts.continuation = continuation
      rows, info = c:query(sql, params, page_opts)
      if not rows then error("query_rows: " .. tostring(info), 2) end
      i, continuation = 0, info.continuation
    end
  end
end
methods.container_methods.query_rows = query_rows
methods.container_methods.bulk_load = require("regolith.bulk").bulk_load

-- regolith.open(path, opts): a local database (a directory), or, for a
-- URL redis://host:port[,host:port...]/name, one on Redis Cluster with the
-- same methods (regolith.cluster, docs/cluster.md).
local function is_url(path)
  return type(path) == "string" and path:sub(1, 8) == "redis://"
end

function M.open(path, opts)
  if is_url(path) then
    local cluster = require "regolith.cluster"
    cluster.on_close = processor.close_all
    return cluster.open(path, opts)
  end
  return core.open(path, opts)
end

-- regolith.upgrade(path, opts): rewrites a directory's data file in this
-- storage format.  A cluster database has no file to rewrite: 501 (one of
-- the earlier key layout is refused by open with 426, and moved by export
-- and import: docs/cluster.md).
function M.upgrade(path, opts)
  if is_url(path) then
    return nil, ("upgrade: not on a cluster database ('%s'): it keeps no " ..
      "files; one of the earlier key layout is moved by export and " ..
      "import (docs/cluster.md)"):format(path), 501
  end
  return core.upgrade(path, opts)
end

return M
