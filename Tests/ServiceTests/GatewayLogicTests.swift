import Foundation
import Testing
@testable import GatewayService
@testable import Core
@testable import Telemetry
@testable import Bus
@testable import HTTP
@testable import Runtime

@Suite struct GatewayLogicTests {
    /// Service errors reach HTTP through one exhaustive mapping. A code the gateway does not know
    /// (from a newer service) is a 500 without its text, never the quiet 422 the string table gave.
    @Test func serviceErrorsMapToTheirStatusAndAnUnknownCodeIs500() throws {
        let request = HTTPRequest(method: "GET", path: "/")
        let expected: [ErrorCode: Int] = [.notIdentified: 401, .forbidden: 403, .notFound: 404, .codeInUse: 409, .invalidState: 409,
                                          .invalid: 422, .storeLimit: 422, .rateLimited: 429, .unavailable: 503, .timeout: 504, .internal: 500]
        for (code, status) in expected {
            #expect(GatewayErrors.response(for: ServiceError(code, "why", field: "f"), request: request).status == status, "\(code)")
        }
        for code in ErrorCode.allCases { #expect((400...599).contains(GatewayErrors.status(of: code))) }
        let unknown = try JSONDecoder().decode(ServiceError.self, from: Data(#"{"code": "somethingNew", "message": "a secret detail"}"#.utf8))
        #expect(unknown.code == .internal)
        let answer = GatewayErrors.response(for: unknown, request: request)
        #expect(answer.status == 500)
        #expect(!String(decoding: answer.body, as: UTF8.self).contains("a secret detail"))
    }

    /// A batch gets what its oldest request has left of the bus timeout, not a whole one more.
    /// The contrast is wide (0.5 s left against a 60 s timeout, bound 20 s) so that a busy machine
    /// stalling the test for seconds cannot make it fail, and a broken deadline still does.
    @Test func aBatchWaitsOnlyWhatItsOldestRequestHasLeft() async throws {
        let logger = Logger(service: "test", sink: LogSink(capturing: ()))
        let bus = BusNode(BusOptions(security: .plain), logger: logger)
        var router = BusRouter(logger: logger)
        router.on(Coupons.ValidateMany.self) { _, _ in
            try await Task.sleep(for: .seconds(120))  // a coupons instance that hangs
            return .init(answers: [])
        }
        let server = try BusServer(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router, logger: logger)
        defer { server.stop() }
        let client = try BusClient(bus: bus, service: "coupons", connect: [server.endpoint])
        defer { client.stop() }
        let item = Coupons.Validate(accountId: UUID(), code: "HANG", platform: nil)
        let timeout = Duration.seconds(60)
        let began = ContinuousClock.now
        // Queued 59.5 s ago (behind batches that timed out), so 0.5 s of its 60 s are left.
        let results = await Gateway.send([Queued(item, since: began - timeout + .milliseconds(500)), Queued(item)],
                                         as: Coupons.ValidateMany.self, via: client, within: timeout)
        #expect(ContinuousClock.now - began < .seconds(20))
        func code(_ r: Result<Coupons.Validate.Response, any Error>?) -> ErrorCode? {
            guard case .failure(let e)? = r else { return nil }
            return (e as? ServiceError)?.code
        }
        #expect(results.count == 2 && results.allSatisfy { code($0) == .timeout })
        let expired = await Gateway.send([Queued(item, since: began - timeout - .seconds(1))], as: Coupons.ValidateMany.self,
                                         via: client, within: timeout)
        #expect(code(expired.first) == .timeout)
    }

    @Test func waitIsAtMost30HoweverLargeTheNumber() throws {
        func wait(_ v: String) throws -> Int { try Query.wait(HTTPRequest(method: "GET", path: "/", query: ["wait": v])) }
        #expect(try wait("5") == 5)
        #expect(try wait("31") == 30)
        #expect(try wait("99999999999999999999") == 30)
        for bad in ["-1", "abc", "1.5", "", "+5"] {
            #expect(throws: HTTPError.self, "\(bad)") { try wait(bad) }
        }
    }

    @Test func tokenBucketRefillsOverTimeAndSaysHowLongToWait() {
        var b = TokenBucket(capacity: 3, perSecond: 1, now: 0)
        #expect(b.take(now: 0) == nil)
        #expect(b.take(now: 0) == nil)
        #expect(b.take(now: 0) == nil)
        let wait = b.take(now: 0)
        #expect(wait != nil && abs(wait! - 1) < 0.001)
        #expect(b.take(now: 1.0) == nil, "one token back after a second")
        #expect(b.take(now: 1.0) != nil)
    }

    @Test func invalidCodesLockOutAfterTheThresholdWithinTheWindow() {
        var l = Lockout()
        for t in 0..<4 { l.fail(now: Double(t), threshold: 5, window: 60, lockSeconds: 100) }
        #expect(l.locked(now: 4) == nil)
        l.fail(now: 100, threshold: 5, window: 60, lockSeconds: 100)  // the first four fell out of the window
        #expect(l.locked(now: 100) == nil)
        for t in 101..<105 { l.fail(now: Double(t), threshold: 5, window: 60, lockSeconds: 100) }
        #expect(l.locked(now: 105) != nil)
        #expect(l.locked(now: 205) == nil, "the lock ends")
    }

    @Test func abuseGuardAnswers429WithRetryAfterAndCanBeOff() throws {
        var limits = AbuseGuard.Limits()
        limits.signUpPerMinute = 2
        let guardOn = AbuseGuard(limits: limits, clock: { 1000 })
        try guardOn.checkSignUp(ip: "1.2.3.4")
        try guardOn.checkSignUp(ip: "1.2.3.4")
        do {
            try guardOn.checkSignUp(ip: "1.2.3.4")
            Issue.record("third sign-up allowed")
        } catch let e as HTTPError {
            #expect(e.status == 429)
            #expect(e.code == "rateLimited")
            #expect(e.headers.contains { $0.0 == "Retry-After" && $0.1 == "30" })
        }
        try guardOn.checkSignUp(ip: "5.6.7.8")  // another address has its own budget
        limits.enabled = false
        let guardOff = AbuseGuard(limits: limits, clock: { 1000 })
        for _ in 0..<10 { try guardOff.checkSignUp(ip: "1.2.3.4") }
    }

    @Test func csvCellsAreQuotedAndFormulasNeutralised() {
        #expect(RedemptionCSV.cell("plain") == "plain")
        #expect(RedemptionCSV.cell("a,b") == "\"a,b\"")
        #expect(RedemptionCSV.cell("say \"hi\"") == "\"say \"\"hi\"\"\"")
        #expect(RedemptionCSV.cell("two\nlines") == "\"two\nlines\"")
        #expect(RedemptionCSV.cell("=SUM(A1)") == "'=SUM(A1)")
        #expect(RedemptionCSV.cell("-1") == "'-1")
        #expect(RedemptionCSV.cell("@x,y") == "\"'@x,y\"")
    }
}

@Suite struct VerifiedTokensTests {
    let now = Date()
    func digest(_ i: Int) -> VerifiedTokens.Digest { .init(a: UInt64(bitPattern: Int64(i)), b: 1, c: 2, d: 3) }
    func claims(_ i: Int, expiring: Date? = nil) -> VerifiedTokens.Claims {
        .init(account: UUID(), session: UUID(), appUserId: "user \(i)", expiresAt: expiring ?? now + 600, role: nil)
    }

    /// However many new tokens pass (a flash sale brings one per user), the cache holds at most its
    /// limit; every token it drops is dropped once; the newest are all there, and a token used
    /// again every 20 new ones stays through every turn of the generations.
    @Test func itStaysBoundedAndKeepsTheTokensInUse() {
        var cache = VerifiedTokens(limit: 100)
        _ = cache.insert(claims(-1), for: digest(-1))
        var dropped = 0
        for i in 0..<1_000 {
            dropped += cache.insert(claims(i), for: digest(i)).count
            #expect(cache.count <= 100)
            if i % 20 == 0 { #expect(cache.claims(of: digest(-1), now: now)?.appUserId == "user -1", "after \(i)") }
        }
        #expect(dropped > 800)
        #expect(dropped + cache.count == 1_001)
        for i in 950..<1_000 { #expect(cache.claims(of: digest(i), now: now)?.appUserId == "user \(i)") }
        #expect(cache.claims(of: digest(0), now: now) == nil)
        #expect(VerifiedTokens.Digest(token: "a.b.c") == VerifiedTokens.Digest(token: "a.b.c"))
        #expect(VerifiedTokens.Digest(token: "a.b.c") != VerifiedTokens.Digest(token: "a.b.d"))
    }

    /// An expired token is not answered, from either generation, and is forgotten once seen.
    @Test func anExpiredTokenIsForgotten() {
        var cache = VerifiedTokens(limit: 4)
        _ = cache.insert(claims(1, expiring: now - 1), for: digest(1))
        _ = cache.insert(claims(2, expiring: now - 1), for: digest(2))
        _ = cache.insert(claims(3), for: digest(3))  // turns: 1 and 2 are the older now
        #expect(cache.older.count == 2)
        #expect(cache.claims(of: digest(1), now: now) == nil)
        #expect(cache.claims(of: digest(1), now: now - 10) == nil)
        #expect(cache.claims(of: digest(3), now: now)?.appUserId == "user 3")
        _ = cache.insert(claims(4, expiring: now - 1), for: digest(4))
        #expect(cache.claims(of: digest(4), now: now) == nil)
        #expect(cache.claims(of: digest(4), now: now - 10) == nil)
        #expect(cache.count == 2)
    }
}
