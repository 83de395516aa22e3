-- What every workload script of `npm run bench` shares (loaded by each with dofile):
--   bench.send(requests): what each request of the load is, built once;
--   done(): the run's figures as one JSON line on stdout, which bench/wrk.ts reads.
-- wrk runs one Lua state per thread and another for setup() and done().

bench = {}

-- The bench key comes through the environment: on the command line, `ps` would show it.
local authorization = os.getenv("BENCH_AUTHORIZATION")

local function headers(spec)
  local list = {}
  if authorization ~= nil and authorization ~= "" then list["Authorization"] = authorization end
  if spec.body ~= nil then list["Content-Type"] = "application/json" end
  -- A script's own headers (a PATCH's media type and If-Match) come last and win; false removes one.
  for name, value in pairs(spec.headers or {}) do list[name] = value or nil end
  return list
end

-- One request's bytes, with the bench key and the media type: for scripts that build requests as they go.
function bench.format(spec)
  return wrk.format(spec.method, spec.path, headers(spec), spec.body)
end

-- Sends the requests in `specs` ({ method =, path =, body =, headers = }) in turn, over and over. Each is
-- formatted once, here: request() runs for every request, on the generator's own core.
-- A single request is left to wrk itself, which then sends one buffer without calling Lua.
function bench.send(specs)
  if #specs == 1 then
    local spec = specs[1]
    wrk.method, wrk.path, wrk.body = spec.method, spec.path, spec.body
    for name, value in pairs(headers(spec)) do wrk.headers[name] = value end
    return
  end
  local requests = {}
  for i, spec in ipairs(specs) do requests[i] = bench.format(spec) end
  local count, at = #requests, 0
  -- wrk decides after init() whether the script makes its own requests: a global request().
  request = function()
    at = at % count + 1
    return requests[at]
  end
end

-- CPU time (user + system, clock ticks) this wrk process has used, all threads included.
local function cpu_ticks()
  local file = io.open("/proc/self/stat", "r")
  if file == nil then return -1 end
  local stat = file:read("*a")
  file:close()
  -- After the command name in parentheses, fields 3 (state) to 13, then utime and stime.
  local utime, stime = stat:match("%) " .. string.rep("%S+ ", 11) .. "(%d+) (%d+)")
  return tonumber(utime) + tonumber(stime)
end

-- wrk's latency statistics, read directly: stats.h of wrk 4.x. bench/wrk.ts checks that what
-- this reads agrees with wrk's own percentiles and counts, so another layout cannot pass unseen.
local ffi = require("ffi")
ffi.cdef [[
  typedef struct { uint64_t count; uint64_t limit; uint64_t min; uint64_t max; uint64_t data[?]; } bench_wrk_stats;
]]

-- Before done(), wrk has "corrected" its latency histogram for coordinated omission (it adds
-- samples below every slow one). bench/wrk.ts undoes that to report the latencies measured;
-- it needs the whole histogram, so it is printed here as [microseconds, count] pairs.
local function histogram(latency)
  local stats = ffi.cast("bench_wrk_stats**", latency)[0]
  local entries = {}
  if stats.count == 0 then return "[]" end
  for us = tonumber(stats.min), tonumber(stats.max) do
    local count = tonumber(stats.data[us])
    if count > 0 then entries[#entries + 1] = string.format("[%d,%d]", us, count) end
  end
  return "[" .. table.concat(entries, ",") .. "]"
end

-- The threads, so that done() can read what their states measured.
local threads = {}
function setup(thread) threads[#threads + 1] = thread end

-- The answers the threads counted in a table named `name` (scripts with a response() hook, the
-- soak's: by status and by error code), as a JSON object.
local function counted(name)
  local total, parts = {}, {}
  for _, thread in ipairs(threads) do
    for key, count in pairs(thread:get(name) or {}) do total[key] = (total[key] or 0) + count end
  end
  for key, count in pairs(total) do parts[#parts + 1] = string.format('"%s":%d', key, count) end
  return "{" .. table.concat(parts, ",") .. "}"
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"bench":"wrk-done","durationUs":%d,"requests":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"wrkLatencyUs":{"p50":%d,"p99":%d,"max":%d},"cpuTicks":%d,' ..
    '"statuses":%s,"codes":%s,"histogramUs":%s}\n',
    summary.duration, summary.requests,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max, cpu_ticks(),
    counted("statuses"), counted("codes"), histogram(latency)))
end
