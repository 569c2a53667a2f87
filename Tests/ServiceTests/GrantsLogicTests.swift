import Foundation
import Testing
@testable import GrantsService
@testable import Core
@testable import Runtime

@Suite struct GrantsLogicTests {
    @Test func retryDelaysDoubleFromOneSecondCapAtTheMaximumAndHonourRetryAfter() {
        let p = RetryPolicy(initial: 1, max: 300)
        #expect(p.delay(afterAttempt: 1, retryAfter: nil, random: 0.5) == 1)
        #expect(p.delay(afterAttempt: 2, retryAfter: nil, random: 0.5) == 2)
        #expect(p.delay(afterAttempt: 4, retryAfter: nil, random: 0.5) == 8)
        #expect(p.delay(afterAttempt: 30, retryAfter: nil, random: 0.99) == 300, "never more than 5 minutes apart")
        let low = p.delay(afterAttempt: 3, retryAfter: nil, random: 0)
        let high = p.delay(afterAttempt: 3, retryAfter: nil, random: 0.999)
        #expect(low >= 3.2 && high <= 4.8 && low < high, "jitter around 4 s")
        #expect(p.delay(afterAttempt: 1, retryAfter: 7, random: 0.5) == 7, "Retry-After wins when later")
    }

    /// The ledger keeps a command as the bus message it came in, byte for byte, and reads back
    /// both that and the bare command rows of earlier versions hold.
    @Test func aCommandIsKeptAsItArrivedAndReadInEitherShape() throws {
        let coupon = PublicCoupon(code: "KEEP", kind: .freePeriod, percentOff: nil, amountOff: nil,
                                  duration: CouponDuration(unit: "week", count: 2), periodCount: nil, entitlementId: "pro")
        let command = GrantCommand(redemptionId: UUID.random(), accountId: UUID.random(), appUserId: "user-1", entitlementId: "pro",
                                   duration: coupon.duration, sandbox: true, coupon: coupon, platform: .ios, productId: nil,
                                   reservedAt: Date(timeIntervalSince1970: 1_764_483_573.125), mode: .test)
        let message = try JSONEncoder.bus.encode(Envelope(id: "m1", type: GrantCommand.type, body: command))
        let received = ReceivedCommand(command, message: message)
        #expect(Data(received.text.utf8) == message)
        #expect(try ReceivedCommand.decodeStored(received.text).command == command)
        let bare = try ReceivedCommand(command)
        #expect(!bare.text.contains("\"body\""))
        #expect(try ReceivedCommand.decodeStored(bare.text).command == command)
        #expect(throws: DecodingError.self) {
            try ReceivedCommand.decodeStored(#"{"body":{"redemptionId":"x"}}"#).command
        }
        // The span a command was sent from is read back with it, for the provider's call.
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let traced = try JSONEncoder.bus.encode(
            Envelope(id: "m2", type: GrantCommand.type, traceparent: parent, body: command))
        let stored = try ReceivedCommand.decodeStored(String(decoding: traced, as: UTF8.self))
        #expect(stored.command == command && stored.traceparent == parent)
        #expect(try ReceivedCommand.decodeStored(bare.text).traceparent == nil)
        // A binary envelope is kept as its JSON (the column is text), span and all.
        let binary = try BusBinary.encode(
            Envelope(id: "m3", type: GrantCommand.type, traceparent: parent, body: command))
        let kept = ReceivedCommand(command, message: binary)
        #expect(kept.text.hasPrefix("{") && kept.text.contains(#""id":"m3""#))
        let read = try ReceivedCommand.decodeStored(kept.text)
        #expect(read.command == command && read.traceparent == parent)
    }

    @Test func theRateLimiterSpacesCallsSoNoSecondHoldsMoreThanTheRate() {
        let limiter = RateLimiter(perSecond: 20)
        let start = ContinuousClock.now
        let slots = (0..<100).map { _ in limiter.reserve(now: start) }
        for (i, s) in slots.enumerated() {
            let window = slots[i...].prefix { $0 - s < .seconds(1) }
            #expect(window.count <= 20)
        }
        #expect(slots.last! - start < .seconds(5.5), "and no more than 10% slower than the rate")
    }

    @Test func webhookGapsFollowTheScheduleWithAtMostTenPercentJitterThenGiveUp() {
        let schedule: [TimeInterval] = [5, 300, 1800]
        #expect(WebhookDeliverer.nextGap(schedule: schedule, attempts: 1, random: 0) == 5)
        #expect(WebhookDeliverer.nextGap(schedule: schedule, attempts: 2, random: 0.999)! <= 330)
        #expect(WebhookDeliverer.nextGap(schedule: schedule, attempts: 3, random: 0.5) == 1890)
        #expect(WebhookDeliverer.nextGap(schedule: schedule, attempts: 4, random: 0.5) == nil)
    }

