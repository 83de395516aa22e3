-- Adoption: every request either places an order for a free pet or cancels an order placed
-- before, so each pet goes available -> pending -> available over and over, each step a durable
-- write of an order and its pet. The pets are the arguments after `--` (available ones; at least
-- twice as many as connections, so that each connection always finds one free; otherwise a pet
-- still held is ordered again and answered 409, which the bench reports as a failure).
--   wrk ... -s adopt.lua URL -- PETID [PETID ...]
-- An answer's body says what to do next: a placed order is queued for cancelling, a cancelled
-- one gives its pet back. Cancels go first, so few orders are open at any time.
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "bench.lua")

local all, free, cancels = {}, {}, {}

function init(args)
  for _, id in ipairs(args) do all[#all + 1] = id end
end

function request()
  local order = table.remove(cancels, 1)
  if order ~= nil then
    return bench.format({ method = "PATCH", path = "/v1/store/orders/" .. order, body = '{"status":"cancelled"}',
      headers = { ["Content-Type"] = "application/merge-patch+json" } })
  end
  -- At the start, and whenever answers are not orders (the baseline's canned answer): every pet
  -- again. Against the service, with enough pets, the free ones never run out.
  if #free == 0 then for i, id in ipairs(all) do free[i] = id end end
  local pet = table.remove(free, 1)
  return bench.format({ method = "POST", path = "/v1/store/orders", body = '{"petId":' .. pet .. '}' })
end

function response(status, headers, body)
  local id, pet, state = body:match('^{"id":(%d+),"petId":(%d+),.-"status":"(%a+)"')
  if state == "placed" then
    cancels[#cancels + 1] = id
  elseif state == "cancelled" then
    free[#free + 1] = pet
  end
end
