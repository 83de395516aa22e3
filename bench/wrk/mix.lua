-- READS GETs of PATH, then one POST of BODY to /v1/pets, over and over: a read/write mix
-- with the writes spread evenly in time (9 reads: 90/10).
--   wrk ... -s mix.lua URL -- READS PATH BODY
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "bench.lua")

function init(args)
  local reads, path, body = tonumber(args[1]), args[2], args[3]
  local specs = {}
  for i = 1, reads do specs[i] = { method = "GET", path = path } end
  specs[reads + 1] = { method = "POST", path = "/v1/pets", body = body }
  bench.send(specs)
end
