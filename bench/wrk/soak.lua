-- The soak's traffic (bench/soak.ts): every kind of request the service answers, good and bad,
-- at about RATE requests a second over all connections, for as long as wrk runs.
--   wrk ... -s soak.lua URL -- RATE CONNECTIONS
-- The keys come through the environment: BENCH_AUTHORIZATION (limits that never bind) and
-- SOAK_FREE_AUTHORIZATION (a free key, driven into 429 rate_limited and then temporarily_banned).
-- done() (bench.lua) also prints the answers counted by status and by error code.
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "bench.lua")

local free = os.getenv("SOAK_FREE_AUTHORIZATION")
local statuses_list = { "available", "pending", "sold" }
local pause_ms, next_page, highest = 0, "/v1/pets", 1
statuses, codes = {}, {}

-- A client address from the documentation ranges (RFC 5737), sent in X-Forwarded-For (the soak's
-- server trusts it): 512 callers without a key, each with its own per-address limit.
local function address()
  local i = math.random(0, 511)
  return (i < 256 and "198.51.100." or "203.0.113.") .. (i % 256)
end

-- One request as bench.format builds it: the bench key unless `headers` say otherwise (false: none).
local function call(method, path, body, headers)
  return bench.format({ method = method, path = path, body = body, headers = headers })
end

local function new_pet()
  return string.format('{"name":"soak pet %d","categoryId":%d,"status":"%s"}', math.random(1e9), math.random(1000), statuses_list[math.random(3)])
end

-- [weight, request] pairs: the same mix as the soak has always sent.
local mix = {
  { 20, function()
      local filter = math.random() < 0.3 and ("&status=" .. statuses_list[math.random(3)]) or ""
      return call("GET", "/v1/pets?limit=" .. math.random(100) .. filter)
    end },
  { 5, function() return call("GET", next_page) end },
  { 15, function() return call("POST", "/v1/pets", new_pet()) end },
  { 15, function() return call("GET", "/v1/pets/" .. math.random(highest + 10)) end },
  { 2, function() return call("POST", "/v1/pets", '{"name": "Rex", "categoryId": 1') end },
  { 2, function() return call("POST", "/v1/pets", '{"name": "", "categoryId": 1.5, "id": 3}') end },
  { 2, function() return call("GET", "/v1/pets?limit=0&colour=red") end },
  { 2, function() return call("GET", "/v1/pets/abc") end },
  { 2, function() return call("POST", "/v1/pets", "name=Rex", { ["Content-Type"] = "application/x-www-form-urlencoded" }) end },
  { 1, function() return call("POST", "/v1/pets", '{"name":"' .. string.rep("x", 17 * 1024) .. '","categoryId":1}') end },
  { 1, function() return call("DELETE", "/v1/pets") end },
  { 1, function() return call("GET", "/v1/nowhere") end },
  -- Refused by Node's parser (a space in a header name): 400 bad_request, and the connection closed.
  { 2, function() return "GET /v1/pets HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n" end },
  { 7, function() return call("GET", "/v1/pets", nil, { ["Authorization"] = false, ["X-Forwarded-For"] = address() }) end },
  { 8, function() return call("GET", "/v1/pets", nil, { ["Authorization"] = "Bearer pk_test_" .. math.random(1e9), ["X-Forwarded-For"] = address() }) end },
  { 15, function() return call("GET", "/v1/pets?limit=1", nil, { ["Authorization"] = free }) end },
}
local total = 0
for _, entry in ipairs(mix) do total = total + entry[1] end

function init(args)
  -- Each connection waits this long before each request: RATE over all of them.
  pause_ms = 1000 * tonumber(args[2]) / tonumber(args[1])
  math.randomseed(os.time() + math.random(1000))
end

function delay() return pause_ms end

function request()
  local roll = math.random() * total
  for _, entry in ipairs(mix) do
    roll = roll - entry[1]
    if roll < 0 then return entry[2]() end
  end
  return mix[1][2]()
end

function response(status, headers, body)
  statuses[tostring(status)] = (statuses[tostring(status)] or 0) + 1
  local code = body:match('"code":"([a-z_]+)"')
  if status >= 400 and code ~= nil then codes[code] = (codes[code] or 0) + 1 end
  -- A list's next page is followed; after the last one, the traversal starts again.
  if status == 200 and body:sub(1, 1) == "[" then
    next_page = headers["Link"] and headers["Link"]:match('<([^>]+)>; rel="next"') or "/v1/pets"
  end
  local id = status == 201 and tonumber(body:match('"id":(%d+)'))
  if id and id > highest then highest = id end
end
