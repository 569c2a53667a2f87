import Foundation
import RedeemKit
import Testing

/// StoreKit stand-in: the transactions a test hands it, in order, as `Transaction.unfinished` then
/// `Transaction.updates` would; it counts each transaction's `finish()`.
final class FakeTransactions: StoreTransactionSource, @unchecked Sendable {
    // `finished` is touched only under `lock`.
    private let lock = NSLock()
    private var finished: [String: Int] = [:]
    private let stream: AsyncStream<StoreTransaction>
    private let continuation: AsyncStream<StoreTransaction>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: StoreTransaction.self)
    }

    func transactions() -> AsyncStream<StoreTransaction> { stream }

    /// Hands over a verified transaction (an offer code unless said otherwise).
    func deliver(
        _ id: String, product: String = "pro.monthly", offer: StoreTransaction.OfferType = .code, token: UUID? = nil
    ) {
        continuation.yield(
            StoreTransaction(
                id: id, productId: product, offerType: offer, appAccountToken: token,
                signedTransaction: "jws-\(id)", finish: { [weak self] in self?.finish(id) }))
    }

    private func finish(_ id: String) {
        lock.lock()
        finished[id, default: 0] += 1
        lock.unlock()
    }

    func finishes(_ id: String) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return finished[id] ?? 0
    }
}

/// The purchase listener (`start()`) over a stubbed gateway and a fake StoreKit: what it posts,
/// when it finishes, how it retries.
@Suite struct PurchaseListenerTests {
    static let reservation = UUID()
    static var purchasePath: String { "/v1/redemptions/\(reservation.uuidString.lowercased())/purchase" }

    /// A gateway whose account has one reserved iOS discount of `pro.monthly`; purchases are answered by `purchase`.
    static func gateway(token: UUID? = nil, purchase: @escaping @Sendable (Int) -> StubServer.Answer) -> StubServer {
        let posts = Counter()
        return StubServer { r in
            switch (r.method, r.path) {
            case ("GET", "/v1/me/redemptions"):
                return .json(
                    200,
                    Fixture.page([
                        Fixture.discount(UUID(), status: "completed"),
                        Fixture.discount(reservation, token: token, reservedAt: "2026-05-02T12:00:00.000Z"),
                        Fixture.discount(UUID(), plan: "pro.yearly")
                    ]))
            case ("POST", purchasePath): return purchase(posts.next())
            case ("GET", "/v1/me/entitlements"): return .json(200, Fixture.entitlements)
            default: return .json(404, Fixture.error("routeNotFound", "no such route"))
            }
        }
    }

    /// The first outcome the listener reports after `body`.
    static func firstOutcome(of client: RedeemClient, _ body: () async -> Void) async -> StorePurchaseOutcome? {
        var updates = client.purchaseUpdates.makeAsyncIterator()
        await body()
        return await updates.next()
    }

