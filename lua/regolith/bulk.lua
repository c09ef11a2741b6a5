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
opts.progress(done, written, failed) after each batch.  Under a throughput
budget each batch is admitted as a fan-out request is and debited its
charge; a 429 (any failure of a batch) stops the load, the batches before
it written.
]]

local core = require "regolith.core"

local work_add, work_info = core._work_add, core._work_info

local function bulk_load(c, docs, opts)
  local kind = type(docs)
  if kind ~= "table" and kind ~= "function" then
    error("bad argument #1 to 'bulk_load' (a list of documents or an " ..
      "iterator function)", 2)
  end
  local size, mode = c:_bulk_opts(opts)
  local progress = opts and opts.progress
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
    local n, errs, w = c:_bulk_batch(batch, mode)
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
  return { written = written, failed = failed, errors = errors }, work_info(work)
end

return { bulk_load = bulk_load }
