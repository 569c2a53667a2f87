import Testing
@testable import Telemetry

@Suite struct MetricsTests {
    @Test func rendersCountersAndHistogramsInPrometheusFormat() {
        let m = MetricsRegistry()
        m.increment("redeem_http_requests_total", help: "Requests.", labels: ["route": "/v1/x/{id}", "status": "200"])
        m.increment("redeem_http_requests_total", help: "Requests.", labels: ["route": "/v1/x/{id}", "status": "200"])
        m.observe("redeem_lat_seconds", help: "Latency.", labels: ["route": "/a"], 0.003, buckets: [0.001, 0.01])
        m.observe("redeem_lat_seconds", help: "Latency.", labels: ["route": "/a"], 0.5, buckets: [0.001, 0.01])
        m.observe("redeem_lat_seconds", help: "Latency.", labels: ["route": "/b"], 0.0005, buckets: [0.001, 0.01])
        m.gauge("redeem_outbox_depth", help: "Rows.") { [([:], 7)] }
        let text = m.render()
        #expect(text.contains("# TYPE redeem_http_requests_total counter"))
        #expect(text.contains("redeem_http_requests_total{route=\"/v1/x/{id}\",status=\"200\"} 2"))
        #expect(text.contains("# TYPE redeem_lat_seconds histogram"))
        #expect(text.contains("redeem_lat_seconds_bucket{route=\"/a\",le=\"0.001\"} 0"))
        #expect(text.contains("redeem_lat_seconds_bucket{route=\"/a\",le=\"0.01\"} 1"))
        #expect(text.contains("redeem_lat_seconds_bucket{route=\"/a\",le=\"+Inf\"} 2"))
        #expect(text.contains("redeem_lat_seconds_count{route=\"/a\"} 2"))
        #expect(text.contains("redeem_lat_seconds_bucket{route=\"/b\",le=\"0.001\"} 1"))
        #expect(text.contains("redeem_lat_seconds_sum{route=\"/b\"} 0.0005"))
        #expect(text.contains("redeem_lat_seconds_count{route=\"/b\"} 1"))
        #expect(text.contains("redeem_outbox_depth 7"))
    }

    @Test func escapesLabelValues() {
        #expect(MetricsRegistry.escape("a\"b\\c\nd") == "a\\\"b\\\\c\\nd")
    }
}
