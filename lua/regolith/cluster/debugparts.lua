-- regolith.cluster.debugparts: a write set's part (csrc/store/remote.c's
-- format, redis/regolith.lua's rg_apply reads it) in words, one line per
-- condition and write: what RG_DEBUG=1 prints of every call's parts
-- (regolith.cluster traces its rounds, needs and refusals on stderr).
local M = {}
function M.decode(s)
  local pos = 5
  local function u32() local v = string.unpack(">I4", s, pos); pos = pos + 4; return v end
  local function str() local n = u32(); local v = s:sub(pos, pos + n - 1); pos = pos + n; return v end
  local function u8() local v = s:byte(pos); pos = pos + 1; return v end
  local out = {}
  str(); str(); str()
  local nc = u32()
  for _ = 1, nc do
    local kind, tb, key = u8(), u8(), str()
    local ex = str()
    out[#out + 1] = ("  cond %d tb %d %q"):format(kind, tb, key)
  end
  local nw = u32()
  for _ = 1, nw do
    local op, tb, stamp, key = u8(), u8(), u8(), str()
    str()
    out[#out + 1] = ("  write %d tb %d %q"):format(op, tb, key)
  end
  return table.concat(out, "\n")
end
return M
