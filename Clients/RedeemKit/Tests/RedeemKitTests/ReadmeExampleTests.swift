import Foundation
import RedeemKit
import Testing

/// The client's example (sign in, validate, redeem, wait for Pro) compiles and does what it says,
/// over a stubbed gateway. docs/redeemkit.md, "Coupons", shows the body of `example` line for line
/// (`DocsTests` checks it).
@Suite struct ReadmeExampleTests {
    final class Screen: @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []
        func show(_ text: String) { lock.lock(); lines.append(text); lock.unlock() }
        var shown: [String] { lock.lock(); defer { lock.unlock() }; return lines }
    }

    static func example(_ redeem: RedeemClient, show: (String) -> Void, unlock: ([Entitlement]) -> Void) async throws {
        try await redeem.signIn(email: "pilot@example.com", password: "correct horse battery staple")

        let check = try await redeem.validateCoupon("SPRING-25")      // valid, reason, coupon, eligibleProductIds
        guard check.valid else { return show(check.error!.localizedDescription) }   // a refusal is a value
        switch try await redeem.redeemCoupon("SPRING-25", productId: check.eligibleProductIds.first) {
        case .refused(let refusal):
            show(refusal.localizedDescription)                        // a guest gets .notIdentified, no request made
        case .redeemed(let redemption, _):
            switch try await redeem.awaitCouponCompletion(redemptionId: redemption.id, timeout: 60) {
            case .completed(let entitlements, _): unlock(entitlements)  // Pro on every platform
            case .timedOut: show("Still working on it.")               // kept in pendingRedemptions() across relaunches
            case .failed(let r), .released(let r): show(r.failureReason ?? "This coupon could not be applied.")
            }
        }
    }

    @Test func theSeedFlowUnlocksPro() async throws {
        let id = UUID()
        let server = StubServer { r in
            switch (r.method, r.path) {
            case ("POST", "/v1/sessions"): .json(200, Fixture.auth(access: "access-1", refresh: "refresh-1"))
            case ("POST", "/v1/coupons/validate"):
                .json(200, #"{"valid":true,"coupon":{"code":"SPRING-25","kind":"freePeriod","duration":{"unit":"month","count":1}},"eligibleProductIds":[]}"#)
            case ("POST", "/v1/redemptions"): .json(201, Fixture.redemption(id, status: "granting"))
            case ("GET", "/v1/me/entitlements"): .json(200, Fixture.entitlements)
            default: .json(200, Fixture.redemption(id, status: "completed", entitlement: true))
            }
        }
        let screen = Screen()
        let unlocked = Screen()
        try await Self.example(server.client(), show: screen.show, unlock: { unlocked.show($0.map(\.entitlementId).joined()) })
        #expect(screen.shown.isEmpty)
        #expect(unlocked.shown == ["pro"])
    }

    @Test func anExpiredCodeShowsItsSentence() async throws {
        let server = StubServer { r in
            r.path == "/v1/sessions" ? .json(200, Fixture.auth(access: "a", refresh: "r"))
                : .json(200, #"{"valid":false,"reason":"expired","eligibleProductIds":[]}"#)
        }
        let screen = Screen()
        try await Self.example(server.client(), show: screen.show, unlock: { _ in Issue.record("unlocked") })
        #expect(screen.shown == ["This coupon has expired."])
    }
}
