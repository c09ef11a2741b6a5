--[[
regolith.failure: the one way the front ends (the command, the Data
Explorer's API, the Cosmos DB gateway) stop a request.

A failure is a table raised with error(failure, 0): its `message`, and
whatever its front end reports with it (the command's exit `code`, an HTTP
`status`, the gateway's `substatus` and `retry_after_ms`).  The front end
catches it at its top (failure.is) and answers; anything else raised is a
bug, answered as such.

    failure.raise{ status = 400, message = "..." }
    failure.check(v, message, status, ...)   -- regolith's nil, message,
                                             -- status: v, ... or raised
]]

local M = {}

local Failure = {}
Failure.__index = Failure
Failure.__tostring = function(f) return tostring(f.message) end

-- Raises `f` (a table with at least `message`) as a failure.
function M.raise(f)
  error(setmetatable(f, Failure), 0)
end

-- Is `v` a failure raised by M.raise?
function M.is(v)
  return getmetatable(v) == Failure
end

-- regolith's answer (v, ... on success; nil, message, status, info on a
-- failure) through: a failure is raised with its status (500 when it
-- has none) and, for a 429, the wait its info asks for.
function M.check(v, message, status, ...)
  if v ~= nil and v ~= false then return v, message, status, ... end
  local info = ...
  M.raise{ status = status or 500, message = message or "failed",
           retry_after_ms = status == 429 and type(info) == "table" and
             info.retry_after_ms or nil }
end

return M
