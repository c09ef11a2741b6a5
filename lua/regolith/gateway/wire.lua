--[[
regolith.gateway.wire: the HTTP side of the Cosmos DB REST API (docs/gateway.md).

Reading a request (its path split into segments, its headers, its JSON body)
and writing an answer the way the Cosmos DB service does: JSON bodies,
`x-ms-request-charge` and `x-ms-activity-id` on every answer, errors as
{code, message} with the status (and `x-ms-substatus` where the service sends
one), 204 and 304 without a body.

Errors travel as raised tables (wire.fail, wire.check) up to the handler's
pcall (regolith.gateway), which answers them; any other Lua error is a 500,
logged.
]]

local regolith = require "regolith"
local failure = require "regolith.failure"

local json = regolith.json

local M = {}

-- Status -> the Cosmos error code name.
local CODES = {
  [400] = "BadRequest", [401] = "Unauthorized", [403] = "Forbidden",
  [404] = "NotFound", [405] = "MethodNotAllowed", [408] = "RequestTimeout",
  [409] = "Conflict", [412] = "PreconditionFailed",
  [413] = "RequestEntityTooLarge", [424] = "FailedDependency",
  [429] = "TooManyRequests", [500] = "InternalServerError",
  [501] = "NotImplemented", [503] = "ServiceUnavailable",
  [507] = "InsufficientStorage",
}
M.CODES = CODES

-- Raises a Cosmos-shaped error (regolith.failure): status, message, and
-- optionally the substatus the service would send and, for a 429, the
-- wait it asks for (x-ms-retry-after-ms).
function M.fail(status, message, substatus, retry_after_ms)
  failure.raise{ status = status, message = message, substatus = substatus,
                 retry_after_ms = retry_after_ms }
end

-- The retry hint of regolith's 429 (its fourth value, info), or nil.
function M.retry_hint(status, info)
  if status == 429 and type(info) == "table" then return info.retry_after_ms end
  return nil
end

-- Is `e` an error raised by wire.fail?
M.is_error = failure.is

-- regolith's `nil, message, status` (or its success) through: a failure
-- is raised as that status.
M.check = failure.check

