-- Reads while pets change: each argument after `--` is one request, "GET PATH" or
-- "PATCH PATH BODY", sent in turn, over and over. A PATCH is a merge patch with If-Match: *,
-- so it is a real change whatever the pet's version.
--   wrk ... -s patchmix.lua URL -- 'GET /v1/pets?limit=20' 'PATCH /v1/pets/7 {"status":"sold"}' ...
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "bench.lua")

function init(args)
  local specs = {}
  for i, line in ipairs(args) do
    local method, path, body = line:match("^(%u+) (%S+) ?(.*)$")
    if method == "PATCH" then
      specs[i] = {
        method = method, path = path, body = body,
        headers = { ["Content-Type"] = "application/merge-patch+json", ["If-Match"] = "*" },
      }
    else
      specs[i] = { method = method, path = path }
    end
  end
  bench.send(specs)
end
