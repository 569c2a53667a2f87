import Foundation
import Testing
import TestSupport
@testable import Core
@testable import Cryptography
@testable import GrantsService
@testable import Runtime

/// Grants' App Store Server API client against two fake App Store Servers (production and
/// sandbox) that check Redeem's In-App Purchase tokens, and the settings of both Apple APIs.
@Suite struct AppStoreServerTests {
    static let bundleId = "com.example.redeem"

    struct World {
        let production: FakeAppStoreServer
        let sandbox: FakeAppStoreServer
        let client: AppStoreServerClient
        let pauses: AppStoreConnectTests.Pauses
        let ca: TestAppleCA

        func stop() async {
            await production.stop()
            await sandbox.stop()
        }
    }

    func world() throws -> World {
        let ca = try TestAppleCA()
        let key = try TestAppleAPIKey()
        let production = try FakeAppStoreServer(key: key, bundleId: Self.bundleId, ca: ca)
        let sandbox = try FakeAppStoreServer(key: key, bundleId: Self.bundleId, ca: ca)
        let pauses = AppStoreConnectTests.Pauses()
        let client = AppStoreServerClient(production: production.url, sandbox: sandbox.url, token: key.issuer(.appStoreServer(bundleId: Self.bundleId)),
                                          timeout: Project.callTimeout, retry: AppleRetry(policy: RetryPolicy(initial: 1, max: 300), sleep: pauses.sleep, random: { 0.5 }))
        return World(production: production, sandbox: sandbox, client: client, pauses: pauses, ca: ca)
    }

    static func transaction(_ id: String, _ environment: AppStoreEnvironment) -> JWSTransactionDecodedPayload {
        var t = JWSTransactionDecodedPayload(transactionId: id, originalTransactionId: id, bundleId: bundleId, productId: "pro.monthly",
                                             purchaseDate: Date(timeIntervalSince1970: 1_760_000_000), environment: environment)
        t.offerType = .offerCode
        t.offerIdentifier = "redeem-0123456789abcdef01234567"
        return t
    }

    func verify(_ signed: String, _ w: World, _ environment: AppStoreEnvironment) throws -> JWSTransactionDecodedPayload {
        try AppleSignedData(rootCertificatesFile: w.ca.rootCertificatesFile.path, bundleId: Self.bundleId, appAppleId: 1, environments: [environment])
            .verifyTransaction(signed)
    }

