-- GET each path given after `--` in turn: a list page, a deep cursor, pets by id.
--   wrk ... -s get.lua URL -- /v1/pets?limit=20 [more paths]
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "bench.lua")

function init(args)
  local specs = {}
  for i, path in ipairs(args) do specs[i] = { method = "GET", path = path } end
  bench.send(specs)
end
