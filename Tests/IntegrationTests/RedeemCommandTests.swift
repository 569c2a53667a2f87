import Foundation
import HTTP
import RedeemKit
import TestSupport
import XCTest

/// The `redeem` command, as built, against the real stack: what the dashboard does for coupons
/// (create with a dry run, list, get, update, deactivate, redemptions and the CSV export), API
/// keys and webhooks; tables for people, `--json` for scripts, exit 1 with the server's message
/// on a refusal, 2 on a usage mistake, 3 when the server is out of reach and 4 when it fails.
final class RedeemCommandTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!

    override class func startSuite() throws {
        stack = try Stack(environment: ["REDEEM_WEBHOOK_ALLOW_PRIVATE": "1"])
    }

    override class func stopSuite() {
        stack?.stop()
    }

    struct Run {
        var status: Int32
        var out: String
        var err: String

        /// What the command printed with `--json`, read as `T`.
        func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
            do { return try JSONDecoder().decode(T.self, from: Data(out.utf8)) } catch {
                throw TestFailure("not a \(T.self) (\(error)): \(out)")
            }
        }
    }

    /// A coupon as the command prints it, with a dry run's store limits.
    struct Coupon: Decodable {
        struct Limit: Decodable { let value: Int }
        let code: String?
        let remaining: Int?
        let maxRedemptions: Int?
        let active: Bool?
        let storeLimits: [Limit]?
    }

    /// What `webhooks test` answers.
    struct Sent: Decodable {
        let type: String
        let id: String
    }

    /// Runs the built `redeem` with `REDEEM_URL` and `REDEEM_API_KEY` (the admin key unless `key`).
    func redeem(_ arguments: String..., key: String? = nil, url: String? = nil) async throws -> Run {
        var environment = ProcessInfo.processInfo.environment
        environment["REDEEM_URL"] = url ?? Self.stack.gateway.absoluteString
        environment["REDEEM_API_KEY"] = key ?? Self.stack.adminKey
        let executable = Project.binDirectory.appendingPathComponent("redeem")
        let settings = environment
        return try await offThePool {
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            process.environment = settings
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            // stderr is read on its own thread, so neither pipe can fill and stall the command.
            let errData = LockedData(), read = DispatchSemaphore(value: 0)
            let reader = Thread {
                errData.set(err.fileHandleForReading.readDataToEndOfFile())
                read.signal()
            }
            reader.start()
            let outData = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            read.wait()
            return Run(status: process.terminationStatus, out: String(decoding: outData, as: UTF8.self),
                       err: String(decoding: errData.value, as: UTF8.self))
        }
    }

    static func code() -> String { "CLI-" + UUID().uuidString.prefix(8).uppercased() }

    func testCouponsFromCreateToExport() async throws {
        let code = Self.code()
        let made = try await redeem("coupons", "create", "--code", code.lowercased(), "--kind", "freePeriod", "--duration", "1 month",
                                    "--max-redemptions", "5", "--entitlement", "pro", "--json")
        XCTAssertEqual(made.status, 0, made.err)
        XCTAssertEqual(try made.decode(Coupon.self).code, code)
        XCTAssertEqual(try made.decode(Coupon.self).remaining, 5)

        // A dry run shows the store limits of an iOS discount and saves nothing.
        let expires = Date().addingTimeInterval(30 * 86_400).formatted(Date.ISO8601FormatStyle())
        let dry = try await redeem("coupons", "create", "--code", "DRY-\(code)", "--kind", "percentOff", "--percent-off", "20",
                                   "--duration", "1month", "--period-count", "3", "--products", "pro.monthly", "--platforms", "ios",
                                   "--max-redemptions", "100", "--expires-at", expires, "--dry-run", "--json")
        XCTAssertEqual(dry.status, 0, dry.err)
        XCTAssertEqual(try dry.decode(Coupon.self).storeLimits?.first?.value, 25_000)
        let notSaved = try await redeem("coupons", "get", "DRY-\(code)")
        XCTAssertEqual(notSaved.status, 1)
        XCTAssertTrue(notSaved.err.contains("notFound"), notSaved.err)

        // The server's refusal: exit 1 with its message, code and field.
        let dup = try await redeem("coupons", "create", "--code", code, "--kind", "freePeriod", "--duration", "7 days")
        XCTAssertEqual(dup.status, 1)
        XCTAssertTrue(dup.err.contains("codeInUse"), dup.err)
        let bad = try await redeem("coupons", "create", "--code", "X", "--kind", "freePeriod", "--duration", "1 day")
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.err.contains("field code"), bad.err)

        // Tables for people.
        let table = try await redeem("coupons", "list", "--limit", "100")
        XCTAssertEqual(table.status, 0, table.err)
        let header = try XCTUnwrap(table.out.split(separator: "\n").first)
        XCTAssertTrue(header.hasPrefix("CODE") && header.contains("USES") && header.contains("ACTIVE"), table.out)
        XCTAssertTrue(table.out.split(separator: "\n").contains { $0.hasPrefix(code) && $0.contains("0/5") }, table.out)
        let one = try await redeem("coupons", "get", code)
        XCTAssertTrue(one.out.split(separator: "\n").contains { $0.hasPrefix("remaining") && $0.hasSuffix(" 5") }, one.out)
        let listed = try await redeem("coupons", "list", "--active", "true", "--all", "--json")
        XCTAssertTrue(try listed.decode(ListBody<Coupon>.self).data.contains { $0.code == code })

        // Update: the cap removed (null), then set again.
        let uncapped = try await redeem("coupons", "update", code, "--max-redemptions", "none", "--json")
        XCTAssertEqual(uncapped.status, 0, uncapped.err)
        XCTAssertNil(try uncapped.decode(Coupon.self).maxRedemptions)
        let capped = try await redeem("coupons", "update", code, "--max-redemptions", "3", "--json")
        XCTAssertEqual(try capped.decode(Coupon.self).maxRedemptions, 3)

        // A user redeems it with RedeemKit; the command sees and exports the redemption.
        let app = RedeemClient(configuration: .init(baseURL: Self.stack.gateway, tokenStore: MemoryTokenStore(), platform: .android))
        let account = try await app.signUp(email: "cli-\(UUID().uuidString.prefix(8))@example.com", password: "correct horse battery staple")
        let redemption = try await app.redeemCoupon(code).get()
        _ = try await app.awaitCouponCompletion(redemptionId: redemption.redemptionId, timeout: 30)
        // Ids as the API writes them.
        let id = redemption.redemptionId.uuidString
        let redemptions = try await redeem("redemptions", "list", code, "--json")
        let rows = try redemptions.decode(ListBody<RedemptionBody>.self).data
        XCTAssertEqual(rows.map(\.redemptionId), [id])
        XCTAssertEqual(rows.first?.status, "completed")
        let got = try await redeem("redemptions", "get", id)
        XCTAssertTrue(got.out.contains("completed") && got.out.contains("android"), got.out)
        let csv = try await redeem("redemptions", "export", code, "--csv")
        XCTAssertEqual(csv.status, 0, csv.err)
        let lines = csv.out.split(whereSeparator: \.isNewline)
        XCTAssertTrue(lines.first?.hasPrefix("redemptionId,code,accountId,appUserId") == true, csv.out)
        XCTAssertEqual(lines.count, 2, csv.out)
        XCTAssertTrue(lines.last?.contains(id) == true && lines.last?.contains(account.appUserId) == true, csv.out)
        let noFormat = try await redeem("redemptions", "export", code)
        XCTAssertEqual(noFormat.status, 2)

        let off = try await redeem("coupons", "deactivate", code)
        XCTAssertEqual(off.status, 0, off.err)
        let after = try await redeem("coupons", "get", code, "--json")
        XCTAssertEqual(try after.decode(Coupon.self).active, false)
    }

    func testKeysAndWebhooks() async throws {
        let made = try await redeem("keys", "create", "--name", "ci reader", "--role", "readonly", "--mode", "test", "--json")
        XCTAssertEqual(made.status, 0, made.err)
        let key = try XCTUnwrap(try made.decode(APIKeyBody.self).key)
        let keyId = try made.decode(APIKeyBody.self).id
        XCTAssertTrue(key.hasPrefix("sk_test_"), key)
        let keys = try await redeem("keys", "list", "--all", "--json")
        XCTAssertTrue(
            try keys.decode(ListBody<APIKeyBody>.self).data.contains { $0.id == keyId && $0.role == "readonly" })
        XCTAssertFalse(keys.out.contains(key), "a listed key never shows its secret")

        // A readonly key reads, and is refused writes with the server's message.
        let read = try await redeem("coupons", "list", key: key)
        XCTAssertEqual(read.status, 0, read.err)
        let refused = try await redeem("coupons", "create", "--code", Self.code(), "--kind", "freePeriod", "--duration", "1 day", key: key)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.err.contains("forbidden"), refused.err)
        let revoked = try await redeem("keys", "revoke", keyId)
        XCTAssertEqual(revoked.status, 0, revoked.err)
        let afterRevoke = try await Self.stack.eventually(5) { try await self.redeem("coupons", "list", key: key).status == 1 }
        XCTAssertTrue(afterRevoke, "a revoked key still works")

        let hook = try await redeem("webhooks", "create", "--url", "http://127.0.0.1:9/hooks", "--events", "coupon.redeemed", "--json")
        XCTAssertEqual(hook.status, 0, hook.err)
        let hookId = try hook.decode(WebhookEndpointBody.self).id
        XCTAssertTrue(try hook.decode(WebhookEndpointBody.self).secret?.hasPrefix("whsec_") == true)
        let hooks = try await redeem("webhooks", "list")
        XCTAssertTrue(hooks.out.contains(hookId) && hooks.out.contains("http://127.0.0.1:9/hooks"), hooks.out)
        let sent = try await redeem("webhooks", "test", hookId, "--json")
        XCTAssertEqual(sent.status, 0, sent.err)
        XCTAssertEqual(try sent.decode(Sent.self).type, "webhook.test")
        let sentId = try sent.decode(Sent.self).id
        let deliveries = try await redeem("webhooks", "deliveries", hookId, "--json")
        XCTAssertEqual(deliveries.status, 0, deliveries.err)
        let logged = try deliveries.decode(ListBody<DeliveryBody>.self).data
        XCTAssertEqual(logged.compactMap(\.id), [sentId], "the test event is in the endpoint's delivery log")
        let retried = try await redeem("webhooks", "retry", hookId, sentId, "--json")
        XCTAssertEqual(retried.status, 0, retried.err)
        XCTAssertEqual(try retried.decode(DeliveryBody.self).id, sentId, "the same delivery, sent again")
        XCTAssertEqual(try retried.decode(DeliveryBody.self).status, "pending")
        let noSuchDelivery = try await redeem("webhooks", "retry", hookId, UUID().uuidString)
        XCTAssertEqual(noSuchDelivery.status, 1)
        XCTAssertTrue(noSuchDelivery.err.contains("no such delivery"), noSuchDelivery.err)
        let badEvent = try await redeem("webhooks", "create", "--url", "http://127.0.0.1:9/x", "--events", "coupon.sold")
        XCTAssertEqual(badEvent.status, 1)
        XCTAssertTrue(badEvent.err.contains("invalid"), badEvent.err)
        let deleted = try await redeem("webhooks", "delete", hookId)
        XCTAssertEqual(deleted.status, 0, deleted.err)
        let gone = try await redeem("webhooks", "delete", hookId)
        XCTAssertEqual(gone.status, 1)
        let testGone = try await redeem("webhooks", "test", hookId)
        XCTAssertEqual(testGone.status, 1, "no test event for a removed endpoint")
    }

    /// `codes create` makes unique codes and writes their CSV, readable by its owner only; the
    /// CSV is the server's once, so `codes download` after it exits 1 with `downloadGone`.
    func testCodesCreateWritesTheCSVOnce() async throws {
        let code = Self.code()
        let made = try await redeem(
            "coupons", "create", "--code", code, "--kind", "freePeriod", "--duration", "1 month")
        XCTAssertEqual(made.status, 0, made.err)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("codes-\(UUID().uuidString).csv")
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try await redeem(
            "codes", "create", code.lowercased(), "--count", "40", "--prefix", "cli", "--output", file.path, "--json")
        XCTAssertEqual(run.status, 0, run.err)
        struct Done: Decodable {
            let ok: Bool
            let count: String
            let code: String
        }
        XCTAssertEqual(try run.decode(Done.self).count, "40")
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.first, "code")
        XCTAssertEqual(Set(lines.dropFirst()).count, 40)
        XCTAssertTrue(lines.dropFirst().allSatisfy { $0.hasPrefix("CLI-") && $0.count == 23 }, "\(lines.prefix(3))")
        let permissions = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        XCTAssertEqual(permissions, 0o600)
        let again = try await redeem("codes", "download", code)
        XCTAssertEqual(again.status, 1)
        XCTAssertTrue(again.err.contains("downloadGone"), again.err)
        let tooMany = try await redeem("codes", "create", code, "--count", "100001")
        XCTAssertEqual(tooMany.status, 1)
        XCTAssertTrue(tooMany.err.contains("field count"), tooMany.err)
        let noCount = try await redeem("codes", "create", code)
        XCTAssertEqual(noCount.status, 2)
    }

    func testMistakesExitTwoAndAnUnreachableServerThree() async throws {
        let unknown = try await redeem("coupons", "explode")
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.err.contains("unknown command"), unknown.err)
        let typo = try await redeem("coupons", "list", "--limt", "5")
        XCTAssertEqual(typo.status, 2)
        XCTAssertTrue(typo.err.contains("--limt"), typo.err)
        let noKey = try await redeem("coupons", "list", key: "")
        XCTAssertEqual(noKey.status, 2)
        let badLimit = try await redeem("coupons", "list", "--limit", "0")
        XCTAssertEqual(badLimit.status, 1)
        XCTAssertTrue(badLimit.err.contains("field limit"), badLimit.err)
        let port = try Project.freePort()
        let away = try await redeem("coupons", "list", url: "http://127.0.0.1:\(port)")
        XCTAssertEqual(away.status, 3, "out of reach: the network's exit status")
        XCTAssertTrue(away.err.contains("could not be reached"), away.err)
        let help = try await redeem("--help")
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.out.contains("REDEEM_API_KEY"))
    }

    /// A script tells the network (3) from the server's own failure (4) and from a refusal (1).
    func testExitStatusTellsNetworkFromServerFailures() async throws {
        let nothing = "http://127.0.0.1:\(try Project.freePort())"
        let refused = try await redeem("coupons", "get", "ANY", url: nothing)
        XCTAssertEqual(refused.status, 3, refused.err)
        // A server that fails on its side: a loopback server answering 500 in the API's error shape.
        let failing = try WebhookReceiver()
        failing.respond(with: .error(HTTPError(500, "internal", "something went wrong on our side")))
        let failed = try await redeem("coupons", "get", "ANY", url: "http://127.0.0.1:\(failing.port)")
        await failing.stop()
        XCTAssertEqual(failed.status, 4, failed.err)
        XCTAssertTrue(failed.err.contains("internal"), failed.err)
        let missing = try await redeem("coupons", "get", "NOPE-NOPE")
        XCTAssertEqual(missing.status, 1, missing.err)
    }
}

/// Bytes one thread sets and another reads once set.
private final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data: Data?
    func set(_ d: Data) { lock.lock(); data = d; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return data != nil }
    var value: Data { lock.lock(); defer { lock.unlock() }; return data ?? Data() }
}
