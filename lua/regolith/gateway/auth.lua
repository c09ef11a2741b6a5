--[[
regolith.gateway.auth: the master-key signature every request carries.

The SDKs sign, with HMAC-SHA256 keyed by the base64-decoded master key, the
text

    lower(verb) \n lower(resource type) \n resource link \n lower(x-ms-date) \n \n

and send `authorization: type=master&ver=1.0&sig=<base64>` (URL-encoded).
The resource type and link come from the path: with an even number of
segments (a resource) the type is the second-to-last segment and the link
the whole path; with an odd number (a feed) the type is the last segment
and the link the path without it; `GET /` has an empty type and link.  The
link holds the decoded ids, as nginx's $uri gives them.

HMAC-SHA256 is OpenSSL's, through LuaJIT's FFI: nginx is linked with
libcrypto already, so its symbols are in the process.
]]

local ffi = require "ffi"

local M = {}

ffi.cdef [[
typedef struct evp_md_st EVP_MD;
const EVP_MD *EVP_sha256(void);
unsigned char *HMAC(const EVP_MD *evp_md, const void *key, int key_len,
                    const unsigned char *d, size_t n, unsigned char *md,
                    unsigned int *md_len);
]]

-- libcrypto: the process's own (nginx links it), else loaded.
local crypto = ffi.C
if not pcall(function() return crypto.HMAC end) then
  local ok, lib = pcall(ffi.load, "crypto")
  if not ok then lib = ffi.load("libcrypto.so.3") end
  crypto = lib
end

local md = ffi.new("unsigned char[32]")
local mdlen = ffi.new("unsigned int[1]")

-- HMAC-SHA256 of `text` under `key` (both strings), as raw bytes.
function M.hmac_sha256(key, text)
  crypto.HMAC(crypto.EVP_sha256(), key, #key, text, #text, md, mdlen)
  return ffi.string(md, mdlen[0])
end

-- The resource type and link the SDKs sign for a path's segments.
function M.resource(segs)
  local n = #segs
  if n == 0 then return "", "" end
  if n % 2 == 0 then return segs[n - 1], table.concat(segs, "/") end
  return segs[n], table.concat(segs, "/", 1, n - 1)
end

-- The signature the key gives a request.
function M.signature(key, verb, rtype, link, date)
  local text = verb:lower() .. "\n" .. rtype:lower() .. "\n" .. link .. "\n" ..
    date:lower() .. "\n\n"
  return ngx.encode_base64(M.hmac_sha256(key, text))
end

-- The fields of an authorization header, URL-decoded by hand: a `+` is a
-- character of the base64 signature, never a space.
local function fields(header)
  local text = header:gsub("%%(%x%x)", function(h)
    return string.char(tonumber(h, 16))
  end)
  local out = {}
  for pair in text:gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=(.*)$")
    if k then out[k] = v end
  end
  return out
end

-- Compares two strings in time that does not depend on where they differ.
local function same(a, b)
  if #a ~= #b then return false end
  local diff = 0
  for i = 1, #a do
    if a:byte(i) ~= b:byte(i) then diff = diff + 1 end
  end
  return diff == 0
end

-- Checks a request; returns nil and "name" or "rid" (how the path was
-- signed), or the 401 message.  `key` is the raw master key; `skew` the
-- seconds a date may be off (nil: unchecked).
function M.verify(key, method, segs, authorization, date, skew)
  if not authorization then return "the request has no authorization header" end
  if not date then return "the request has no x-ms-date header" end
  local f = fields(authorization)
  if f.type ~= "master" then
    return "only master-key authorization (type=master) is supported"
  end
  if not f.sig or f.sig == "" then return "the authorization has no signature" end
  if skew then
    local t = ngx.parse_http_time(date)
    if not t then return "x-ms-date is not an HTTP date" end
    if math.abs(ngx.time() - t) > skew then
      return "x-ms-date is more than " .. skew .. " seconds away from the "
        .. "server's clock"
    end
  end
  local rtype, link = M.resource(segs)
  if same(M.signature(key, method, rtype, link, date), f.sig) then
    return nil, "name"
  end
  local rid = M.rid_link(segs)
  if rid and (same(M.signature(key, method, rtype, rid:lower(), date), f.sig) or
              same(M.signature(key, method, rtype, rid, date), f.sig)) then
    return nil, "rid"
  end
  return "the signature does not match (the master key, or the signed "
    .. "verb, resource type, link or date, differ)"
end

-- The link a RID-addressed path is signed with: the RID of its last
-- resource (the resource itself, or the owner of a feed), which the SDKs
-- lower-case (offers keep their case in some); nil when there is none.
function M.rid_link(segs)
  local n = #segs
  if n >= 2 and n % 2 == 0 then return segs[n] end
  if n >= 3 then return segs[n - 1] end
  return nil
end

return M
