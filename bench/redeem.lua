-- POST /v1/redemptions as many distinct signed-in users: each request takes the next token.
-- Env: BENCH_TOKENS (file, one token a line), BENCH_CODE, BENCH_PLATFORM, BENCH_PRODUCT (optional).
-- Requests are formatted once, before the run, so the load generator spends little CPU of the
-- two cores it shares with the system under test.
local counter = 0
local threads = {}

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  local product = os.getenv("BENCH_PRODUCT")
  local extra = product and product ~= "" and (',"productId":"' .. product .. '"') or ""
  local body = '{"code":"' .. os.getenv("BENCH_CODE") .. '","platform":"' .. (os.getenv("BENCH_PLATFORM") or "web") .. '"' .. extra .. '}'
  requests = {}
  local i = 0
  for line in io.lines(os.getenv("BENCH_TOKENS")) do
    -- two threads take alternate tokens, so no token is used twice
    if i % 2 == id then
      requests[#requests + 1] = wrk.format("POST", "/v1/redemptions",
        { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. line }, body)
    end
    i = i + 1
  end
  next_index = 0
end

function request()
  next_index = next_index + 1
  return requests[next_index] or requests[1]
end

-- `used`: the lines of BENCH_TOKENS the run took (thread t's k-th request takes line 2k + t), so
-- that a later run on the same file can start after them (bench/stack.sh, `spend_tokens`).
function done(summary, latency, requests)
  local used = 0
  for _, t in ipairs(threads) do
    used = math.max(used, 2 * (t:get("next_index") or 0))
  end
  io.write(string.format("RESULT rps=%.1f p50_ms=%.2f p99_ms=%.2f errors=%d requests=%d used=%d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout + summary.errors.status,
    summary.requests, used))
end
