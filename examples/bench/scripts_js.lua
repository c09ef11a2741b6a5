--[[
JavaScript beside Lua: the same procedures and the same user-defined
function written in each language, run on the same container, with sync
"none" (the CPU cost).  Per call: the median and the 99th percentile in
microseconds, and the request charge (the same work is charged the same in
both languages: a run counts one script, its storage operations what they
do).

  - empty: a procedure that sets its result and does nothing else (the cost
    of a run: a fresh global environment in JavaScript, a fresh environment
    table in Lua);
  - createComment: read a post, count the comment, replace the post, create
    the comment (docs/scripts.md);
  - bulk import of 100 documents (Microsoft's sample in JavaScript, its
    loop in Lua);
  - a query calling a UDF on 1,000 items (the tax sample), beside the
    same query without it.

Run from the repository root (make bench does):
  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/bench/scripts_js.lua [--n 2000]
]]

local regolith = require "regolith"
local system = require "system"

local N = 2000
if arg[1] == "--n" then N = assert(tonumber(arg[2])) end
local now = system.monotime

local SCRIPTS = {
  empty = {
    lua = "return function(ctx) return 1 end",
    js = "function empty() { getContext().getResponse().setBody(1); }",
  },
  createComment = {
    lua = [[
return function(ctx, postId, comment)
  local post, msg, status = ctx:read(postId)
  if not post then ctx:abort(msg, status) end
  post.commentCount = post.commentCount + 1
  assert(ctx:replace(post))
  comment.postId = postId
  assert(ctx:create(comment))
  return post.commentCount
end]],
    js = [[
function createComment(postId, comment) {
  var coll = getContext().getCollection();
  coll.readDocument(coll.getAltLink() + "/docs/" + postId, function (err, post) {
    if (err) throw err;
    post.commentCount++;
    coll.replaceDocument(post._self, post, function (err) {
      if (err) throw err;
      comment.postId = postId;
      coll.createDocument(coll.getSelfLink(), comment, function (err) {
        if (err) throw err;
        getContext().getResponse().setBody(post.commentCount);
      });
    });
  });
}]],
  },
  bulkImport = {
    lua = [[
return function(ctx, items)
  for _, item in ipairs(items) do assert(ctx:create(item)) end
  return #items
end]],
    js = [[
function bulkImport(items) {
  var container = getContext().getCollection();
  var containerLink = container.getSelfLink();
  var count = 0;
  if (!items) throw new Error("The array is undefined or null.");
  var itemsLength = items.length;
  if (itemsLength == 0) getContext().getResponse().setBody(0);
  tryCreate(items[count], callback);
  function tryCreate(item, callback) {
    var isAccepted = container.createDocument(containerLink, item, callback);
    if (!isAccepted) getContext().getResponse().setBody(count);
  }
  function callback(err, item, options) {
    if (err) throw err;
    count++;
    if (count >= itemsLength) getContext().getResponse().setBody(count);
    else tryCreate(items[count], callback);
  }
}]],
  },
}

local TAX = {
  lua = [[
return function(income)
  if income == nil then error("no input") end
  if income < 1000 then return income * 0.1
  elseif income < 10000 then return income * 0.2
  else return income * 0.4 end
end]],
  js = [[
function tax(income) {
  if (income == undefined) throw 'no input';
  if (income < 1000) return income * 0.1;
  else if (income < 10000) return income * 0.2;
  else return income * 0.4;
}]],
}

local function quantiles(t)
  table.sort(t)
  return t[math.floor(#t / 2) + 1], t[math.max(1, math.ceil(#t * 0.99))]
end

-- Times fn(i) for i = 1..n; median and p99 in µs, and the last charge.
local function timed(n, fn)
  local per, charge = {}, nil
  for i = 1, math.floor(n / 10) do fn(-i) end
  for i = 1, n do
    local t0 = now()
    charge = fn(i)
    per[i] = (now() - t0) * 1e6
  end
  local p50, p99 = quantiles(per)
  return p50, p99, charge
end

local dir = os.tmpname()
os.remove(dir)
local db = assert(regolith.open(dir, { sync = "none" }))
local c = assert(db:create_container("bench", { partition_key = "/pk" }))
for name, s in pairs(SCRIPTS) do
  assert(c:create_procedure(name .. "_lua", s.lua))
  assert(c:create_procedure(name .. "_js", s.js))
end
assert(c:create_udf("tax_lua", TAX.lua))
assert(c:create_udf("tax_js", TAX.js))
for i = 1, 1000 do assert(c:create({ id = "t" .. i, pk = "taxes", income = i * 37 })) end

local rows = {}
local function row(what, lang, p50, p99, charge)
  rows[#rows + 1] = { what = what, lang = lang, p50 = p50, p99 = p99, charge = charge }
  io.write(("%-28s %-4s  p50 %8.1f us  p99 %8.1f us  charge %7.2f RU\n"):format(
    what, lang, p50, p99, charge or 0))
end

print(("JavaScript beside Lua (%s; %d calls each, sync none)"):format(_VERSION, N))
for _, lang in ipairs({ "lua", "js" }) do
  row("empty procedure", lang, timed(N, function()
    local _, info = assert(c:execute("empty_" .. lang, "p"))
    return info.charge
  end))
end
for _, lang in ipairs({ "lua", "js" }) do
  local pk = "post-" .. lang
  assert(c:create({ id = "post", pk = pk, commentCount = 0 }))
  row("createComment", lang, timed(N, function(i)
    local _, info = assert(c:execute("createComment_" .. lang, pk, "post",
      { id = lang .. "c" .. i, pk = pk, content = "Nice post" }))
    return info.charge
  end))
end
for _, lang in ipairs({ "lua", "js" }) do
  local n = 0
  row("bulk import of 100", lang, timed(math.floor(N / 20), function()
    n = n + 1
    local items = {}
    for k = 1, 100 do items[k] = { id = lang .. n .. "-" .. k, pk = "bulk-" .. lang, v = k } end
    local _, info = assert(c:execute("bulkImport_" .. lang, "bulk-" .. lang, items))
    return info.charge
  end))
end
row("query of 1,000, no UDF", "-", timed(math.floor(N / 20), function()
  local _, info = assert(c:query("SELECT VALUE c.income * 0.2 FROM c",
                                 nil, { partition_key = "taxes" }))
  return info.charge
end))
for _, lang in ipairs({ "lua", "js" }) do
  row("query of 1,000 with a UDF", lang, timed(math.floor(N / 20), function()
    local _, info = assert(c:query("SELECT VALUE udf.tax_" .. lang .. "(c.income) FROM c",
                                   nil, { partition_key = "taxes" }))
    return info.charge
  end))
end
db:close()
os.execute("rm -rf '" .. dir .. "'")
