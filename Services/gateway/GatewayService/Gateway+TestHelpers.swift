import Core
import Foundation
import HTTP

/// Test helpers, as Stripe's `test_helpers` (docs/stores.md, "Test mode"): what the App Store or
/// Google Play would do for a test coupon, whose store offers are simulated and never reach them.
/// Test keys only; a live key is 403, since live mode is moved on by the real stores alone.
extension Gateway {
    /// A simulated store sale.
    struct SimulatedPurchaseBody: APIBody {
        static let schemaName: String? = "SimulatedPurchaseInput"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "pricePaid": [.note("what the customer paid in the store, as the store would report it")],
            "sandbox": [
                .note(
                    "as if bought in the store's sandbox environment (default false); a test redemption is sandbox either way"
                )
            ]
        ]
        var pricePaid: Money
        var sandbox: Bool?
    }

    static let testHelperRoutes: [APIRoute] = [
        .route(
            .post, "/v1/test_helpers/redemptions/{id}/purchase",
            "Test mode: complete a reservation on iOS or Android as if the store had sold its coupon's simulated offer",
            access: .appKey(.support), answers: [200: .json(RedemptionView.self)], errors: [403, 404, 409, 422],
            handle: Gateway.simulatePurchase),
        .route(
            .post, "/v1/test_helpers/store_offers/{id}/ready",
            "Test mode: a simulated store offer (by its offerId) skips the rest of its settle time and is ready",
            access: .appKey(.admin), answers: [200: .json(StoreOfferView.self)], errors: [403, 404, 409],
            handle: Gateway.simulateOfferReady)
    ]

    /// 403 unless the key is a test key.
    static func requireTestKey(_ key: Authenticator.Key) throws {
        guard key.mode == .test else {
            throw ServiceError(
                .forbidden, "test helpers take a test key (sk_test_); live mode is moved on by the real stores only")
        }
    }

    func simulatePurchase(
        _ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<SimulatedPurchaseBody>
    ) async throws -> HTTPResponse {
        try Self.requireTestKey(key)
        let id = try req.id(or: "no such redemption")
        let b = try body.read()
        return .json(
            200,
            try await coupons.request(
                Coupons.SimulatedPurchase(
                    redemptionId: id, mode: key.mode, app: key.app, pricePaid: b.pricePaid,
                    sandbox: b.sandbox
                ).by(key.actor)))
    }

    func simulateOfferReady(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        try Self.requireTestKey(key)
        let offerId = req.pathParameters["id"] ?? ""
        guard (1...100).contains(offerId.utf8.count) else {
            throw ServiceError(.notFound, "no simulated store offer with this id")
        }
        return .json(
            200, try await coupons.request(Coupons.SimulatedOfferReady(offerId: offerId, mode: key.mode,
                app: key.app).by(key.actor)))
    }
}
