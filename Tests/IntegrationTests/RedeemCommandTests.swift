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

    /// Runs the built `redeem` with `REDEEM_URL` and `REDEEM_API_KEY` (the admin key unless `key`),
    /// its profiles in a directory of this test's own (`REDEEM_CONFIG_DIR`); `env` sets or (nil)
    /// removes more settings, and `stdin` is what the command reads (nothing unless given).
    func redeem(
        _ arguments: String..., key: String? = nil, url: String? = nil, env: [String: String?] = [:],
        stdin: String? = nil
    ) async throws -> Run {
        try await redeem(arguments, key: key, url: url, env: env, stdin: stdin)
    }

    func redeem(
        _ arguments: [String], key: String? = nil, url: String? = nil, env: [String: String?] = [:],
        stdin: String? = nil
    ) async throws -> Run {
        var environment = ProcessInfo.processInfo.environment
        environment["REDEEM_URL"] = url ?? Self.stack.gateway.absoluteString
        environment["REDEEM_API_KEY"] = key ?? Self.stack.adminKey
        environment["REDEEM_CONFIG_DIR"] = configDirectory.path
        environment["REDEEM_PROFILE"] = nil
        for (name, value) in env { environment[name] = value }
        let executable = Project.binDirectory.appendingPathComponent("redeem")
        let settings = environment
        return try await offThePool {
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            process.environment = settings
            let out = Pipe(), err = Pipe(), input = Pipe()
            process.standardOutput = out
            process.standardError = err
            process.standardInput = stdin == nil ? FileHandle.nullDevice : input
            try process.run()
            if let stdin {
                input.fileHandleForWriting.write(Data(stdin.utf8))
                try input.fileHandleForWriting.close()
            }
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

    /// This test's own directory for `redeem login`'s credentials, removed after it.
    var configDirectory: URL {
        if let dir = _configDirectory { return dir }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("redeem-cli-\(UUID().uuidString)")
        _configDirectory = dir
        return dir
    }
    private var _configDirectory: URL?

    override func tearDown() {
        if let dir = _configDirectory { try? FileManager.default.removeItem(at: dir) }
        _configDirectory = nil
        super.tearDown()
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

    // MARK: - Help

    /// A command as `redeem help --json` lists it.
    struct Listed: Decodable {
        struct Option: Decodable {
            let name: String
            let required: Bool
        }
        let command: String
        let usage: String
        let options: [Option]
        let example: String
    }

    /// Help for every command in the table: `--help`, `-h` and `redeem help <command>` print the
    /// same (usage, every option, an example) and exit 0 with no key and no server. The dispatcher
    /// finds commands in the same table, and every handler of Command.swift is in it.
    func testHelpForEveryCommandNeedsNoServer() async throws {
        let nowhere = "http://127.0.0.1:\(try Project.freePort())"
        let offline: [String: String?] = ["REDEEM_API_KEY": nil]
        let listing = try await redeem("help", "--json", url: nowhere, env: offline)
        XCTAssertEqual(listing.status, 0, listing.err)
        let commands = try listing.decode([Listed].self)
        XCTAssertGreaterThan(commands.count, 30, listing.out)
        let overview = try await redeem("help", url: nowhere, env: offline)
        XCTAssertEqual(overview.status, 0, overview.err)
        let helpOfHelp = try await redeem("help", "help", url: nowhere, env: offline)
        XCTAssertEqual(helpOfHelp.out, overview.out)
        let nothing = try await redeem([], url: nowhere, env: offline)
        XCTAssertEqual(nothing.status, 2, "no command is a usage mistake")
        XCTAssertEqual(nothing.out, overview.out)
        for name in ["members invite", "members invites revoke", "audit list", "login", "logout", "profiles list"] {
            XCTAssertTrue(commands.contains { $0.command == name }, "\(name) is in the table")
        }
        for c in commands {
            let words = c.command.split(separator: " ").map(String.init)
            XCTAssertTrue(overview.out.contains("  \(c.command) "), "redeem help lists \(c.command)")
            let help = try await redeem(words + ["--help"], url: nowhere, env: offline)
            XCTAssertEqual(help.status, 0, "\(c.command) --help: \(help.err)")
            XCTAssertTrue(help.out.hasPrefix("usage: \(c.usage)\n"), help.out)
            XCTAssertTrue(help.out.contains("Example:\n  \(c.example)\n"), help.out)
            for o in c.options { XCTAssertTrue(help.out.contains("  --\(o.name)"), "\(c.command) --\(o.name)") }
            let same = try await redeem(["help"] + words, url: nowhere, env: offline)
            XCTAssertEqual(same.out, help.out, "redeem help \(c.command)")
            // The dispatcher knows it: run bare, it fails on its words, options or key, never as unknown.
            let bare = try await redeem(words, url: nowhere, env: offline)
            XCTAssertFalse(bare.err.contains("unknown command"), "\(c.command): \(bare.err)")
            XCTAssertNotEqual(bare.status, 3, "\(c.command) called the server without a key")
        }
        let short = try await redeem("coupons", "create", "-h", url: nowhere, env: offline)
        XCTAssertEqual(short.status, 0, short.err)
        XCTAssertTrue(short.out.contains("--max-redemptions N") && short.out.contains("--dry-run"), short.out)
        let group = try await redeem("help", "members", url: nowhere, env: offline)
        XCTAssertEqual(group.status, 0, group.err)
        XCTAssertTrue(group.out.contains("members invites revoke") && !group.out.contains("coupons"), group.out)

        // Every handler in Command.swift is reached through the table, so none runs without help.
        let source = try String(
            contentsOf: Project.root.appendingPathComponent("Clients/redeem/Command.swift"), encoding: .utf8)
        let table = try String(
            contentsOf: Project.root.appendingPathComponent("Clients/redeem/Help.swift"), encoding: .utf8)
        let handlers = try NSRegularExpression(pattern: #"func (\w+)\(_ args: inout Arguments\) async throws"#)
        let names = handlers.matches(in: source, range: NSRange(source.startIndex..., in: source)).map {
            String(source[Range($0.range(at: 1), in: source)!])
        }
        XCTAssertGreaterThan(names.count, 30)
        for name in names { XCTAssertTrue(table.contains("$0.\(name)(&$1)"), "\(name) is in no command of the table") }

        // Unknown commands: a usage mistake naming the closest.
        let typo = try await redeem("coupns", "list", url: nowhere, env: offline)
        XCTAssertEqual(typo.status, 2)
        XCTAssertTrue(typo.err.contains("unknown command") && typo.err.contains("`redeem coupons list`"), typo.err)
        let verb = try await redeem("members", "invte", url: nowhere, env: offline)
        XCTAssertEqual(verb.status, 2)
        XCTAssertTrue(verb.err.contains("`redeem members invite`"), verb.err)
        let helpTypo = try await redeem("help", "audt", url: nowhere, env: offline)
        XCTAssertEqual(helpTypo.status, 2)
        XCTAssertTrue(helpTypo.err.contains("`redeem audit list`"), helpTypo.err)
        let wrongOption = try await redeem("members", "invite", "--emial", "a@example.com", url: nowhere, env: offline)
        XCTAssertEqual(wrongOption.status, 2)
        XCTAssertTrue(wrongOption.err.contains("did you mean --email"), wrongOption.err)
        XCTAssertTrue(wrongOption.err.contains("usage: redeem members invite --email EMAIL"), wrongOption.err)
    }

    // MARK: - Login and profiles

    /// What `redeem login --json` answers.
    struct LoggedIn: Decodable {
        let profile: String
        let key: String
        let file: String
    }

    func permissions(_ path: String) throws -> Int? {
        try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
    }

    func testLoginSavesAKeyThatLaterCommandsUse() async throws {
        let made = try await redeem("keys", "create", "--name", "cli login", "--role", "readonly", "--json")
        XCTAssertEqual(made.status, 0, made.err)
        let key = try XCTUnwrap(try made.decode(APIKeyBody.self).key)
        let gateway = Self.stack.gateway.absoluteString
        let bare: [String: String?] = ["REDEEM_URL": nil, "REDEEM_API_KEY": nil]
        let file = configDirectory.appendingPathComponent("credentials")

        // A wrong key is refused by the server, and nothing is written.
        let wrong = try await redeem(
            "login", "--api-url", gateway, env: bare, stdin: "sk_live_\(UUID().uuidString.lowercased())\n")
        XCTAssertEqual(wrong.status, 1, wrong.err)
        XCTAssertTrue(wrong.err.contains("refused this key") && wrong.err.contains("nothing saved"), wrong.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: file.path), "a refused key is not saved")

        let login = try await redeem("login", "--api-url", gateway, "--json", env: bare, stdin: key + "\n")
        XCTAssertEqual(login.status, 0, login.err)
        let shown = try login.decode(LoggedIn.self)
        XCTAssertEqual(shown.profile, "default")
        XCTAssertEqual(shown.key, "sk_live_…" + key.suffix(4))
        XCTAssertEqual(shown.file, file.path)
        XCTAssertFalse(login.out.contains(key) || login.err.contains(key), "the key is never printed")
        XCTAssertEqual(try permissions(file.path), 0o600)
        XCTAssertEqual(try permissions(configDirectory.path), 0o700)
        XCTAssertTrue(try String(contentsOf: file, encoding: .utf8).contains(key))

        // With neither REDEEM_URL nor REDEEM_API_KEY, the profile is used.
        let listed = try await redeem("coupons", "list", "--json", env: bare)
        XCTAssertEqual(listed.status, 0, listed.err)
        XCTAssertNoThrow(try listed.decode(ListBody<Coupon>.self))
        let readonly = try await redeem("keys", "create", "--name", "x", "--role", "admin", env: bare)
        XCTAssertEqual(readonly.status, 1, "the profile's readonly key, not the admin's: \(readonly.err)")
        XCTAssertTrue(readonly.err.contains("forbidden"), readonly.err)
        // An explicit key wins over the profile's.
        let explicit = try await redeem("coupons", "list", env: ["REDEEM_URL": nil, "REDEEM_API_KEY": "sk_live_nope"])
        XCTAssertEqual(explicit.status, 1, explicit.err)
        XCTAssertTrue(explicit.err.contains("invalidToken"), explicit.err)

        // A second profile, chosen by --profile or REDEEM_PROFILE; the first stays.
        let second = try await redeem(
            "login", "--profile", "ci", "--key-stdin", env: ["REDEEM_API_KEY": nil], stdin: Self.stack.adminKey + "\n")
        XCTAssertEqual(second.status, 0, second.err)
        let admin = try await redeem("keys", "list", "--profile", "ci", env: bare)
        XCTAssertEqual(admin.status, 0, admin.err)
        let byEnvironment = try await redeem("keys", "list", env: bare.merging(["REDEEM_PROFILE": "ci"]) { $1 })
        XCTAssertEqual(byEnvironment.status, 0, byEnvironment.err)
        let profiles = try await redeem("profiles", "list", env: bare)
        XCTAssertEqual(profiles.status, 0, profiles.err)
        XCTAssertTrue(profiles.out.contains("ci") && profiles.out.contains("sk_live_…" + key.suffix(4)), profiles.out)
        XCTAssertFalse(profiles.out.contains(key) || profiles.out.contains(Self.stack.adminKey), profiles.out)
        XCTAssertEqual(try permissions(file.path), 0o600)

        let logout = try await redeem("logout", "--profile", "ci", env: bare)
        XCTAssertEqual(logout.status, 0, logout.err)
        let gone = try await redeem("keys", "list", "--profile", "ci", env: bare)
        XCTAssertEqual(gone.status, 2, gone.err)
        XCTAssertTrue(gone.err.contains("no profile ci"), gone.err)
        let stillThere = try await redeem("coupons", "list", env: bare)
        XCTAssertEqual(stillThere.status, 0, stillThere.err)

        // Without REDEEM_CONFIG_DIR, $XDG_CONFIG_HOME/redeem holds the file.
        let xdg = configDirectory.appendingPathComponent("xdg")
        let elsewhere = try await redeem(
            "login", env: ["REDEEM_API_KEY": nil, "REDEEM_CONFIG_DIR": nil, "XDG_CONFIG_HOME": xdg.path],
            stdin: key + "\n")
        XCTAssertEqual(elsewhere.status, 0, elsewhere.err)
        XCTAssertEqual(try permissions(xdg.appendingPathComponent("redeem/credentials").path), 0o600)
    }

    /// A credentials file others may read is refused, as ssh refuses such a key, until it is 0600;
    /// a key given in the environment needs no file.
    func testACredentialsFileOthersMayReadIsRefused() async throws {
        try FileManager.default.createDirectory(at: configDirectory, withIntermediateDirectories: true)
        let file = configDirectory.appendingPathComponent("credentials")
        let text = "[default]\napi_url = \"\(Self.stack.gateway.absoluteString)\"\n"
            + "api_key = \"\(Self.stack.adminKey)\"\n"
        try Data(text.utf8).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        let bare: [String: String?] = ["REDEEM_URL": nil, "REDEEM_API_KEY": nil]
        let refused = try await redeem("coupons", "list", env: bare)
        XCTAssertEqual(refused.status, 2, refused.err)
        XCTAssertTrue(refused.err.contains("readable by others (mode 644)"), refused.err)
        XCTAssertTrue(refused.err.contains("chmod 600 \(file.path)"), refused.err)
        XCTAssertFalse(refused.err.contains(Self.stack.adminKey))
        let login = try await redeem("login", env: ["REDEEM_API_KEY": nil], stdin: Self.stack.adminKey + "\n")
        XCTAssertEqual(login.status, 2, "login does not write over it either: \(login.err)")
        let fromEnvironment = try await redeem("coupons", "list")
        XCTAssertEqual(fromEnvironment.status, 0, fromEnvironment.err)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        let fixed = try await redeem("coupons", "list", env: bare)
        XCTAssertEqual(fixed.status, 0, fixed.err)
    }

    // MARK: - Members and the audit log

    struct Invited: Decodable {
        let id: String
        let email: String
        let role: String
        let token: String
        let inviteUrl: String
    }

    struct MemberRow: Decodable, Equatable {
        let id: String
        let email: String
        let role: String
    }

    struct AuditRow: Decodable, Equatable {
        let id: String
        let action: String
        let objectType: String
        let objectId: String
    }

    func testMembersAndTheAuditLogShowWhatTheAPIShows() async throws {
        let email = "cli-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let invite = try await redeem("members", "invite", "--email", email, "--role", "support", "--json")
        XCTAssertEqual(invite.status, 0, invite.err)
        let invited = try invite.decode(Invited.self)
        XCTAssertTrue(invited.inviteUrl.hasSuffix("#invite=\(invited.token)"), invited.inviteUrl)
        let pending = try await redeem("members", "invites", "list", "--json")
        XCTAssertEqual(pending.status, 0, pending.err)
        XCTAssertTrue(
            try pending.decode(ListBody<MemberRow>.self).data.contains { $0.id == invited.id && $0.email == email })
        let pendingTable = try await redeem("members", "invites", "list")
        XCTAssertTrue(pendingTable.out.hasPrefix("ID") && pendingTable.out.contains(email), pendingTable.out)
        XCTAssertFalse(pendingTable.out.contains(invited.token), "a listed invitation never shows its token")

        // A second invitation, revoked: its URL makes no member.
        let other = try await redeem("members", "invite", "--email", "x" + email, "--role", "readonly", "--json")
        let otherInvite = try other.decode(Invited.self)
        let revoked = try await redeem("members", "invites", "revoke", otherInvite.id)
        XCTAssertEqual(revoked.status, 0, revoked.err)
        let accepted = try await Self.stack.client.json(
            "POST", "/v1/members/accept", ["token": otherInvite.token, "password": "a long operator passphrase"])
        XCTAssertEqual(accepted.status, 401, accepted.text)

        // The first accepted: a member, listed as the API lists them.
        let joined = try await Self.stack.client.json(
            "POST", "/v1/members/accept", ["token": invited.token, "password": "a long operator passphrase"])
        XCTAssertEqual(joined.status, 201, joined.text)
        let members = try await redeem("members", "list", "--all", "--json")
        XCTAssertEqual(members.status, 0, members.err)
        let api = try await Self.stack.client.get("/v1/members?limit=100", token: Self.stack.adminKey)
        XCTAssertEqual(try members.decode(ListBody<MemberRow>.self).data, try api.decode(ListBody<MemberRow>.self).data)
        let member = try XCTUnwrap(try members.decode(ListBody<MemberRow>.self).data.first { $0.email == email })
        XCTAssertEqual(member.role, "support")
        let table = try await redeem("members", "list")
        XCTAssertTrue(
            table.out.split(separator: "\n").contains {
                $0.hasPrefix(member.id) && $0.contains(email) && $0.contains("support")
            },
            table.out)

        let updated = try await redeem("members", "update", member.id, "--role", "readonly", "--json")
        XCTAssertEqual(updated.status, 0, updated.err)
        XCTAssertEqual(try updated.decode(MemberRow.self).role, "readonly")
        let removed = try await redeem("members", "remove", member.id)
        XCTAssertEqual(removed.status, 0, removed.err)
        let after = try await redeem("members", "list", "--json")
        XCTAssertFalse(try after.decode(ListBody<MemberRow>.self).data.contains { $0.id == member.id })
        let again = try await redeem("members", "remove", member.id)
        XCTAssertEqual(again.status, 1, again.err)

        // The audit log, filtered to this member, is the API's, every page of it.
        let log = try await redeem("audit", "list", "--object-type", "member", "--object-id", member.id, "--json")
        XCTAssertEqual(log.status, 0, log.err)
        let rows = try log.decode(ListBody<AuditRow>.self).data
        XCTAssertEqual(Set(rows.map(\.action)).isSuperset(of: ["member.update", "member.remove"]), true, "\(rows)")
        let apiLog = try await Self.stack.client.get(
            "/v1/audit?objectType=member&objectId=\(member.id)", token: Self.stack.adminKey)
        XCTAssertEqual(rows, try apiLog.decode(ListBody<AuditRow>.self).data)
        let paged = try await redeem("audit", "list", "--limit", "1", "--all", "--json")
        let everything = try paged.decode(ListBody<AuditRow>.self).data
        XCTAssertTrue(Set(everything.map(\.id)).isSuperset(of: rows.map(\.id)), "--all follows the cursors")
        XCTAssertGreaterThan(everything.count, rows.count)
        let apiAll = try await Self.stack.client.get("/v1/audit?limit=100", token: Self.stack.adminKey)
        XCTAssertEqual(everything.map(\.id), try apiAll.decode(ListBody<AuditRow>.self).data.map(\.id))
        let auditTable = try await redeem("audit", "list", "--action", "member.remove", "--limit", "5")
        XCTAssertTrue(auditTable.out.hasPrefix("TIME") && auditTable.out.contains("member.remove"), auditTable.out)
        let badType = try await redeem("audit", "list", "--object-type", "spaceship")
        XCTAssertEqual(badType.status, 1)
        XCTAssertTrue(badType.err.contains("field objectType"), badType.err)
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
