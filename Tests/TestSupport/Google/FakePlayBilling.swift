import Foundation
import HTTP
import Synchronization

/// The Play Store app's side of a purchase, for a client under test that can't run Play Billing:
/// its fake `PlayBillingLauncher` posts the `PlayOfferLaunch` here (`POST /launch`, loopback), and
/// this answers what Play Billing would. An offer that is not `ACTIVE` at the fake Play Developer
/// API is `ITEM_UNAVAILABLE`; a product the obfuscated account already bought is
/// `ITEM_ALREADY_OWNED`; otherwise the purchase is recorded at the fake Play Developer API, as Play
/// records it, and its token answered with `OK`.
public final class FakePlayBilling: Sendable {
    /// One launch, as the client handed it over, and what it was answered.
    public struct Launch: Sendable {
        public let productId: String
        public let basePlanId: String
        public let offerId: String
        public let offerTags: [String]
        public let obfuscatedAccountId: String
        public let responseCode: String
    }

    public let play: FakePlayDeveloperAPI
    private let launched = Mutex<[Launch]>([])
    private let server: HTTPServer
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }
    public var launches: [Launch] { launched.withLock { $0 } }

    public init(play: FakePlayDeveloperAPI) throws {
        self.play = play
        let box = Box()
        server = .fake("fake-play-billing") { req in
            guard req.method == "POST", req.path == "/launch" else {
                return FakeGoogleOAuth.json(404, ["error": "not found"])
            }
            return box.fake!.launch(req)
        }
        box.fake = self
        try server.start()
    }

    private final class Box: @unchecked Sendable {
        // Set once, before the server starts taking requests.
        weak var fake: FakePlayBilling?
    }

    public func stop() async { await server.stop(drainSeconds: 0.2) }

    func launch(_ req: HTTPRequest) -> HTTPResponse {
        let body = (try? JSONSerialization.jsonObject(with: req.body)) as? [String: Any] ?? [:]
        guard let product = body["productId"] as? String,
            let basePlan = body["basePlanId"] as? String,
            let offerId = body["offerId"] as? String,
            let account = body["obfuscatedAccountId"] as? String
        else {
            let needed = "productId, basePlanId, offerId and obfuscatedAccountId are required"
            return FakeGoogleOAuth.json(400, ["error": needed])
        }
        let tags = body["offerTags"] as? [String] ?? []
        let active = play.offers.contains {
            $0.productId == product && $0.basePlanId == basePlan && $0.offerId == offerId && $0.state == "ACTIVE"
        }
        let token = "gp-token-" + UUID().uuidString.lowercased()
        let code: String = play.state.withLock { s in
            guard active else { return "ITEM_UNAVAILABLE" }
            if s.purchases.values.contains(where: { $0.productId == product && $0.obfuscatedAccountId == account }) {
                return "ITEM_ALREADY_OWNED"
            }
            s.purchases[token] = .init(
                productId: product, basePlanId: basePlan, offerId: offerId, offerTags: tags,
                obfuscatedAccountId: account)
            return "OK"
        }
        launched.withLock {
            $0.append(Launch(productId: product, basePlanId: basePlan, offerId: offerId, offerTags: tags,
                             obfuscatedAccountId: account, responseCode: code))
        }
        var answer: [String: Any] = ["responseCode": code]
        if code == "OK" { answer["purchaseToken"] = token }
        return FakeGoogleOAuth.json(200, answer)
    }
}
