import Foundation
import Testing
import TestSupport
@testable import Core
@testable import Cryptography
@testable import Runtime

/// The fake App Store Connect, the fake App Store Server and the notification sender, driven
/// with Redeem's own token builder and checked with its own verifier: they take what Apple
/// would take, refuse what Apple would refuse, and answer in Apple's shapes.
@Suite struct AppleFakesTests {
    static let bundleId = "com.example.redeem"
    static let subscription = "6450000001"

    func connect(limits: FakeAppStoreConnect.Limits = .init()) throws -> (FakeAppStoreConnect, HTTPClient, AppleAPIToken) {
        let key = try TestAppleAPIKey()
        let fake = try FakeAppStoreConnect(key: key, limits: limits)
        fake.addSubscription(Self.subscription, [
            .init(territory: "USA", currency: "USD", current: "9.99", points: ["0.99", "2.99", "4.99", "9.99"]),
            .init(territory: "GBR", currency: "GBP", current: "8.99", points: ["0.99", "4.49", "8.99"]),
        ])
        return (fake, HTTPClient(base: fake.url), key.issuer(.appStoreConnect))
    }

    func send(_ client: HTTPClient, _ method: String, _ path: String, _ body: [String: Any]? = nil, token: String) async throws -> HTTPClient.Response {
        try await client.send(method, path, body: try body.map { try JSONSerialization.data(withJSONObject: $0) },
                              headers: ["Authorization": "Bearer \(token)", "Content-Type": "application/json"])
    }

    static func errorCode(_ r: HTTPClient.Response) -> String? { ((try? r.json())?["errors"] as? [[String: Any]])?.first?["code"] as? String }

    func offerBody(name: String, mode: String = "PAY_AS_YOU_GO", prices: [(territory: String, point: String?)]) -> [String: Any] {
        let inline = prices.enumerated().map { i, p -> [String: Any] in
            var relationships: [String: Any] = ["territory": ["data": ["type": "territories", "id": p.territory]]]
            if let point = p.point { relationships["subscriptionPricePoint"] = ["data": ["type": "subscriptionPricePoints", "id": point]] }
            return ["type": "subscriptionOfferCodePrices", "id": "${price\(i)}", "relationships": relationships]
        }
        return ["data": ["type": "subscriptionOfferCodes",
                         "attributes": ["name": name, "customerEligibilities": ["NEW"], "offerEligibility": "STACK_WITH_INTRO_OFFERS",
                                        "offerMode": mode, "duration": "THREE_MONTHS", "numberOfPeriods": 3],
                         "relationships": ["subscription": ["data": ["type": "subscriptions", "id": Self.subscription]],
                                           "prices": ["data": inline.map { ["type": $0["type"]!, "id": $0["id"]!] }]]],
                "included": inline]
    }

    func codeBody(_ code: String, offer: String) -> [String: Any] {
        ["data": ["type": "subscriptionOfferCodeCustomCodes", "attributes": ["customCode": code, "numberOfCodes": 500, "expirationDate": "2099-12-31"],
                  "relationships": ["offerCode": ["data": ["type": "subscriptionOfferCodes", "id": offer]]]]]
    }

    func switchOffBody(_ type: String, _ id: String, active: Bool = false) -> [String: Any] {
        ["data": ["type": type, "id": id, "attributes": ["active": active]]]
    }

    func point(_ fake: FakeAppStoreConnect, _ territory: String, _ price: String) -> String {
        fake.pricePoints(of: Self.subscription).first { $0.territory == territory && $0.customerPrice == price }!.id
    }

