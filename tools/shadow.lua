--[[
The scripts the crash and power-loss harnesses (tools/crash.lua,
tools/powerloss.lua) install on the container they write: a key and its
shadow item ("s-" .. id) are always written in one transaction, so a
database where they disagree has a transaction half applied.
]]
local M = {}

-- The procedure: two writes in one logical partition, each with its shadow
-- (triggers do not run for a procedure's own writes).
M.PAIR = [[
return function(ctx, a, b, seq)
  for _, id in ipairs({ a, b }) do
    assert(ctx:upsert({ id = id, pk = ctx.partition_key, seq = seq,
                        u = "u" .. seq .. id, pair = seq }))
    assert(ctx:upsert({ id = "s-" .. id, pk = ctx.partition_key, seq = seq,
                        shadow = true }))
  end
  return true
end
]]

-- The trigger: after every write of a key, its shadow follows (same
-- transaction), so a key and its shadow always agree.
M.SHADOW = [[
return function(ctx)
  local doc = ctx:body()
  if doc.shadow then return end
  if ctx.operation == "delete" then
    ctx:delete("s-" .. doc.id)
  else
    assert(ctx:upsert({ id = "s-" .. doc.id, pk = doc.pk, seq = doc.seq,
                        shadow = true }))
  end
end
]]

return M
