--[[
regolith.bulk: c:bulk_load(docs | iterator, opts) -> result, info | nil,
msg, status, result.

Documents written in batches, each one transaction (c:_bulk_batch, the
core's: every document as a create, or an upsert, would write it, but for
the triggers), so that a load runs as a series of calls on either backend
(on a cluster each batch is one driven call, regolith.cluster).  result =
{written, failed, errors = {{index, status, message}}}; opts.batch
documents per transaction (default 10000), opts.mode "create" (the
default: an existing item is a 409 of its own) or "upsert",
opts.progress(done, written, failed) after each batch; opts.transaction
"load" (a local database) makes the whole load one transaction, the
batches parts of it (c:_bulk_whole), so that a table's pages are copied
once per load rather than once per batch, and its entries are held
(up to opts.memory bytes, past it spilled to a temporary file: info.spilled
runs) and merged into the tables in key order.  Under a throughput
budget each batch is admitted as a fan-out request is and debited its
charge; a 429 (any failure of a batch) stops the load, the batches before
it written.
]]

local core = require "regolith.core"

local work_add, work_info = core._work_add, core._work_info

-- The load, batch after batch: result, work | nil, msg, status, result.
-- `joined`: the batches are parts of c:_bulk_whole's transaction (its
-- load: their entries are held and merged into the tables together).
local function batches(c, docs, size, mode, progress, joined)
  local kind = type(docs)
  local pos, written, failed, work, errors = 0, 0, 0, nil, {}
  local more = true
  while more do
    local batch, first = {}, pos + 1
    while #batch < size do
      local d
      if kind == "table" then d = docs[pos + 1] else d = docs() end
      if d == nil then more = false; break end
      pos = pos + 1
      batch[#batch + 1] = d
    end
    if #batch == 0 then break end
    local n, errs, w = c:_bulk_batch(batch, mode, joined)
    if not n then
      local result = { written = written, failed = failed, errors = errors }
      return nil, "bulk_load: a batch failed (the batches before it are " ..
        "written): " .. tostring(errs), w, result
    end
    work = work_add(work, w)
    written = written + n
    for _, e in ipairs(errs) do
      failed = failed + 1
      errors[failed] = { index = first + e.index - 1, status = e.status,
        message = e.message }
    end
    if progress then progress(pos, written, failed) end
  end
  return { written = written, failed = failed, errors = errors }, work
end

local function bulk_load(c, docs, opts)
  local kind = type(docs)
  if kind ~= "table" and kind ~= "function" then
    error("bad argument #1 to 'bulk_load' (a list of documents or an " ..
      "iterator function)", 2)
  end
  local size, mode, whole, memory = c:_bulk_opts(opts)
  local progress = opts and opts.progress
  if not whole then
    local result, work, status, partial = batches(c, docs, size, mode,
      progress)
    if not result then return nil, work, status, partial end
    return result, work_info(work)
  end
  -- one transaction: a failure anywhere leaves nothing of the load
  local result, work, msg, status
  local ok, err, st = c:_bulk_whole(function(load)
    result, work, status = batches(c, docs, size, mode, progress, load)
    if result then return true end
    msg, result = work, nil
    return nil, "bulk_load: a batch failed (nothing of the load is " ..
      "written): " .. msg:gsub("^bulk_load: a batch failed %b(): ", ""),
      status
  end, kind == "table", memory)
  if not ok then
    return nil, err, st, { written = 0, failed = 0, errors = {} }
  end
  local info = work_info(work)
  info.spilled = err                 -- (on success: the runs spilled)
  return result, info
end

return { bulk_load = bulk_load }
