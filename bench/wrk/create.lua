-- POST the JSON body given after `--` to /v1/pets, on every request: durable creates.
--   wrk ... -s create.lua URL -- '{"name":"Benchmark pet",...}'
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "bench.lua")

function init(args)
  bench.send({ { method = "POST", path = "/v1/pets", body = args[1] } })
end
