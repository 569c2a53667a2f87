import AccountsService
import Core
import Cryptography
import Database
import Foundation
import Runtime
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The secrets Redeem stores (accounts' private signing keys, grants' webhook
/// secrets) are sealed under `REDEEM_SECRET_KEY`, and a rotation keeps every one readable.
final class SecretsStackTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!

    override class func startSuite() throws {
        stack = try newStack()
        minter = try stack.minter()
    }

    override class func stopSuite() { stack?.stop() }

    var stack: Stack { Self.stack }
    var client: HTTPClient { Self.stack.client }

    static func newStack() throws -> Stack { try Stack(environment: ["REDEEM_WEBHOOK_ALLOW_PRIVATE": "1"]) }

    func newWebhook(on stack: Stack) async throws -> (id: UUID, secret: String) {
        let created = try await stack.client.json(
            "POST", "/v1/webhooks", ["url": "http://127.0.0.1:9/hooks", "events": ["coupon.redeemed"]],
            token: stack.adminKey)
        XCTAssertEqual(created.status, 201, created.text)
        let body = try created.decode(WebhookEndpointBody.self)
        return (try XCTUnwrap(UUID(uuidString: body.id)), try XCTUnwrap(body.secret))
    }

    /// The stored secrets of every row: (context, key id, stored bytes).
    func storedSecrets(_ db: PGConnection) throws -> [(context: String, keyId: String?, stored: [UInt8])] {
        var all: [(context: String, keyId: String?, stored: [UInt8])] = []
        for row in try db.query("SELECT kid, private_key, secret_key_id FROM accounts.signing_keys").rows {
            let kid: String = try row.decode("kid")
            all.append(("accounts.signing_keys/" + kid, try row.decodeIfPresent("secret_key_id", as: String.self),
                        Array(try row.decode("private_key", as: PGBytes.self).data)))
        }
        for row in try db.query("SELECT id, secret, secret_key_id FROM grants.webhook_endpoints").rows {
            let id: UUID = try row.decode("id")
            let secret: String = try row.decode("secret")
            all.append(("grants.webhook_endpoints/" + id.lowercasedString, try row.decodeIfPresent("secret_key_id", as: String.self),
                        Array(Data(base64Encoded: secret) ?? Data())))
        }
        return all
    }

    func testTheDatabaseHoldsNoPlaintextSecret() async throws {
        let hook = try await newWebhook(on: stack)
        let db = try PGConnection(url: try stack.adminDatabaseURL())
        let keyring = try stack.secretKeyring()
        let row = try XCTUnwrap(try db.query("SELECT secret, secret_key_id FROM grants.webhook_endpoints WHERE id = $1", [hook.id]).first)
        let stored: String = try row.decode("secret")
        XCTAssertFalse(stored.contains(hook.secret.dropFirst("whsec_".count)), "the webhook secret is stored as it was given out")
        XCTAssertEqual(try row.decode("secret_key_id", as: String.self), keyring.current.id)
        // What is stored opens, with the stack's key, to what was given out, and only for its own row.
        XCTAssertEqual(String(decoding: try keyring.open(Array(Data(base64Encoded: stored)!), keyId: keyring.current.id,
                                                         context: "grants.webhook_endpoints/\(hook.id.lowercasedString)"), as: UTF8.self), hook.secret)
        XCTAssertThrowsError(try keyring.open(Array(Data(base64Encoded: stored)!), keyId: keyring.current.id, context: "grants.webhook_endpoints/other"))
        XCTAssertThrowsError(try SecretKeyring.random().open(Array(Data(base64Encoded: stored)!), keyId: keyring.current.id,
                                                             context: "grants.webhook_endpoints/\(hook.id.lowercasedString)"))

        let keys = try db.query("SELECT kid, private_key, secret_key_id FROM accounts.signing_keys").rows
        XCTAssertFalse(keys.isEmpty)
        for key in keys {
            XCTAssertEqual(try key.decodeIfPresent("secret_key_id", as: String.self), keyring.current.id)
            XCTAssertNil(AsymmetricKey.privateKey(der: Array(try key.decode("private_key", as: PGBytes.self).data)), "a private key stored as DER")
        }
        // And tokens signed with the stored key verify at the gateway.
        let user = try Self.minter.user()
        let mine = try await client.get("/v1/me/redemptions", token: user.token)
        XCTAssertEqual(mine.status, 200, mine.text)
        for secret in try storedSecrets(db) { XCTAssertNotNil(secret.keyId, "\(secret.context) is sealed") }
    }

    /// Rows stored before this version (plain, no key id) are sealed at the next start; a new key
    /// with the old one as `REDEEM_SECRET_KEY_PREVIOUS` seals everything again under the new one,
    /// and after that the new key alone opens everything.
    /// On a stack of its own: the rotation changes the secret key that the suite's stack was
    /// started with.
    func testLegacyRowsAreSealedAndARotationKeepsEverythingReadable() async throws {
        let stack = try await offThePool { try Self.newStack() }
        addTeardownBlock { _ = try await offThePool { stack.stop() } }
        let client = stack.client, minter = try stack.minter()
        let hook = try await newWebhook(on: stack)
        let db = try PGConnection(url: try stack.adminDatabaseURL())
        let legacyHook = UUID.random(), legacySecret = "whsec_" + Data(Crypto.randomBytes(24)).base64EncodedString()
        try db.query("INSERT INTO grants.webhook_endpoints (id, url, events, secret, mode) VALUES ($1, 'http://127.0.0.1:9/old', '{coupon.redeemed}', $2, 'live')",
                     [legacyHook, legacySecret])
        let seed = Crypto.randomBytes(32)
        try db.query("INSERT INTO accounts.signing_keys (kid, algorithm, private_key, created_at) VALUES ('legacy', 'EdDSA', $1, now() - interval '1 day')",
                     [PGBytes(Data(seed))])
        let before = try minter.user()
        let signing = try stack.signingKey()

        let old = try stack.secretKey()
        let new = Data(Crypto.randomBytes(32)).base64EncodedString()
        let files = try Project.temporaryDirectory("secret")
        defer { try? FileManager.default.removeItem(at: files) }
        let newFile = files.appendingPathComponent("new"), oldFile = files.appendingPathComponent("old")
        try new.write(to: newFile, atomically: true, encoding: .utf8)
        try old.write(to: oldFile, atomically: true, encoding: .utf8)
        let newOnly = try SecretKeyring(env: Environment(["REDEEM_SECRET_KEY": new]))

        func restart(_ settings: [String: String]) async throws {
            for service in ["accounts", "grants"] {
                let pid = try stack.pid(service)
                kill(pid, SIGTERM)
                let gone = try await stack.gone(pid)
                XCTAssertTrue(gone, "\(service) stopped")
            }
            do {
                try await stack.restart("accounts", "grants", overrides: settings, seconds: 30)
            } catch {
                XCTFail("accounts and grants start again: \(stack.logs().suffix(2000))")
                throw error
            }
        }
        try await restart(["REDEEM_SECRET_KEY_FILE": newFile.path, "REDEEM_SECRET_KEY_PREVIOUS_FILE": oldFile.path])

        // Everything is now sealed under the new key, and opens with it alone to what it was.
        let sealed = try storedSecrets(db)
        for secret in sealed { XCTAssertEqual(secret.keyId, newOnly.current.id, secret.context) }
        func opened(_ context: String) throws -> [UInt8] {
            let s = try XCTUnwrap(sealed.first { $0.context == context }, context)
            return try newOnly.open(s.stored, keyId: s.keyId, context: context)
        }
        XCTAssertEqual(String(decoding: try opened("grants.webhook_endpoints/\(hook.id.lowercasedString)"), as: UTF8.self), hook.secret)
        XCTAssertEqual(String(decoding: try opened("grants.webhook_endpoints/\(legacyHook.lowercasedString)"), as: UTF8.self), legacySecret)
        XCTAssertEqual(try opened("accounts.signing_keys/legacy"), seed)
        let resigned = try stack.signingKey(keyring: newOnly)
        XCTAssertEqual(resigned.kid, signing.kid)
        XCTAssertEqual(resigned.key.publicKeyDER, signing.key.publicKeyDER, "the same signing key, sealed again")
        XCTAssertTrue(stack.logs().contains("signing keys sealed under the current secret key"))
        XCTAssertTrue(stack.logs().contains("webhook secrets sealed under the current secret key"))

        // Tokens from before still verify; a sign-up signs with the resealed key.
        let mine = try await client.get("/v1/me/redemptions", token: before.token)
        XCTAssertEqual(mine.status, 200, mine.text)
        let signUp = try await client.json("POST", "/v1/accounts", ["email": "rotated-\(UUID().uuidString.prefix(8))@example.com", "password": "correct horse battery"])
        XCTAssertEqual(signUp.status, 201, signUp.text)
        let token = try signUp.decode(AccountSessionBody.self).session.accessToken
        let fresh = try await client.get("/v1/me/redemptions", token: token)
        XCTAssertEqual(fresh.status, 200, fresh.text)
    }
}
