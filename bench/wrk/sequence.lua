-- Sends the requests given after `--` in turn, over and over; each is "METHOD PATH [BODY]". A body
-- is JSON, or a merge patch for PATCH, which also sends If-Match: * (a real change whatever the
-- pet's version, through the If-Match parser all the same).
--   wrk ... -s sequence.lua URL -- 'GET /v1/pets?limit=20' 'PATCH /v1/pets/7 {"status":"sold"}' ...
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "bench.lua")

function init(args)
  local specs = {}
  for i, line in ipairs(args) do
    local method, path, body = line:match("^(%u+) (%S+) ?(.*)$")
    specs[i] = { method = method, path = path, body = body ~= "" and body or nil }
    if method == "PATCH" then
      specs[i].headers = { ["Content-Type"] = "application/merge-patch+json", ["If-Match"] = "*" }
    end
  end
  bench.send(specs)
end
