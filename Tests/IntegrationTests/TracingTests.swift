import Foundation
import TestSupport
import XCTest

/// W3C trace context across the stack, and its spans exported over OTLP/HTTP to a fake collector
/// (a real HTTP server reading OTLP's JSON mapping); and the process and business metrics every
/// service exposes. One stack, granting through a fake RevenueCat.
final class TracingTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var collector: FakeOTLPCollector!
    nonisolated(unsafe) static var revenueCat: FakeRevenueCat!

    override class func startSuite() throws {
        collector = try FakeOTLPCollector()
        revenueCat = try FakeRevenueCat()
        stack = try Stack(environment: [
            "REDEEM_OTLP_ENDPOINT": collector.url.absoluteString,
            "REDEEM_ENTITLEMENT_PROVIDER": "revenuecat", "REDEEM_REVENUECAT_URL": revenueCat.url.absoluteString,
            "REDEEM_REVENUECAT_KEY": "sk_rc_tracing", "REDEEM_WEBHOOK_ALLOW_PRIVATE": "1"
        ])
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await collector?.stop()
            await revenueCat?.stop()
            done.signal()
        }
        done.wait()
    }

    var client: HTTPClient { Self.stack.client }

    static func hex(_ bytes: Int) -> String {
        (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    /// A client's action (sign up, then redeem a free period) under one trace of the client's own:
    /// each request carries a `traceparent` naming a client span. The spans of all four services
    /// reach the collector in that trace, each under its caller: the gateway's under the client's,
    /// the back-ends' under the gateway's bus calls, grants' grant under coupons' command, and
    /// RevenueCat's call under grants, whose `traceparent` RevenueCat receives.
    func testOneRedemptionIsOneTraceAcrossTheFourServices() async throws {
        let trace = Self.hex(16)
        let signUpSpan = Self.hex(8), redeemSpan = Self.hex(8)

        let email = "trace-\(UUID().uuidString.prefix(8))@example.com"
        let signUp = try await client.json(
            "POST", "/v1/accounts", ["email": email, "password": "correct horse battery"],
            headers: ["traceparent": "00-\(trace)-\(signUpSpan)-01"])
        XCTAssertEqual(signUp.status, 201, signUp.text)
        let session = try signUp.decode(AccountSessionBody.self)
        let appUserId = try XCTUnwrap(session.account.appUserId)

        let code = "T-" + UUID().uuidString.prefix(8).uppercased()
        let made = try await client.json(
            "POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "day", "count": 7]],
            token: Self.stack.adminKey)
        XCTAssertEqual(made.status, 201, made.text)
        let redeem = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "web"], token: session.session.accessToken,
            headers: ["traceparent": "00-\(trace)-\(redeemSpan)-01"])
        XCTAssertEqual(redeem.status, 201, redeem.text)
        let id = try redeem.decode(RedemptionBody.self).redemptionId
        let done = try await client.get("/v1/redemptions/\(id)?wait=20", token: session.session.accessToken)
        XCTAssertEqual(try done.decode(RedemptionBody.self).status, "completed", done.text)

        // Spans leave each service every half second.
        let collector = Self.collector!
        let arrived = try await Self.stack.eventually(15) {
            let spans = collector.spans(ofTrace: trace)
            return Set(spans.map(\.service)) == ["gateway", "accounts", "coupons", "grants"]
                && spans.contains { $0.service == "grants" && $0.attributes["peer.service"] == "revenuecat" }
        }
        let spans = collector.spans(ofTrace: trace)
        XCTAssertTrue(
            arrived, "services with spans: \(Set(spans.map(\.service))); \(spans.map { "\($0.service) \($0.name)" })")

        let byId = Dictionary(spans.map { ($0.spanId, $0) }, uniquingKeysWith: { a, _ in a })
        // The gateway's request spans are the children of the client's spans.
        let signUpServer = try XCTUnwrap(spans.first { $0.parentSpanId == signUpSpan })
        XCTAssertEqual(signUpServer.service, "gateway")
        XCTAssertEqual(signUpServer.kind, 2, "SPAN_KIND_SERVER")
        XCTAssertEqual(signUpServer.name, "POST /v1/accounts")
        let redeemServer = try XCTUnwrap(spans.first { $0.parentSpanId == redeemSpan })
        XCTAssertEqual(redeemServer.name, "POST /v1/redemptions")
        // Every other span's parent is a span of the trace: one tree under the client's two spans.
        for span in spans where ![signUpSpan, redeemSpan].contains(span.parentSpanId ?? "") {
            XCTAssertNotNil(byId[span.parentSpanId ?? ""], "\(span.service) \(span.name) has no parent in the trace")
            XCTAssertLessThanOrEqual(span.start, span.end)
        }
        func root(_ span: FakeOTLPCollector.Span) -> String? {
            var s = span
            while let p = s.parentSpanId, let up = byId[p] { s = up }
            return s.parentSpanId
        }
        // accounts served the sign-up, under the gateway's bus call.
        let accounts = try XCTUnwrap(spans.first { $0.service == "accounts" && $0.kind == 2 })
        XCTAssertEqual(byId[accounts.parentSpanId ?? ""]?.service, "gateway")
        XCTAssertEqual(byId[accounts.parentSpanId ?? ""]?.kind, 3, "the gateway's bus call is a client span")
        XCTAssertEqual(root(accounts), signUpSpan)
        // coupons reserved, and grants granted through RevenueCat, under the redemption's request.
        let coupons = try XCTUnwrap(spans.first { $0.service == "coupons" && $0.kind == 2 })
        XCTAssertEqual(root(coupons), redeemSpan)
        let grant = try XCTUnwrap(
            spans.first { $0.service == "grants" && $0.kind == 5 }, "grants consumed the pushed command")
        XCTAssertEqual(root(grant), redeemSpan)
        let call = try XCTUnwrap(
            spans.first { $0.service == "grants" && $0.attributes["peer.service"] == "revenuecat" })
        XCTAssertEqual(call.kind, 3)
        XCTAssertEqual(root(call), redeemSpan)
        // RevenueCat was told the call's span.
        let received = Self.revenueCat.received.filter { $0.appUserId == appUserId }
        XCTAssertEqual(received.map(\.traceparent), ["00-\(trace)-\(call.spanId)-01"])

        // Each service's log lines of that work name the trace.
        let logs = Self.stack.logs().split(separator: "\n").filter { $0.contains("\"trace.id\":\"\(trace)\"") }
        XCTAssertTrue(
            logs.contains { $0.contains("\"service\":\"gateway\"") && $0.contains("/v1/redemptions") },
            "the access log names the trace")
    }

    /// A webhook delivery is a client span of grants, and the endpoint receives its `traceparent`.
    func testAWebhookDeliveryCarriesItsSpan() async throws {
        let receiver = try WebhookReceiver()
        addTeardownBlock { await receiver.stop() }
        let admin = Self.stack.adminKey
        let endpoint = try await client.json(
            "POST", "/v1/webhooks", ["url": receiver.url.absoluteString, "events": ["coupon.redeemed"]], token: admin)
        XCTAssertEqual(endpoint.status, 201, endpoint.text)
        let id = try XCTUnwrap(try endpoint.json()["id"] as? String)
        let client = self.client
        addTeardownBlock {
            _ = try await client.send(
                "DELETE", "/v1/webhooks/\(id)", headers: ["Authorization": "Bearer \(admin)"])
        }

        let signUp = try await client.json(
            "POST", "/v1/accounts",
            ["email": "hook-\(UUID().uuidString.prefix(8))@example.com", "password": "correct horse battery"])
        let token = try signUp.decode(AccountSessionBody.self).session.accessToken
        let code = "W-" + UUID().uuidString.prefix(8).uppercased()
        let made = try await client.json(
            "POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "day", "count": 7]],
            token: admin)
        XCTAssertEqual(made.status, 201, made.text)
        let redeemed = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: token)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)

        let delivered = try await Self.stack.eventually(20) { receiver.received.contains { $0.body.count > 0 } }
        XCTAssertTrue(delivered)
        let header = try XCTUnwrap(receiver.received.first?.traceparent, "the delivery names its span")
        let parts = header.split(separator: "-")
        XCTAssertEqual(parts.count, 4, header)
        let arrived = try await Self.stack.eventually(10) {
            Self.collector.received.contains { $0.spanId == String(parts[2]) && $0.traceId == String(parts[1]) }
        }
        XCTAssertTrue(arrived, "the collector has the delivery's span")
        let span = try XCTUnwrap(Self.collector.received.first { $0.spanId == String(parts[2]) })
        XCTAssertEqual(span.service, "grants")
        XCTAssertEqual(span.name, "webhook POST")
        XCTAssertEqual(span.kind, 3)
    }

    /// A request without a `traceparent` (or with a malformed one) starts a trace of its own.
    func testARequestWithoutAValidTraceparentStartsATrace() async throws {
        for header in [nil, "00-zz-not-a-trace-01", "00-00000000000000000000000000000000-0000000000000001-01"] {
            let before = Set(Self.collector.received.map(\.traceId))
            let r = try await client.send("GET", "/v1/coupons", headers: header.map { ["traceparent": $0] } ?? [:])
            XCTAssertEqual(r.status, 401)
            let started = try await Self.stack.eventually(10) {
                Self.collector.received.contains {
                    !before.contains($0.traceId) && $0.name == "GET /v1/coupons" && $0.parentSpanId == nil
                }
            }
            XCTAssertTrue(started, "a new root span for traceparent \(header ?? "none")")
        }
    }

    /// Every service exposes the standard process metrics, its build, and what it depends on.
    func testEveryServiceExposesProcessAndBuildMetrics() async throws {
        let wiring = try Self.stack.wiring()
        for service in ["accounts", "coupons", "grants", "gateway"] {
            let port = try XCTUnwrap(wiring["REDEEM_\(service.uppercased())_HTTP_PORT"], service)
            let text = try await HTTPClient(base: URL(string: "http://127.0.0.1:\(port)")!).get("/metrics").text
            func value(_ name: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap {
                    Double($0.split(separator: " ").last!)
                }
            }
            XCTAssertTrue(text.contains("# TYPE process_cpu_seconds_total counter"), service)
            XCTAssertGreaterThan(value("process_resident_memory_bytes") ?? 0, 1_000_000, service)
            XCTAssertGreaterThan(value("process_open_fds") ?? 0, 2, service)
            let start = try XCTUnwrap(value("process_start_time_seconds"), service)
            XCTAssertLessThan(abs(start - Date().timeIntervalSince1970), 3600, "\(service) started within the hour")
            XCTAssertTrue(text.contains("redeem_build_info{service=\"\(service)\",version=\""), service)
        }
    }
}