    /// Standard Webhooks' rules as a table: a 2xx is delivered, 410 stops the endpoint, anything
    /// else (a redirect, a 5xx, no answer, a refused destination) waits for the schedule's next gap,
    /// and after the last gap has failed for good. A 410 wins even on the last attempt.
    @Test func anAttemptsOutcomeFollowsItsStatusAndTheSchedule() {
        typealias A = WebhookDeliverer.Attempt
        let schedule: [TimeInterval] = [5, 300]
        func outcome(_ a: A, attempts: Int = 1) -> WebhookDeliverer.Outcome {
            WebhookDeliverer.outcome(of: a, attempts: attempts, schedule: schedule, random: 0)
        }
        #expect(outcome(A(status: 200)) == .delivered(status: 200))
        #expect(outcome(A(status: 204), attempts: 3) == .delivered(status: 204))
        #expect(outcome(A(status: 410)) == .gone)
        #expect(outcome(A(status: 410), attempts: 3) == .gone)
        #expect(outcome(A(status: 302, error: "redirects are not followed")) == .retry(after: 5))
        #expect(outcome(A(status: 500), attempts: 2) == .retry(after: 300))
        #expect(outcome(A(error: "no answer")) == .retry(after: 5))
        #expect(outcome(A(status: 500), attempts: 3) == .failed)
        #expect(outcome(A(error: "url resolves to a private or loopback address (127.0.0.1)"), attempts: 3) == .failed)
    }

