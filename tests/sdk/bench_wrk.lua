-- The gateway benchmark's wrk side (tests/sdk/bench.sh):
--
--   wrk ... -s bench_wrk.lua URL -- MODE OP SIGFILE
--
-- MODE "direct": the same calls in Lua inside nginx (bench_direct.lua);
-- "rest": the Cosmos REST API, requests signed in advance (SIGFILE, from
-- bench.mjs prepare: the date, the signature of POST .../docs, then one
-- per item read).  OP: read, create or query.  Prints a RESULT line.

local ITEMS, PARTITIONS = 1000, 100
local mode, op, date, post_sig
local read_sigs = {}
local counter, threads = 0, {}

-- thread_id is a global of each thread's state, set by setup (in the main
-- state) before init runs.
function setup(thread)
  threads[#threads + 1] = thread
  thread:set("thread_id", #threads)
end

function init(args)
  mode, op = args[1], args[2]
  local f = assert(io.open(args[3]))
  date = f:read("*l")
  post_sig = f:read("*l")
  for line in f:lines() do read_sigs[#read_sigs + 1] = line end
  f:close()
  math.randomseed(os.time() + (thread_id or 0) * 7919)
end

local PAYLOAD = ("x"):rep(200)

local function doc(id, pk)
  return ('{"id":"%s","pk":"%s","n":0,"title":"a benchmark item","payload":"%s"}')
    :format(id, pk, PAYLOAD)
end

local function rest_headers(sig, extra)
  local h = { ["x-ms-date"] = date, ["x-ms-version"] = "2020-07-15",
              authorization = sig, accept = "application/json" }
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

function request()
  local i = math.random(0, ITEMS - 1)
  local pk = "p" .. (i % PARTITIONS)
  if op == "read" then
    if mode == "direct" then return wrk.format("GET", ("/read/i%d/%s"):format(i, pk)) end
    return wrk.format("GET", "/dbs/bench/colls/items/docs/i" .. i, rest_headers(read_sigs[i + 1],
      { ["x-ms-documentdb-partitionkey"] = '["' .. pk .. '"]' }))
  end
  if op == "create" then
    counter = counter + 1
    local id = ("wrk%d-%d-%d"):format(os.time(), thread_id, counter)
    pk = "p" .. (counter % PARTITIONS)
    if mode == "direct" then return wrk.format("POST", "/create", nil, doc(id, pk)) end
    return wrk.format("POST", "/dbs/bench/colls/items/docs", rest_headers(post_sig,
      { ["content-type"] = "application/json",
        ["x-ms-documentdb-partitionkey"] = '["' .. pk .. '"]' }), doc(id, pk))
  end
  if mode == "direct" then return wrk.format("GET", "/query/" .. pk) end
  return wrk.format("POST", "/dbs/bench/colls/items/docs", rest_headers(post_sig,
    { ["content-type"] = "application/query+json", ["x-ms-documentdb-isquery"] = "true",
      ["x-ms-documentdb-partitionkey"] = '["' .. pk .. '"]' }),
    '{"query":"SELECT * FROM c WHERE c.pk = @pk","parameters":[{"name":"@pk","value":"'
      .. pk .. '"}]}')
end

function done(summary, latency, requests)
  -- wrk counts an answer of 400 or more as a status error
  local e = summary.errors
  local errors = e.status + e.connect + e.read + e.write + e.timeout
  io.write(("RESULT requests=%d seconds=%.2f rps=%.1f p50=%.2f p99=%.2f errors=%d\n")
    :format(summary.requests, summary.duration / 1e6,
      summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000,
      latency:percentile(99) / 1000, errors))
end
