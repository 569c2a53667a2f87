-- POST /v1/coupons/validate by one signed-in user (validate changes nothing).
-- Env: BENCH_TOKEN, BENCH_CODE.
function init(args)
  statuses = {}
  body = '{"code":"' .. os.getenv("BENCH_CODE") .. '","platform":"web"}'
  headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN") }
end

function request()
  return wrk.format("POST", "/v1/coupons/validate", headers, body)
end

function done(summary, latency, requests)
  io.write(string.format("RESULT rps=%.1f p50_ms=%.2f p99_ms=%.2f errors=%d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout + summary.errors.status))
end