    @Test func appStoreConnectTakesRedeem_sTokenAndRefusesWrongOnes() async throws {
        let (fake, client, issuer) = try connect()
        defer { Task { await fake.stop() } }
        let path = "/v1/subscriptions/\(Self.subscription)/prices"
        #expect(try await send(client, "GET", path, token: issuer.issue(now: Date()).token).status == 200)
        let stranger = AppleAPIToken(api: .appStoreConnect, keyId: fake.key.keyId, issuerId: fake.key.issuerId, key: ES256Key.generate())
        let otherIssuer = AppleAPIToken(api: .appStoreConnect, keyId: fake.key.keyId, issuerId: "someone-else", key: fake.key.key)
        let otherKid = AppleAPIToken(api: .appStoreConnect, keyId: "OTHERKEY", issuerId: fake.key.issuerId, key: fake.key.key)
        let refused = [
            try stranger.issue(now: Date()).token,
            try otherIssuer.issue(now: Date()).token,
            try otherKid.issue(now: Date()).token,
            try issuer.issue(now: Date() - 3600).token,  // expired
            try issuer.issue(now: Date() + 3600).token,  // expires more than 20 minutes from now
            Self.handMade(key: fake.key, claims: ["iss": fake.key.issuerId, "iat": Self.now - 120, "exp": Self.now + 19 * 60, "aud": "appstoreconnect-v1"],
                          header: ["alg": "ES256", "kid": fake.key.keyId, "typ": "JWT"]),  // lived 20 minutes and a minute
            Self.handMade(key: fake.key, claims: ["iss": fake.key.issuerId, "iat": Self.now, "exp": Self.now + 600, "aud": "someone-else"],
                          header: ["alg": "ES256", "kid": fake.key.keyId, "typ": "JWT"]),
            "",
        ]
        for token in refused {
            let r = try await send(client, "GET", path, token: token)
            #expect(r.status == 401 && Self.errorCode(r) == "NOT_AUTHORIZED", "token \(token.prefix(40))")
        }
        let missing = try await client.send("GET", path)
        #expect(missing.status == 401)
        #expect(fake.received.map(\.status) == [200] + Array(repeating: 401, count: refused.count + 1))
    }

    static var now: Int { Int(Date().timeIntervalSince1970) }

    static func handMade(key: TestAppleAPIKey, claims: [String: Any], header: [String: Any]) -> String {
        CompactJWS.sign(header: try! JSONSerialization.data(withJSONObject: header), payload: try! JSONSerialization.data(withJSONObject: claims), key: key.key)!
    }

    @Test func pricesAndPricePointsComeInJSONAPIPages() async throws {
        let (fake, client, issuer) = try connect()
        defer { Task { await fake.stop() } }
        let token = try issuer.issue(now: Date()).token
        let prices = try await send(client, "GET", "/v1/subscriptions/\(Self.subscription)/prices?include=subscriptionPricePoint,territory&filter%5Bterritory%5D=USA",
                                    token: token).json()
        let data = try #require(prices["data"] as? [[String: Any]])
        #expect(data.count == 1 && data[0]["type"] as? String == "subscriptionPrices")
        let relationships = try #require(data[0]["relationships"] as? [String: [String: Any]])
        let pointId = try #require((relationships["subscriptionPricePoint"]?["data"] as? [String: Any])?["id"] as? String)
        #expect(pointId == point(fake, "USA", "9.99"))
        let included = try #require(prices["included"] as? [[String: Any]])
        let pricePoint = try #require(included.first { $0["type"] as? String == "subscriptionPricePoints" })
        #expect((pricePoint["attributes"] as? [String: Any])?["customerPrice"] as? String == "9.99")
        let territory = try #require(included.first { $0["type"] as? String == "territories" })
        #expect(territory["id"] as? String == "USA" && (territory["attributes"] as? [String: Any])?["currency"] as? String == "USD")

        // Without include, a relationship is a link only.
        let bare = try await send(client, "GET", "/v1/subscriptions/\(Self.subscription)/prices", token: token).json()
        let bareData = try #require(bare["data"] as? [[String: Any]])
        #expect(bareData.count == 2 && bare["included"] == nil)
        #expect(((bareData[0]["relationships"] as? [String: [String: Any]])?["territory"]?["data"]) == nil)

        var seen: [String] = []
        var next: String? = "/v1/subscriptions/\(Self.subscription)/pricePoints?filter%5Bterritory%5D=USA&include=territory&limit=3"
        var pages = 0
        while let url = next {
            let page = try await send(client, "GET", url, token: token).json()
            seen += (page["data"] as? [[String: Any]] ?? []).compactMap { ($0["attributes"] as? [String: Any])?["customerPrice"] as? String }
            #expect(((page["meta"] as? [String: Any])?["paging"] as? [String: Any])?["total"] as? Int == 4)
            next = (page["links"] as? [String: Any])?["next"] as? String
            pages += 1
        }
        #expect(seen == ["0.99", "2.99", "4.99", "9.99"] && pages == 2)
        let unknown = try await send(client, "GET", "/v1/subscriptions/999/prices", token: token)
        #expect(unknown.status == 404 && Self.errorCode(unknown) == "NOT_FOUND")
    }