    @Test func productionIsAskedFirstThenTheSandboxOnNotFound() async throws {
        let w = try world()
        defer { Task { await w.stop() } }
        w.production.register(Self.transaction("2000000000000001", .production))
        w.sandbox.register(Self.transaction("2000000000000002", .sandbox))

        let live = try await w.client.signedTransaction("2000000000000001", deadline: nil)
        #expect(try verify(live, w, .production).transactionId == "2000000000000001")
        #expect(w.production.received.map(\.status) == [200] && w.sandbox.received.isEmpty, "the token was taken; no sandbox call")

        let test = try await w.client.signedTransaction("2000000000000002", deadline: nil)
        #expect(try verify(test, w, .sandbox).environment == .sandbox)
        #expect(w.production.received.map(\.status) == [200, 404] && w.sandbox.received.map(\.status) == [200])

        await #expect(throws: ServiceError(.notFound, "Transaction id not found.")) {
            try await w.client.signedTransaction("2000000000000003", deadline: nil)
        }
        await #expect(throws: ServiceError(.invalid, "transactionId must be Apple's transaction id, digits only", field: "transactionId")) {
            try await w.client.signedTransaction("12; DROP", deadline: nil)
        }
        #expect(w.production.received.count == 3 && w.sandbox.received.count == 2, "an id that is not Apple's is not sent")
    }

    @Test func a429IsWaitedOutWithinTheDeadline() async throws {
        let w = try world()
        defer { Task { await w.stop() } }
        w.production.register(Self.transaction("2000000000000001", .production))
        w.production.throttleNext(1, retryAfter: 2)
        // The pauses are recorded, not slept; the deadlines are far out, since the whole suite shares
        // two cores, and only the second wait is past its request's deadline.
        _ = try await w.client.signedTransaction("2000000000000001", deadline: Date() + 60)
        #expect(w.pauses.all == [.seconds(2)] && w.production.received.map(\.status) == [429, 200])

        // A wait that would end after the request's deadline is not taken: Apple is unavailable.
        w.production.throttleNext(1, retryAfter: 120)
        await #expect(throws: ServiceError.self) { try await w.client.signedTransaction("2000000000000001", deadline: Date() + 60) }
        #expect(w.pauses.all == [.seconds(2)] && w.production.received.map(\.status) == [429, 200, 429])
        _ = try await w.client.signedTransaction("2000000000000001", deadline: Date() + 60)
        #expect(w.production.received.map(\.status) == [429, 200, 429, 200])
    }

    // MARK: Settings

    func config(_ values: [String: String]) throws -> GrantsConfig { try GrantsConfig(env: Environment(values)) }

    func problem(_ values: [String: String]) -> ConfigError? {
        do {
            _ = try config(values)
            return nil
        } catch {
            return error as? ConfigError
        }
    }

    @Test func theAppleSettingsAreAllOrNone() throws {
        let key = try TestAppleAPIKey()
        let none = try config([:])
        #expect(none.appStoreConnect == nil && none.appStoreServer == nil)
        // Coupons and the gateway read the app id and bundle id too: alone they connect nothing.
        let shared = try config(["REDEEM_APPLE_APP_ID": "1234567890", "REDEEM_APPLE_BUNDLE_ID": Self.bundleId])
        #expect(shared.appStoreConnect == nil && shared.appStoreServer == nil)

        let asc = ["REDEEM_ASC_KEY_ID": key.keyId, "REDEEM_ASC_ISSUER_ID": key.issuerId, "REDEEM_ASC_PRIVATE_KEY": key.privateKeyFile.path,
                   "REDEEM_APPLE_APP_ID": "1234567890"]
        let connected = try #require(try config(asc).appStoreConnect)
        #expect(connected.keyId == key.keyId && connected.issuerId == key.issuerId && connected.appId == "1234567890")
        #expect(connected.url.absoluteString == "https://api.appstoreconnect.apple.com")
        #expect(connected.privateKey.publicKeyDER == key.key.publicKeyDER)
        #expect(try config(asc.merging(["REDEEM_ASC_URL": "http://127.0.0.1:9"]) { $1 }).appStoreConnect?.url.port == 9)

        for missing in ["REDEEM_ASC_ISSUER_ID", "REDEEM_ASC_PRIVATE_KEY", "REDEEM_APPLE_APP_ID"] {
            #expect(problem(asc.filter { $0.key != missing })?.variable == missing)
        }
        #expect(problem(asc.filter { $0.key != "REDEEM_ASC_KEY_ID" })?.variable == "REDEEM_ASC_KEY_ID", "an issuer without its key")
        #expect(problem(asc.merging(["REDEEM_ASC_PRIVATE_KEY": "/nonexistent/AuthKey.p8"]) { $1 })?.variable == "REDEEM_ASC_PRIVATE_KEY")
        #expect(problem(asc.merging(["REDEEM_APPLE_APP_ID": "com.example"]) { $1 })?.variable == "REDEEM_APPLE_APP_ID")

        let server = ["REDEEM_APPSTORE_KEY_ID": key.keyId, "REDEEM_APPSTORE_ISSUER_ID": key.issuerId,
                      "REDEEM_APPSTORE_PRIVATE_KEY": key.privateKeyFile.path, "REDEEM_APPLE_BUNDLE_ID": Self.bundleId]
        let verifying = try #require(try config(server).appStoreServer)
        #expect(verifying.bundleId == Self.bundleId && verifying.url.absoluteString == "https://api.storekit.apple.com")
        #expect(verifying.sandboxURL.absoluteString == "https://api.storekit-sandbox.apple.com")
        #expect(try config(server).appStoreConnect == nil)
        for missing in ["REDEEM_APPSTORE_ISSUER_ID", "REDEEM_APPSTORE_PRIVATE_KEY", "REDEEM_APPLE_BUNDLE_ID"] {
            #expect(problem(server.filter { $0.key != missing })?.variable == missing)
        }
        #expect(problem(["REDEEM_APPSTORE_PRIVATE_KEY": key.privateKeyFile.path])?.variable == "REDEEM_APPSTORE_KEY_ID")
    }
}