    @Test func webhookURLsMustBeHTTPSAndPublicUnlessAllowed() async throws {
        await #expect(throws: ServiceError.self) {
            try await Webhooks.checkURL("http://example.com/hook", allowPrivate: false)
        }
        for bad in ["https://127.0.0.1/x", "https://localhost/x", "https://10.1.2.3/x", "https://192.168.0.9/x", "https://169.254.169.254/latest",
                    "https://[::1]/x", "https://172.20.0.1/x", "https://user:pw@127.0.0.1/x"] {
            await #expect(throws: ServiceError.self, "\(bad)") { try await Webhooks.checkURL(bad, allowPrivate: false) }
        }
        await #expect(throws: Never.self) { try await Webhooks.checkURL("http://127.0.0.1:9/x", allowPrivate: true) }
        #expect(Webhooks.isPrivate("8.8.8.8") == false)
        #expect(Webhooks.isPrivate("::ffff:10.0.0.1") == true)
        // IPv6 addresses that carry or hide an IPv4 one: NAT64, 6to4, compatible, Teredo.
        for hidden in ["64:ff9b::7f00:1", "64:ff9b::a00:1", "2002:7f00:1::", "2002:c0a8:101::1", "::7f00:1", "2001:0:4136:e378::1",
                       "fe80::1", "fd12::1", "ff02::1", "::", "127.1", "not an address"] {
            #expect(Webhooks.isPrivate(hidden), "\(hidden)")
        }
        for address in ["2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1", "1.1.1.1"] {
            #expect(!Webhooks.isPrivate(address), "\(address)")
        }
        // IETF protocol assignments (192.0.0.0/24), benchmarking (198.18.0.0/15) and the deprecated
        // site-local IPv6 range (fec0::/10), also when carried in IPv6; their neighbours are public.
        for reserved in ["192.0.0.1", "192.0.0.255", "198.18.0.1", "198.19.255.254", "fec0::1", "feff:ffff::1", "::ffff:198.18.0.9",
                         "64:ff9b::c000:1", "2002:c612:1::1"] {
            #expect(Webhooks.isPrivate(reserved), "\(reserved)")
            #expect(Webhooks.refusal(scheme: "https", address: reserved, allowPrivate: false) != nil, "\(reserved)")
        }
        for neighbour in ["192.0.1.1", "191.255.255.255", "198.17.255.255", "198.20.0.1", "fe00::1", "fe7f::1"] {
            #expect(!Webhooks.isPrivate(neighbour), "\(neighbour)")
        }
        for bad in ["https://[64:ff9b::7f00:1]/h", "https://[2002:7f00:1::]/h"] {
            await #expect(throws: ServiceError.self, "\(bad)") { try await Webhooks.checkURL(bad, allowPrivate: false) }
        }
    }

    /// The rule per address, on the classifier itself (nothing is resolved or sent): https to a
    /// public address always; http or https to a private or loopback one only when allowed; plain
    /// http to a public one never, even when private addresses are allowed.
    @Test func plainHTTPReachesOnlyPrivateAddressesAndOnlyWhenAllowed() async throws {
        for address in ["93.184.215.14", "2606:4700::1111", "1.1.1.1"] {
            #expect(Webhooks.refusal(scheme: "https", address: address, allowPrivate: false) == nil, "\(address)")
            #expect(Webhooks.refusal(scheme: "https", address: address, allowPrivate: true) == nil, "\(address)")
            #expect(Webhooks.refusal(scheme: "http", address: address, allowPrivate: false) != nil, "\(address)")
            #expect(Webhooks.refusal(scheme: "http", address: address, allowPrivate: true) != nil, "\(address)")
        }
        for address in ["127.0.0.1", "::1", "10.0.0.7", "192.168.1.1", "fd00::1", "169.254.169.254"] {
            #expect(Webhooks.refusal(scheme: "https", address: address, allowPrivate: false) != nil, "\(address)")
            #expect(Webhooks.refusal(scheme: "http", address: address, allowPrivate: false) != nil, "\(address)")
            #expect(Webhooks.refusal(scheme: "https", address: address, allowPrivate: true) == nil, "\(address)")
            #expect(Webhooks.refusal(scheme: "http", address: address, allowPrivate: true) == nil, "\(address)")
        }
        // Numeric hosts resolve without a lookup: plain http to a public address is refused even
        // with REDEEM_WEBHOOK_ALLOW_PRIVATE; to loopback it is allowed.
        for url in ["http://93.184.215.14/hook", "http://[2606:4700::1111]:8080/hook", "http://1.1.1.1/"] {
            await #expect(throws: ServiceError.self, "\(url)") { try await Webhooks.checkURL(url, allowPrivate: true) }
        }
        #expect(try await Webhooks.checkURL("http://127.0.0.1:9/x", allowPrivate: true).port == 9)
        #expect(try Webhooks.destination("https://[2606:4700::1111]:8443/x", allowPrivate: false).address == "2606:4700::1111")
    }

    /// A host that does not resolve in time is `unavailable` for the url, to try again, answered
    /// at the bound rather than when the lookup ends; one that resolves in time is checked as usual
    /// (a stub resolver: nothing leaves the process).
    @Test func aURLWhoseHostResolvesTooSlowlyIsUnavailableAtTheBound() async throws {
        let slow: @Sendable (String) -> [String] = { _ in
            Thread.sleep(forTimeInterval: 8)
            return ["93.184.215.14"]
        }
        let started = ContinuousClock.now
        let error = await #expect(throws: ServiceError.self) {
            try await Webhooks.checkURL(
                "https://hooks.example/in", allowPrivate: false, within: .milliseconds(200), resolve: slow)
        }
        #expect(ContinuousClock.now - started < .seconds(5), "answered at the bound, not when the lookup ended")
        #expect(error?.code == .unavailable && error?.field == "url" && error?.retryAfter == 1)
        let quick: @Sendable (String) -> [String] = { _ in ["93.184.215.14"] }
        let url = try await Webhooks.checkURL(
            "https://hooks.example/in", allowPrivate: false, within: .seconds(5), resolve: quick)
        #expect(url.host == "hooks.example")
        let inner: @Sendable (String) -> [String] = { _ in ["10.0.0.7"] }
        await #expect(throws: ServiceError.self) {
            try await Webhooks.checkURL(
                "https://inner.example/in", allowPrivate: false, within: .seconds(5), resolve: inner)
        }
    }

    /// A name is resolved once per check, every address it answers must pass, and the first is
    /// the one the delivery connects to (a stub resolver: nothing leaves the process).
    @Test func aNameIsResolvedOnceAndEveryAddressMustPass() throws {
        let answers: [String: [String]] = ["hooks.example": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
                                           "mixed.example": ["93.184.215.14", "10.0.0.7"], "inner.example": ["10.0.0.7"]]
        var lookups: [String] = []
        let resolve = { (host: String) -> [String] in lookups.append(host); return answers[host] ?? [] }
        let d = try Webhooks.destination("https://Hooks.Example/in?x=1", allowPrivate: false, resolve: resolve)
        #expect(d.address == "93.184.215.14" && d.port == 443 && d.scheme == "https")
        #expect(lookups == ["hooks.example"])
        #expect(throws: ServiceError.self) { try Webhooks.destination("https://mixed.example/", allowPrivate: false, resolve: resolve) }
        #expect(throws: ServiceError.self) { try Webhooks.destination("https://inner.example/", allowPrivate: false, resolve: resolve) }
        #expect(try Webhooks.destination("https://inner.example:8443/", allowPrivate: true, resolve: resolve).address == "10.0.0.7")
        #expect(throws: ServiceError.self) { try Webhooks.destination("http://mixed.example/", allowPrivate: true, resolve: resolve) }
        #expect(throws: ServiceError.self) { try Webhooks.destination("https://nowhere.example/", allowPrivate: true, resolve: resolve) }
        // The system resolver: localhost is loopback, refused unless allowed.
        #expect(throws: ServiceError.self) { try Webhooks.destination("https://localhost:8443/x", allowPrivate: false) }
        #expect(Webhooks.isPrivate(try Webhooks.destination("http://localhost:8443/x", allowPrivate: true).address))
    }

    /// The delivery log keeps at most 1 KiB of an answer, as text PostgreSQL can store.
    @Test func theLogKeepsAtMostOneKibibyteOfAnAnswer() {
        #expect(WebhookDeliverer.logExcerpt([]) == nil)
        #expect(WebhookDeliverer.logExcerpt(Array("ok".utf8)) == "ok")
        #expect(WebhookDeliverer.logExcerpt(Array(repeating: 0x61, count: 5000))?.utf8.count == 1024)
        // A 3-byte character across the limit is left out whole; NUL and invalid bytes become U+FFFD.
        let cut = WebhookDeliverer.logExcerpt(Array(repeating: 0x61, count: 1022) + Array("€€".utf8))
        #expect(cut == String(repeating: "a", count: 1022))
        #expect(WebhookDeliverer.logExcerpt([0x61, 0, 0xff, 0x62]) == "a\u{FFFD}\u{FFFD}b")
        for bytes in [Array(repeating: UInt8(0), count: 2000), Array(repeating: UInt8(0xff), count: 2000)] {
            #expect(WebhookDeliverer.logExcerpt(bytes)!.utf8.count <= 1024)
        }
    }

    @Test func signaturesMatchTheStandardWebhooksExample() {
        // From the Standard Webhooks reference tests: secret, id, timestamp and body give this signature.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
        let body = Data(#"{"test": 2432232314}"#.utf8)
        let sig = Webhooks.signature(secret: secret, id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1614265330, body: body)
        #expect(sig == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test func webhookIdsAreStablePerEventAndDifferPerType() throws {
        let r = UUID()
        #expect(Webhooks.eventId(type: .couponRedeemed, redemption: r) == Webhooks.eventId(type: .couponRedeemed, redemption: r))
        #expect(Webhooks.eventId(type: .couponRedeemed, redemption: r) != Webhooks.eventId(type: .redemptionFailed, redemption: r))
        // Hashed from the event's wire name, so an event queued before an upgrade and one queued
        // after it keep one `webhook-id`.
        let fixed = try #require(UUID(uuidString: "0190A8C4-5E2B-7C3D-8E4F-123456789ABC"))
        #expect(Webhooks.eventId(type: .couponRedeemed, redemption: fixed) == "msg_f02cbeed720414f98f1b0552c5245933")
        #expect(Webhooks.eventId(type: .redemptionFailed, redemption: fixed) == "msg_33e77ef423a5f198370d1362d530f8a1")
    }

    /// A redemption always has `productId` and `pricePaid` (null for a free
    /// period), its optional fields only once set; webhook data is that plus who and the coupon.
    @Test func redemptionsAndWebhookDataHaveTheShapeOfTheSpec() throws {
        let view = RedemptionView(redemptionId: UUID(), code: "SPRING-25", status: .granting, platform: .web, productId: nil, pricePaid: nil,
                                  sandbox: false, reservedAt: Date(timeIntervalSince1970: 1_764_483_573.125), completedAt: nil,
                                  failureReason: nil, entitlement: nil, accountId: UUID(), appUserId: "app-1")
        let object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder.wire().encode(view)) as? [String: Any])
        #expect(object["productId"] is NSNull)
        #expect(object["pricePaid"] is NSNull)
        #expect(object["completedAt"] == nil && object["failureReason"] == nil && object["entitlement"] == nil)
        #expect(object["reservedAt"] as? String == "2025-11-30T06:19:33.125Z")
        #expect(Set(object.keys) == ["redemptionId", "code", "status", "platform", "productId", "pricePaid", "sandbox", "reservedAt",
                                     "accountId", "appUserId"])
        // The bus reads it back as it was.
        #expect(try JSONDecoder.bus.decode(RedemptionView.self, from: JSONEncoder.bus.encode(view)) == view)

        let coupon = PublicCoupon(code: "SPRING-25", kind: .freePeriod, percentOff: nil, amountOff: nil,
                                  duration: CouponDuration(unit: "month", count: 1), periodCount: nil, entitlementId: "all")
        let data = try #require(try JSONSerialization.jsonObject(with: JSONEncoder.wire().encode(WebhookData(view, coupon: coupon))) as? [String: Any])
        #expect(Set(data.keys) == Set(object.keys).union(["coupon"]))
        #expect((data["coupon"] as? [String: Any])?["code"] as? String == "SPRING-25")
        #expect(data["appUserId"] as? String == "app-1")
    }
}

extension ReceivedCommand {
    /// A command made in a test rather than received: kept as its own JSON, as earlier versions
    /// stored every command.
    init(_ command: GrantCommand) throws {
        self.init(command, message: try JSONEncoder.bus.encode(command))
    }
}