-- {=====================================================================
-- Requests
-- ======================================================================

local CONDITIONS = { "if-match", "if-none-match", "if-modified-since",
                     "if-unmodified-since" }

-- The request: method, path segments (decoded, as nginx gives $uri), the
-- headers (lower-case names), the activity id.
function M.request()
  local uri = ngx.var.uri
  local segs = {}
  for seg in uri:gmatch("[^/]+") do segs[#segs + 1] = seg end
  local headers = ngx.req.get_headers(200)
  -- the conditions are the gateway's to evaluate: nginx's own would test
  -- If-Match against the new etag of a write and answer 412 itself
  for _, h in ipairs(CONDITIONS) do
    if headers[h] then ngx.req.clear_header(h) end
  end
  return {
    method = ngx.req.get_method(),
    segs = segs,
    headers = headers,
    activity = M.uuid(),
    charge = 0,
    out = {},          -- response headers
  }
end

-- A header's value (the first when repeated), or nil.
function M.header(r, name)
  local v = r.headers[name]
  if type(v) == "table" then v = v[1] end
  return v
end

-- Is the header's value "true" (compared case-insensitively: Python
-- sends "True")?
function M.flag(r, name)
  local v = M.header(r, name)
  return v ~= nil and v:lower() == "true"
end

-- The raw body (a string, "" when there is none).
function M.body_text(r)
  if r.text then return r.text end
  ngx.req.read_body()
  local text = ngx.req.get_body_data()
  if not text then
    local file = ngx.req.get_body_file()
    if file then
      local f = assert(io.open(file, "rb"))
      text = f:read("*a")
      f:close()
    end
  end
  r.text = text or ""
  return r.text
end

-- The body as JSON: 400 when it is missing or not JSON.
function M.body(r)
  local text = M.body_text(r)
  if text == "" then M.fail(400, "the request has no body") end
  local v, msg = json.decode(text)
  if v == nil then M.fail(400, "the body is not JSON: " .. tostring(msg)) end
  return v
end

-- The body as a JSON object.
function M.body_object(r)
  local v = M.body(r)
  if type(v) ~= "table" or (next(v) ~= nil and v[1] ~= nil) then
    M.fail(400, "the body must be a JSON object")
  end
  return v
end

-- x-ms-max-item-count: nil when absent or -1 (the server's choice).
function M.max_items(r, default, limit)
  local v = M.header(r, "x-ms-max-item-count")
  if v == nil then return default end
  local n = tonumber(v)
  if n == -1 then return default end
  if not n or n < 1 or n ~= math.floor(n) then
    M.fail(400, "x-ms-max-item-count must be a positive integer or -1")
  end
  return math.min(n, limit)
end
-- }=====================================================================


-- {=====================================================================
-- Answers
-- ======================================================================
-- A version-4 UUID (activity ids), from nginx's $request_id (32 random
-- hex digits).
function M.uuid()
  local h = ngx.var.request_id
  return ("%s-%s-4%s-%x%s-%s"):format(h:sub(1, 8), h:sub(9, 12), h:sub(14, 16),
    8 + tonumber(h:sub(17, 17), 16) % 4, h:sub(18, 20), h:sub(21, 32))
end

-- Adds the charge of a regolith call (info.charge) to the request's.
function M.charged(r, info)
  if info and info.charge then r.charge = r.charge + info.charge end
end

local function charge_text(c)
  local s = ("%.2f"):format(c)
  return (s:gsub("0+$", ""):gsub("%.$", ""))
end

-- Sets the answer: `status` with `body` (a Lua value to encode as JSON, or
-- JSON text when `raw`; nothing for 204 and 304).  wire.respond sends it,
-- outside the handler's pcall (ngx.exit must not run inside one).
function M.send(r, status, body, raw)
  r.reply = { status = status, body = body, raw = raw }
end

-- Sets an error answer the way the service gives one.
function M.send_error(r, status, message, substatus, retry_after_ms)
  r.out["x-ms-substatus"] = substatus and tostring(substatus) or nil
  r.out["x-ms-retry-after-ms"] = retry_after_ms and tostring(retry_after_ms)
    or nil
  if status == 304 then return M.send(r, 304) end
  return M.send(r, status, { code = CODES[status] or "Error",
                             message = message })
end

-- Sends the answer set by wire.send.
function M.respond(r)
  local reply = r.reply or { status = 500, body = { code = "InternalServerError",
                             message = "no answer" } }
  local h = ngx.header
  h["x-ms-activity-id"] = r.activity
  h["x-ms-request-charge"] = charge_text(r.charge)
  for k, v in pairs(r.out) do h[k] = v end
  local status, text = reply.status, reply.body
  if text ~= nil and not reply.raw then
    local msg
    text, msg = json.encode(reply.body)
    if not text then
      status, text = 500, json.encode({ code = "InternalServerError",
        message = "the answer cannot be encoded: " .. tostring(msg) })
    end
  end
  ngx.status = status
  if status == 204 or status == 304 or text == nil then
    -- sent as is: ngx.exit(304) would go through nginx's special responses,
    -- which drop the etag a change feed's 304 carries
    ngx.send_headers()
    return ngx.exit(ngx.HTTP_OK)
  end
  h["content-type"] = "application/json"
  h["content-length"] = #text
  ngx.print(text)
  return ngx.exit(ngx.HTTP_OK)
end

-- An empty list marked as a JSON array.
function M.array(t)
  return regolith.array(t or {})
end

-- A feed answer: {_rid, <key> = items, _count} and x-ms-item-count.
function M.feed(r, key, items, rid)
  r.out["x-ms-item-count"] = tostring(#items)
  return { _rid = rid or "", [key] = regolith.array(items), _count = #items }
end
-- }=====================================================================

return M
