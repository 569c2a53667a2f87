-- POST /v1/coupons/validate by one signed-in user (validate changes nothing).
-- Env: BENCH_TOKEN, BENCH_CODE.
-- The request never changes, so it is given to wrk once (no per-request Lua call).
wrk.method = "POST"
wrk.path = "/v1/coupons/validate"
wrk.body = '{"code":"' .. os.getenv("BENCH_CODE") .. '","platform":"web"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")

function done(summary, latency, requests)
  io.write(string.format("RESULT rps=%.1f p50_ms=%.2f p99_ms=%.2f errors=%d requests=%d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout + summary.errors.status,
    summary.requests))
end