    @Test func offersAndCustomCodesAreMadeCheckedAndSwitchedOff() async throws {
        let (fake, client, issuer) = try connect()
        defer { Task { await fake.stop() } }
        let token = try issuer.issue(now: Date()).token
        let created = try await send(client, "POST", "/v1/subscriptionOfferCodes",
                                     offerBody(name: "SPRING-25 pro.monthly", prices: [("USA", point(fake, "USA", "4.99")), ("GBR", point(fake, "GBR", "4.49"))]), token: token)
        #expect(created.status == 201)
        let offer = try #require(created.json()["data"] as? [String: Any])
        let offerId = try #require(offer["id"] as? String)
        #expect((offer["attributes"] as? [String: Any])?["active"] as? Bool == true)
        #expect(fake.offers.first?.prices == ["USA": point(fake, "USA", "4.99"), "GBR": point(fake, "GBR", "4.49")])

        let code = try await send(client, "POST", "/v1/subscriptionOfferCodeCustomCodes", codeBody("SPRING25", offer: offerId), token: token)
        #expect(code.status == 201)
        let codeId = try #require((code.json()["data"] as? [String: Any])?["id"] as? String)
        let again = try await send(client, "POST", "/v1/subscriptionOfferCodeCustomCodes", codeBody("spring25", offer: offerId), token: token)
        #expect(again.status == 409 && Self.errorCode(again) == "ENTITY_ERROR.ATTRIBUTE.INVALID")

        // A free trial has no price point; any other offer needs one of the territory's own.
        let trialWithPoint = offerBody(name: "TRIAL", mode: "FREE_TRIAL", prices: [("USA", point(fake, "USA", "0.99"))])
        #expect(try await send(client, "POST", "/v1/subscriptionOfferCodes", trialWithPoint, token: token).status == 409)
        #expect(try await send(client, "POST", "/v1/subscriptionOfferCodes", offerBody(name: "TRIAL", mode: "FREE_TRIAL", prices: [("USA", nil)]), token: token).status == 201)
        let crossed = offerBody(name: "CROSSED", prices: [("GBR", point(fake, "USA", "4.99"))])
        #expect(try await send(client, "POST", "/v1/subscriptionOfferCodes", crossed, token: token).status == 409)
        var noName = offerBody(name: "", prices: [("USA", point(fake, "USA", "4.99"))])
        #expect(try await send(client, "POST", "/v1/subscriptionOfferCodes", noName, token: token).status == 409)
        noName["data"] = ["type": "subscriptionOfferCodeCustomCodes"]
        #expect(try await send(client, "POST", "/v1/subscriptionOfferCodes", noName, token: token).status == 409)

        let codeOff = try await send(client, "PATCH", "/v1/subscriptionOfferCodeCustomCodes/\(codeId)",
                                     switchOffBody("subscriptionOfferCodeCustomCodes", codeId), token: token)
        let codeOffData = try codeOff.json()["data"] as? [String: Any]
        #expect(codeOff.status == 200 && (codeOffData?["attributes"] as? [String: Any])?["active"] as? Bool == false)
        let offerOff = try await send(client, "PATCH", "/v1/subscriptionOfferCodes/\(offerId)", switchOffBody("subscriptionOfferCodes", offerId), token: token)
        #expect(offerOff.status == 200)
        #expect(try await send(client, "PATCH", "/v1/subscriptionOfferCodes/\(offerId)", switchOffBody("subscriptionOfferCodes", offerId), token: token).status == 200)
        #expect(try await send(client, "PATCH", "/v1/subscriptionOfferCodes/\(offerId)",
                               switchOffBody("subscriptionOfferCodes", offerId, active: true), token: token).status == 409)
        #expect(try await send(client, "PATCH", "/v1/subscriptionOfferCodes/\(offerId)", switchOffBody("subscriptionOfferCodes", "1"), token: token).status == 409)
        #expect(try await send(client, "PATCH", "/v1/subscriptionOfferCodes/1", switchOffBody("subscriptionOfferCodes", "1"), token: token).status == 404)
        #expect(fake.offers.first { $0.id == offerId }?.active == false && fake.customCodes.map(\.active) == [false])
        // A code for an offer that is off is refused; what there is can be read back.
        #expect(try await send(client, "POST", "/v1/subscriptionOfferCodeCustomCodes", codeBody("SUMMER", offer: offerId), token: token).status == 409)
        let listed = try await send(client, "GET", "/v1/subscriptions/\(Self.subscription)/offerCodes", token: token).json()
        #expect((listed["data"] as? [[String: Any]])?.compactMap { ($0["attributes"] as? [String: Any])?["name"] as? String } == ["SPRING-25 pro.monthly", "TRIAL"])
        let codes = try await send(client, "GET", "/v1/subscriptionOfferCodes/\(offerId)/customCodes", token: token).json()
        #expect((codes["data"] as? [[String: Any]])?.count == 1)

        let posts = fake.received.filter { $0.method == "POST" && $0.path == "/v1/subscriptionOfferCodes" }
        #expect(posts.map(\.status) == [201, 409, 201, 409, 409, 409])
    }

    @Test func atMostTenActiveOffersPerSubscription() async throws {
        let (fake, client, issuer) = try connect()
        defer { Task { await fake.stop() } }
        let token = try issuer.issue(now: Date()).token
        var ids: [String] = []
        for i in 1...10 {
            let r = try await send(client, "POST", "/v1/subscriptionOfferCodes", offerBody(name: "OFFER-\(i)", prices: [("USA", point(fake, "USA", "4.99"))]), token: token)
            #expect(r.status == 201)
            ids.append(try #require((r.json()["data"] as? [String: Any])?["id"] as? String))
        }
        let eleventh = offerBody(name: "OFFER-11", prices: [("USA", point(fake, "USA", "4.99"))])
        let full = try await send(client, "POST", "/v1/subscriptionOfferCodes", eleventh, token: token)
        #expect(full.status == 409 && Self.errorCode(full) == "ENTITY_ERROR.ATTRIBUTE.INVALID")
        #expect(try await send(client, "PATCH", "/v1/subscriptionOfferCodes/\(ids[0])", switchOffBody("subscriptionOfferCodes", ids[0]), token: token).status == 200)
        #expect(try await send(client, "POST", "/v1/subscriptionOfferCodes", eleventh, token: token).status == 201)
        #expect(fake.offers.count == 11 && fake.offers.filter(\.active).count == 10)
    }

    @Test func theNextCallsCanBeThrottledWithRetryAfter() async throws {
        let (fake, client, issuer) = try connect()
        defer { Task { await fake.stop() } }
        let token = try issuer.issue(now: Date()).token
        fake.throttleNext(2, retryAfter: 7)
        let body = offerBody(name: "SPRING", prices: [("USA", point(fake, "USA", "4.99"))])
        for _ in 0..<2 {
            let r = try await send(client, "POST", "/v1/subscriptionOfferCodes", body, token: token)
            #expect(r.status == 429 && r.header("Retry-After") == "7" && Self.errorCode(r) == "RATE_LIMIT_EXCEEDED")
        }
        #expect(fake.offers.isEmpty)
        #expect(try await send(client, "POST", "/v1/subscriptionOfferCodes", body, token: token).status == 201)
        fake.failNext(1, status: 503)
        #expect(try await send(client, "GET", "/v1/subscriptions/\(Self.subscription)/prices", token: token).status == 503)
        #expect(fake.offers.count == 1 && fake.received.map(\.status) == [429, 429, 201, 503])
    }

    @Test func appStoreServerServesSignedTransactionsThatVerify() async throws {
        let ca = try TestAppleCA()
        let key = try TestAppleAPIKey()
        let fake = try FakeAppStoreServer(key: key, bundleId: Self.bundleId, ca: ca)
        defer { Task { await fake.stop() } }
        var transaction = AppleSignedDataTests.transaction(signedDate: nil)
        transaction.bundleId = Self.bundleId
        fake.register(transaction)
        let client = HTTPClient(base: fake.url)
        let token = try key.issuer(.appStoreServer(bundleId: Self.bundleId)).issue(now: Date()).token
        let found = try await client.get("/inApps/v1/transactions/\(transaction.transactionId)", token: token)
        #expect(found.status == 200)
        let signed = try #require(found.json()["signedTransactionInfo"] as? String)
        let verifier = try AppleSignedData(rootCertificatesFile: ca.rootCertificatesFile.path, bundleId: Self.bundleId, appAppleId: 1, environments: [.production])
        var decoded = try verifier.verifyTransaction(signed)
        #expect(try #require(decoded.signedDate).timeIntervalSinceNow > -60)
        decoded.signedDate = nil
        #expect(decoded == transaction)

        let missing = try await client.get("/inApps/v1/transactions/2000000000000001", token: token)
        let missingBody = try missing.json()
        #expect(missing.status == 404 && missingBody["errorCode"] as? Int == 4_040_010)
        #expect(try await client.get("/inApps/v1/transactions/not-a-number", token: token).status == 400)
        // An App Store Connect token, another app's, or an expired one: 401.
        for wrong in [try key.issuer(.appStoreConnect).issue(now: Date()).token,
                      try key.issuer(.appStoreServer(bundleId: "com.example.other")).issue(now: Date()).token,
                      try key.issuer(.appStoreServer(bundleId: Self.bundleId)).issue(now: Date() - 7200).token] {
            let r = try await client.get("/inApps/v1/transactions/\(transaction.transactionId)", token: wrong)
            #expect(r.status == 401 && r.body.isEmpty)
        }
        fake.throttleNext(1, retryAfter: 2)
        let throttled = try await client.get("/inApps/v1/transactions/\(transaction.transactionId)", token: token)
        let throttledBody = try throttled.json()
        #expect(throttled.status == 429 && throttled.header("Retry-After") == "2" && throttledBody["errorCode"] as? Int == 4_290_000)
        #expect(fake.received.map(\.status) == [200, 404, 400, 401, 401, 401, 429])
    }

    @Test func theNotificationSenderPostsASignedPayloadThatVerifies() async throws {
        let ca = try TestAppleCA()
        let receiver = try WebhookReceiver()
        defer { Task { await receiver.stop() } }
        let sender = AppleNotificationSender(ca: ca, bundleId: Self.bundleId, appAppleId: 42, environment: .sandbox)
        var transaction = AppleSignedDataTests.transaction(signedDate: nil)
        transaction.environment = .sandbox
        let notification = sender.notification(.offerRedeemed, subtype: .initialBuy, transaction: transaction)
        let response = try await sender.send(sender.signedPayload(notification), to: receiver.url)
        #expect(response.status == 200)
        let delivery = try #require(receiver.received.first)
        #expect(delivery.method == "POST")
        let body = try #require(try JSONSerialization.jsonObject(with: delivery.body) as? [String: Any])
        #expect(Array(body.keys) == ["signedPayload"])
        let verifier = try AppleSignedData(rootCertificatesFile: ca.rootCertificatesFile.path, bundleId: Self.bundleId, appAppleId: 42, environments: [.sandbox])
        let received = try verifier.verifyNotification(try #require(body["signedPayload"] as? String))
        #expect(received.notificationType == .offerRedeemed && received.notificationUUID == notification.notificationUUID)
        let inner = try verifier.verifyTransaction(try #require(received.data?.signedTransactionInfo))
        #expect(inner.appAccountToken == transaction.appAccountToken && inner.offerType == .offerCode && inner.environment == .sandbox)
    }
}
