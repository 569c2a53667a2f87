-- POST /v1/redemptions as many distinct signed-in users: each request takes the next token.
-- Env: BENCH_TOKENS (file, one token a line), BENCH_CODE, BENCH_PLATFORM, BENCH_PRODUCT (optional).
local threads = {}
local counter = 0

function setup(thread)
  thread:set("id", counter)
  table.insert(threads, thread)
  counter = counter + 1
end

function init(args)
  tokens = {}
  for line in io.lines(os.getenv("BENCH_TOKENS")) do tokens[#tokens + 1] = line end
  nthreads = counter
  next_index = id + 1
  statuses = {}
  local product = os.getenv("BENCH_PRODUCT")
  local extra = product and product ~= "" and (',"productId":"' .. product .. '"') or ""
  body = '{"code":"' .. os.getenv("BENCH_CODE") .. '","platform":"' .. (os.getenv("BENCH_PLATFORM") or "web") .. '"' .. extra .. '}'
end

function request()
  local token = tokens[next_index]
  next_index = next_index + 2  -- two threads take alternate tokens, so no token is used twice
  if token == nil then token = tokens[1] end
  return wrk.format("POST", "/v1/redemptions", { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. token }, body)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    for k, v in pairs(s) do total[k] = (total[k] or 0) + v end
  end
  local parts = {}
  for k, v in pairs(total) do parts[#parts + 1] = k .. "=" .. v end
  io.write("STATUSES " .. table.concat(parts, " ") .. "\n")
  io.write(string.format("RESULT rps=%.1f p50_ms=%.2f p99_ms=%.2f errors=%d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout + summary.errors.status))
end