    @Test func anOfferCodePurchaseIsPostedToTheReservationOfItsPlanAndFinished() async throws {
        let server = Self.gateway { _ in .json(200, Fixture.discount(Self.reservation, status: "completed")) }
        let store = FakeTransactions()
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600), transactions: store)
        // Made while the app was away: already waiting when the listener starts.
        store.deliver("renewal", offer: .none)
        store.deliver("intro", offer: .introductory)
        store.deliver("t1")
        let outcome = await Self.firstOutcome(of: client) { await client.start() }
        guard case .posted(let id, let redemption) = outcome else {
            Issue.record("not posted: \(String(describing: outcome))")
            return
        }
        #expect(id == "t1" && redemption.status == .completed)
        let posts = server.requests("POST", Self.purchasePath)
        #expect(posts.count == 1)
        #expect(posts.first?.json["signedTransaction"] as? String == "jws-t1")
        #expect(store.finishes("t1") == 1)
        // Purchases without an offer code are not Redeem's: never posted, never finished.
        #expect(store.finishes("renewal") == 0 && store.finishes("intro") == 0)
        #expect(server.requests.filter { $0.path.hasSuffix("/purchase") }.count == 1)
        await client.stop()
    }

    @Test func aServerErrorOrALostConnectionIsRetriedUntilThePostIsAnswered() async throws {
        let server = Self.gateway { n in
            switch n {
            case 1: .json(503, Fixture.error("unavailable", "coupons is away"))
            case 2: .drop
            case 3: .json(500, Fixture.error("internal", "oops"))
            default: .json(200, Fixture.discount(Self.reservation, status: "completed"))
            }
        }
        let store = FakeTransactions()
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600), transactions: store)
        let outcome = await Self.firstOutcome(of: client) {
            await client.start()
            store.deliver("t2")
        }
        guard case .posted("t2", _) = outcome else {
            Issue.record("not posted: \(String(describing: outcome))")
            return
        }
        #expect(server.requests("POST", Self.purchasePath).count == 4)
        #expect(store.finishes("t2") == 1, "finished once, after the answer")
        await client.stop()
    }

    @Test func aRefusalIsNotPostedAgainAndLeavesTheTransactionUnfinished() async throws {
        let server = Self.gateway { _ in
            .json(422, Fixture.error("invalid", "not this coupon's offer", field: "offerIdentifier"))
        }
        let store = FakeTransactions()
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600), transactions: store)
        let outcome = await Self.firstOutcome(of: client) {
            await client.start()
            store.deliver("t3")
        }
        guard case .refused("t3", let error) = outcome else {
            Issue.record("not refused: \(String(describing: outcome))")
            return
        }
        #expect(error.code == .invalid && error.status == 422 && error.field == "offerIdentifier")
        #expect(server.requests("POST", Self.purchasePath).count == 1)
        #expect(store.finishes("t3") == 0)
        await client.stop()
    }

    @Test func aPurchaseNoReservationWaitsForIsLeftToTheApp() async throws {
        let other = UUID()
        let server = Self.gateway(token: UUID()) { _ in
            .json(200, Fixture.discount(Self.reservation, status: "completed"))
        }
        let store = FakeTransactions()
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600), transactions: store)
        var updates = client.purchaseUpdates.makeAsyncIterator()
        await client.start()
        store.deliver("lifetime", product: "pro.lifetime")
        store.deliver("someone-else", token: other)
        let outcomes = [await updates.next(), await updates.next()]
        #expect(
            Set(outcomes.compactMap { if case .unmatched(let id) = $0 { id } else { nil } }) == [
                "lifetime", "someone-else"
            ])
        #expect(server.requests("POST", Self.purchasePath).isEmpty)
        #expect(store.finishes("lifetime") == 0 && store.finishes("someone-else") == 0)
        await client.stop()
    }

    @Test func noOneSignedInPostsNothing() async throws {
        let server = Self.gateway { _ in .json(500, Fixture.error("internal", "must not be called")) }
        let store = FakeTransactions()
        let client = server.client(transactions: store)
        let outcome = await Self.firstOutcome(of: client) {
            await client.start()
            await client.start()  // a second start is the same listener
            store.deliver("t4")
        }
        #expect(outcome == .unmatched(transactionId: "t4"))
        #expect(server.requests.isEmpty)
    }

    @Test func theBackoffDoublesUpToItsCeilingAndOnlyPassingFailuresAreRetried() {
        let policy = PurchaseRetryPolicy(firstDelay: 1, maximumDelay: 20)
        #expect((1...7).map { policy.delay(afterFailures: $0) } == [1, 2, 4, 8, 16, 20, 20])
        func error(_ kind: RedeemError.Kind) -> RedeemError { RedeemError(kind: kind, code: .internal, message: "") }
        #expect(PurchaseRetryPolicy.isTransient(error(.transport)))
        #expect(PurchaseRetryPolicy.isTransient(error(.timedOut)))
        #expect(PurchaseRetryPolicy.isTransient(error(.server(status: 503))))
        #expect(PurchaseRetryPolicy.isTransient(error(.server(status: 429))))
        for status in [400, 401, 403, 404, 409, 422] {
            #expect(!PurchaseRetryPolicy.isTransient(error(.server(status: status))), "\(status)")
        }
        #expect(!PurchaseRetryPolicy.isTransient(error(.decoding)))
    }
}
