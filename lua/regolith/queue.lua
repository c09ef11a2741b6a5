--[[
The write queue shared by the processes of a database: db:write_queue().

  local q = db:write_queue()            -- once per process (init_worker)
  local doc, info = q:create(c, doc)    -- what c:create(doc) returns

Each call is a container's write described as data (the container's
name, the method, its arguments as JSON; the document a write gives back
handed over as the text it printed, read only by the caller) and put in
a slot of the
database's queue file (store/queue.c).  Whoever holds the queue's leader
lock, in whatever process, runs every request queued, each in a
savepoint of its own, in one transaction committed and flushed once, and
hands each its own result: q:create returns what c:create would have
returned alone (a failed write's nil, message, status; an error it
raised is raised again).  A call the queue cannot carry (arguments JSON
cannot hold, a request or result larger than a slot, a transaction
running in this process, every slot taken) runs directly, as c:create;
so does one the leader found throttled (429), since a leader never waits
out a budget's hint (docs/throughput.md) while it holds the writer lock.

The methods: create, upsert, replace, delete, patch, batch, execute,
each taking the container (a handle or its name) first, then the
container method's own arguments.
]]

local json = require("regolith.core").json

local M = {}
local Q = {}
Q.__index = Q

local unpack = table.unpack or unpack
local function pack(...) return { n = select("#", ...), ... } end

local METHODS = { create = true, upsert = true, replace = true,
                  delete = true, patch = true, batch = true, execute = true }
-- The container's forms of the methods whose result holds a document,
-- giving it as its JSON text: a request that says so (`t`) gets it
-- handed over as the write printed it, read once, by its process, where
-- a leader of an earlier build, which does not know `t`, hands over the
-- result in the form both know (JSON of the values, "R"), and a request
-- from such a build gets that form from this one.
local TEXT = { create = "_text_create", upsert = "_text_upsert",
               replace = "_text_replace", delete = "_text_delete",
               patch = "_text_patch" }

-- n values as a JSON object {"1": v1, ...} (nil leaves a gap), with n.
local function pack_values(n, ...)
  local t = {}
  for i = 1, n do
    local v = select(i, ...)
    if v ~= nil then t[tostring(i)] = v end
  end
  return t
end

local function unpack_values(t, n)
  local out = {}
  for i = 1, n do out[i] = t[tostring(i)] end
  return unpack(out, 1, n)
end

-- The function every leader in this process runs each request with,
-- whichever process queued it: exec(request) -> keep, result.
local function executor(db)
  local conts = {}
  local function container(name)
    local c = conts[name]
    if c then return c, true end
    local msg, status
    c, msg, status = db:container(name)
    if c then conts[name] = c end
    return c, false, msg, status
  end
  return function(text)
    local r = json.decode(text)
    if type(r) ~= "table" or type(r.c) ~= "string" or not METHODS[r.m] or
       type(r.n) ~= "number" then
      return false, "Ewrite queue: a malformed request"
    end
    local m = r.t and TEXT[r.m] or r.m
    local c, cached, msg, status = container(r.c)
    local out
    if not c then
      out = { true, nil, msg, status, n = 4 }
    else
      out = pack(pcall(c[m], c, unpack_values(r.a, r.n)))
      if cached and out[1] and out[2] == nil and out[4] == 404 then
        -- a handle of a container since deleted (and perhaps made again):
        -- a 404 wrote nothing, so ask once more by the name
        conts[r.c] = nil
        c, cached, msg, status = container(r.c)
        if not c then out = { true, nil, msg, status, n = 4 }
        else out = pack(pcall(c[m], c, unpack_values(r.a, r.n))) end
      end
    end
    if not out[1] then return false, "E" .. tostring(out[2]) end
    if m ~= r.m and type(out[2]) == "string" then
      -- a document, as its JSON text, and the information table: "D",
      -- the table's JSON (one line) and a newline, then the document's
      -- text as the write made it, neither printed nor read once more
      local info = json.encode(out[3])
      if not info then
        return false, "Ewrite queue: the result cannot be carried as JSON"
      end
      return true, "D" .. info .. "\n" .. out[2]
    end
    local res = json.encode({ n = out.n - 1, v = pack_values(out.n - 1,
                                                             unpack(out, 2, out.n)) })
    if not res then
      return false, "Ewrite queue: the result cannot be carried as JSON"
    end
    return true, "R" .. res
  end
end

function M.new(db)
  return setmetatable({ db = db, exec = executor(db) }, Q)
end

-- Runs c:m(...) through the queue, or directly when it cannot be queued.
local function call(self, m, c, ...)
  local name = c
  if type(c) ~= "string" then
    if not (type(c) == "userdata" and c.name) then
      error(("%s: expects a container or its name"):format(m), 3)
    end
    name = c:name()
  end
  local n = select("#", ...)
  local text = json.encode({ c = name, m = m, n = n, a = pack_values(n, ...),
                             t = TEXT[m] and true or nil })
  if text then
    local res, msg, status = self.db:_queue(text, self.exec)
    if res == nil then return nil, msg, status end
    if res then
      local kind = res:sub(1, 1)
      if kind == "E" then error(res:sub(2), 0) end
      if kind == "D" then
        local nl = res:find("\n", 2, true)
        return json.decode(res:sub(nl + 1)), json.decode(res:sub(2, nl - 1))
      end
      local r = json.decode(res:sub(2))
      -- throttled (429): a leader never waits out a budget's hint holding
      -- the writer lock, so the call is made again directly, which does
      if not (r.v["1"] == nil and r.v["3"] == 429) then
        return unpack_values(r.v, r.n)
      end
    end
  end
  if type(c) == "string" then
    local err, status
    c, err, status = self.db:container(c)
    if not c then return nil, err, status end
  end
  return c[m](c, ...)
end

for m in pairs(METHODS) do
  Q[m] = function(self, c, ...) return call(self, m, c, ...) end
end

return M
