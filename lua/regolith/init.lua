--[[
regolith: an embedded document database for Lua.

This module is the public face of the C core (regolith.core): it re-exports
the core's functions and adds what is clearer written in Lua.
]]

local core = require "regolith.core"
require "regolith.processor"   -- db:processor, db:run_processors

local M = {}
for k, v in pairs(core) do M[k] = v end

M._VERSION = "regolith 0.1"

return M
