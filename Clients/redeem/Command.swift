import Foundation
import RedeemKit

/// The commands: each reads its words (after the command's own) and options, calls the operator
/// client and prints. `CommandSpec.all` (Help.swift) names them and what they take.
struct Command: Sendable {
    let output: Output
    let environment: [String: String]
    /// The global `--url`, `--api-key` and `--profile`, when given.
    let url: String?
    let apiKey: String?
    let profileOption: String?
    private let connection = Connection()

    init(output: Output, environment: [String: String], url: String?, apiKey: String?, profile: String?) {
        self.output = output
        self.environment = environment
        self.url = url
        self.apiKey = apiKey
        profileOption = profile
    }

    /// `--profile`, else `REDEEM_PROFILE`, else `default`.
    var profileName: String {
        profileOption ?? environment["REDEEM_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
    }

    func setting(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }

    /// The client of the gateway with the key: `--url`/`--api-key`, else `REDEEM_URL`/`REDEEM_API_KEY`,
    /// else the profile's. The credentials file is read only when one of the two is missing.
    var client: OperatorClient {
        get throws {
            try connection.get {
                var urlText = url ?? setting("REDEEM_URL"), key = apiKey ?? setting("REDEEM_API_KEY")
                if urlText == nil || key == nil {
                    let saved = try Credentials.load(environment)
                    if let p = saved.profiles[profileName] {
                        urlText = urlText ?? p.apiURL
                        key = key ?? p.apiKey
                    } else if profileOption != nil || setting("REDEEM_PROFILE") != nil {
                        throw Refusal(
                            "no profile \(profileName) in \(saved.file.path): "
                                + "run `redeem login --profile \(profileName)`", status: 2)
                    }
                }
                guard let urlText, let url = URL(string: urlText), url.scheme != nil else {
                    throw UsageError("set REDEEM_URL or --url to the gateway's address, or run `redeem login`")
                }
                guard let key else {
                    throw UsageError("set REDEEM_API_KEY or --api-key to an API key, or run `redeem login`")
                }
                return OperatorClient(baseURL: url, apiKey: key)
            }
        }
    }

    // MARK: - Coupons, redemptions, keys, webhooks, plans

    func listCoupons(_ args: inout Arguments) async throws {
        let active = try args.bool("active")
        try await list(&args, couponColumns) { try await client.coupons(active: active, limit: $0, cursor: $1) }
    }

    func getCoupon(_ args: inout Arguments) async throws {
        let code = try args.word(0, "the coupon's code")
        try args.checkNoneLeft()
        try show(try await client.coupon(code))
    }

    func deactivateCoupon(_ args: inout Arguments) async throws {
        let code = try args.word(0, "the coupon's code")
        try args.checkNoneLeft()
        try await client.deactivateCoupon(code)
        try output.done("deactivated \(code.uppercased())", ["code": code.uppercased()])
    }

    func listRedemptions(_ args: inout Arguments) async throws {
        let code = try args.word(0, "the coupon's code")
        try await list(&args, redemptionColumns) { try await client.redemptions(of: code, limit: $0, cursor: $1) }
    }

    func getRedemption(_ args: inout Arguments) async throws {
        let id = try uuid(args.word(0, "the redemption's id"))
        try args.checkNoneLeft()
        let r = try await client.redemption(id)
        try output.one(r, fields: redemptionColumns.map { ($0.0, $0.1(r)) })
    }

    func exportRedemptions(_ args: inout Arguments) async throws {
        let code = try args.word(0, "the coupon's code")
        guard args.flag("csv") else { throw UsageError("redemptions export needs --csv (the only export format)") }
        let file = args.option("output")
        try args.checkNoneLeft()
        let csv = try await client.exportRedemptionsCSV(of: code, timeout: 600)
        if let file {
            try csv.write(to: URL(fileURLWithPath: file))
        } else {
            FileHandle.standardOutput.write(csv)
        }
    }

    func createCodes(_ args: inout Arguments) async throws {
        let code = try args.word(0, "the coupon's code")
        guard let count = try args.int("count") else { throw UsageError("codes create needs --count N") }
        let prefix = args.option("prefix")
        let file = args.option("output")
        try args.checkNoneLeft()
        let made = try await client.createCodes(of: code, count: count, prefix: prefix, timeout: 120)
        try await saveCodes(of: made.code, to: file, note: "made \(made.count) codes of \(made.code)")
    }

    func downloadCodes(_ args: inout Arguments) async throws {
        let code = try args.word(0, "the coupon's code")
        let file = args.option("output")
        try args.checkNoneLeft()
        try await saveCodes(of: code.uppercased(), to: file, note: "downloaded the codes of \(code.uppercased())")
    }

    func createKey(_ args: inout Arguments) async throws {
        let name = try args.required("name")
        let role = try enumValue(Role.self, try args.required("role"), "role")
        let mode = try args.option("mode").map { try enumValue(Mode.self, $0, "mode") }
        try args.checkNoneLeft()
        let k = try await client.createAPIKey(name: name, role: role, mode: mode)
        try output.one(
            k,
            fields: [
                ("id", k.id.uuidString), ("name", k.name), ("role", k.role.rawValue), ("mode", k.mode.rawValue),
                ("key", k.key), ("", "the key is shown once: keep it safe")
            ])
    }

    func listKeys(_ args: inout Arguments) async throws {
        try await list(&args, keyColumns) { try await client.apiKeys(limit: $0, cursor: $1) }
    }

    func revokeKey(_ args: inout Arguments) async throws {
        let id = try uuid(args.word(0, "the key's id"))
        try args.checkNoneLeft()
        try await client.revokeAPIKey(id)
        try output.done("revoked \(id.uuidString)", ["id": id.uuidString])
    }

    func createWebhook(_ args: inout Arguments) async throws {
        let url = try args.required("url")
        let events = args.list("events") ?? ["coupon.redeemed", "redemption.failed"]
        try args.checkNoneLeft()
        let w = try await client.createWebhook(url: url, events: events)
        try output.one(
            w,
            fields: [
                ("id", w.id.uuidString), ("url", w.url), ("events", w.events.joined(separator: ",")),
                ("mode", w.mode.rawValue), ("secret", w.secret), ("", "the secret is shown once: keep it safe")
            ])
    }

    func listWebhooks(_ args: inout Arguments) async throws {
        try await list(&args, webhookColumns) { try await client.webhooks(limit: $0, cursor: $1) }
    }

    func deleteWebhook(_ args: inout Arguments) async throws {
        let id = try uuid(args.word(0, "the webhook's id"))
        try args.checkNoneLeft()
        try await client.deleteWebhook(id)
        try output.done("deleted \(id.uuidString)", ["id": id.uuidString])
    }

    func testWebhook(_ args: inout Arguments) async throws {
        let id = try uuid(args.word(0, "the webhook's id"))
        try args.checkNoneLeft()
        let d = try await client.testWebhook(id)
        try output.one(d, fields: deliveryColumns.map { ($0.0, $0.1(d)) })
    }

    func retryDelivery(_ args: inout Arguments) async throws {
        let id = try uuid(args.word(0, "the webhook's id"))
        let delivery = try uuid(args.word(1, "the delivery's id"))
        try args.checkNoneLeft()
        let d = try await client.retryDelivery(delivery, of: id)
        try output.one(d, fields: deliveryColumns.map { ($0.0, $0.1(d)) })
    }

    func listDeliveries(_ args: inout Arguments) async throws {
        let id = try uuid(args.word(0, "the webhook's id"))
        try await list(&args, deliveryColumns) { try await client.deliveries(of: id, limit: $0, cursor: $1) }
    }

    func createPlan(_ args: inout Arguments) async throws {
        let productId = try args.required("product-id"), name = try args.required("name")
        let subscription = args.option("app-store-subscription")
        try args.checkNoneLeft()
        let p = try await client.createPlan(productId: productId, name: name, appStoreSubscriptionId: subscription)
        try output.one(p, fields: planColumns.map { ($0.0, $0.1(p)) })
    }

    func listPlans(_ args: inout Arguments) async throws {
        try await list(&args, planColumns) { try await client.plans(limit: $0, cursor: $1) }
    }

    func getPlan(_ args: inout Arguments) async throws {
        let productId = try args.word(0, "the plan's product id")
        try args.checkNoneLeft()
        let p = try await client.plan(productId)
        try output.one(p, fields: planColumns.map { ($0.0, $0.1(p)) })
    }

    // MARK: - Members and the audit log

    func listMembers(_ args: inout Arguments) async throws {
        try await list(&args, memberColumns) { try await client.members(limit: $0, cursor: $1) }
    }

    func inviteMember(_ args: inout Arguments) async throws {
        let email = try args.required("email")
        let role = try enumValue(Role.self, try args.required("role"), "role")
        try args.checkNoneLeft()
        let i = try await client.inviteMember(email: email, role: role)
        try output.one(
            i,
            fields: [
                ("id", i.id.uuidString), ("email", i.email), ("role", i.role.rawValue),
                ("expires", Output.time(i.expiresAt)), ("mailed", String(i.mailed)), ("invite url", i.inviteUrl),
                ("", "the invite URL is shown once: pass it on to \(i.email)")
            ])
    }

    func updateMember(_ args: inout Arguments) async throws {
        let id = try uuid(args.word(0, "the member's id"))
        let role = try enumValue(Role.self, try args.required("role"), "role")
        try args.checkNoneLeft()
        let m = try await client.updateMember(id, role: role)
        try output.one(m, fields: memberColumns.map { ($0.0.lowercased(), $0.1(m)) })
    }

    func removeMember(_ args: inout Arguments) async throws {
        let id = try uuid(args.word(0, "the member's id"))
        try args.checkNoneLeft()
        try await client.removeMember(id)
        try output.done("removed \(id.uuidString)", ["id": id.uuidString])
    }

    func listInvites(_ args: inout Arguments) async throws {
        try await list(&args, inviteColumns) { try await client.memberInvites(limit: $0, cursor: $1) }
    }

    func revokeInvite(_ args: inout Arguments) async throws {
        let id = try uuid(args.word(0, "the invitation's id"))
        try args.checkNoneLeft()
        try await client.revokeMemberInvite(id)
        try output.done("revoked \(id.uuidString)", ["id": id.uuidString])
    }

    func listAudit(_ args: inout Arguments) async throws {
        let actor = try args.option("actor").map { try uuid($0) }
        let filter = AuditFilter(
            objectType: args.option("object-type"), objectId: args.option("object-id"), actorId: actor,
            action: args.option("action"))
        try await list(&args, auditColumns) { try await client.auditLog(filter, limit: $0, cursor: $1) }
    }

    // MARK: - Profiles

    /// Reads a key, checks it with one read the least role may make, and saves it in the profile.
    func login(_ args: inout Arguments) async throws {
        let explicit = args.option("api-url")
        let fromStdin = args.flag("key-stdin")
        try args.checkNoneLeft()
        try Credentials.checkName(profileName)
        var saved = try Credentials.load(environment)
        guard let urlText = explicit ?? url ?? setting("REDEEM_URL") ?? saved.profiles[profileName]?.apiURL else {
            throw UsageError("give the gateway's address with --api-url URL (or REDEEM_URL)")
        }
        guard let gateway = URL(string: urlText), gateway.scheme == "http" || gateway.scheme == "https",
            gateway.host != nil
        else {
            throw UsageError("--api-url must be an http or https address, not \(urlText)")
        }
        let key = try KeyReader.read(prompt: !fromStdin)
        do {
            _ = try await OperatorClient(baseURL: gateway, apiKey: key).coupons(limit: 1)
        } catch let e as RedeemError where e.status == 401 {
            throw Refusal("the server refused this key (\(e.code)): nothing saved")
        }
        saved.profiles[profileName] = Credentials.Profile(apiURL: urlText, apiKey: key)
        try saved.save()
        let shown = Credentials.masked(key)
        try output.done(
            "logged in: profile \(profileName), \(urlText), key \(shown), saved in \(saved.file.path)",
            ["profile": profileName, "apiUrl": urlText, "key": shown, "file": saved.file.path])
    }

    func logout(_ args: inout Arguments) async throws {
        try args.checkNoneLeft()
        var saved = try Credentials.load(environment)
        guard saved.profiles.removeValue(forKey: profileName) != nil else {
            throw Refusal("no profile \(profileName) in \(saved.file.path)")
        }
        try saved.save()
        try output.done("logged out: profile \(profileName) removed", ["profile": profileName])
    }

    struct ProfileRow: Encodable {
        let name: String
        let apiUrl: String
        let key: String
    }

    func listProfiles(_ args: inout Arguments) async throws {
        try args.checkNoneLeft()
        let saved = try Credentials.load(environment)
        let rows = saved.profiles.sorted { $0.key < $1.key }.map { name, p in
            ProfileRow(name: name, apiUrl: p.apiURL, key: Credentials.masked(p.apiKey))
        }
        try output.list(
            rows, nextCursor: nil, columns: [("PROFILE", \.name), ("API URL", \.apiUrl), ("KEY", \.key)])
    }

    // MARK: - Unique codes

    /// Takes the coupon's codes CSV (once: the server deletes it) into `file`, readable by its
    /// owner only, or onto standard output.
    func saveCodes(of code: String, to file: String?, note: String) async throws {
        let csv = try await client.takeCodesCSV(of: code, timeout: 120)
        guard let file else {
            FileHandle.standardOutput.write(csv)
            return
        }
        let url = URL(fileURLWithPath: file)
        guard FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw UsageError("can't write \(file)")
        }
        try csv.write(to: url)
        let count = max(0, csv.split(separator: UInt8(ascii: "\n")).count - 1)
        try output.done("\(note): \(file)", ["code": code, "count": String(count), "output": file])
    }

    // MARK: - Coupons

    func createCoupon(_ args: inout Arguments) async throws {
        let code = try args.required("code")
        let kind = try enumValue(CouponKind.self, try args.required("kind"), "kind")
        var input = CouponInput(code: code, kind: kind, duration: try duration(try args.required("duration")))
        input.percentOff = try args.int("percent-off")
        input.amountOff = try args.option("amount-off").map(money)
        input.periodCount = try args.int("period-count")
        input.entitlementId = args.option("entitlement")
        input.productIds = args.list("products")
        input.platforms = try args.list("platforms")?.map { try enumValue(Platform.self, $0, "platforms") }
        input.startsAt = try args.date("starts-at")
        input.expiresAt = try args.date("expires-at")
        input.maxRedemptions = try args.int("max-redemptions")
        if args.flag("new-customers-only") { input.newCustomersOnly = true }
        if args.flag("allow-in-app") { input.allowInApp = true }
        if args.flag("inactive") { input.active = false }
        let dryRun = args.flag("dry-run")
        try args.checkNoneLeft()
        let coupon = try await client.createCoupon(input, dryRun: dryRun)
        try show(coupon, note: dryRun ? "dry run: checked, not saved" : nil)
    }

    func updateCoupon(_ args: inout Arguments) async throws {
        let code = try args.word(0, "the coupon's code")
        var patch = CouponPatch(active: try args.bool("active"))
        if let cap = args.option("max-redemptions") {
            guard cap == "none" || Int(cap) != nil else {
                throw UsageError("--max-redemptions must be a whole number or none")
            }
            patch.maxRedemptions = cap == "none" ? .remove : .set(Int(cap)!)
        }
        if let end = args.option("expires-at") {
            patch.expiresAt = end == "none" ? .remove : .set(try Arguments.parseDate(end, name: "expires-at"))
        }
        try args.checkNoneLeft()
        guard patch != CouponPatch() else {
            throw UsageError("nothing to change: give --active, --max-redemptions or --expires-at")
        }
        try show(try await client.updateCoupon(code, patch))
    }

    func show(_ c: Coupon, note: String? = nil) throws {
        var fields: [(String, String)] = [
            ("code", c.code), ("kind", c.kind.rawValue), ("gives", c.discount), ("active", String(c.active)),
            ("mode", c.mode.rawValue),
            ("uses", c.uses), ("reserved", String(c.reservedCount)), ("remaining", c.remaining.map(String.init) ?? "∞"),
            ("platforms", c.platforms.map(\.rawValue).joined(separator: ",")),
            ("products", c.productIds.isEmpty ? "any" : c.productIds.joined(separator: ",")),
            ("entitlement", c.entitlementId ?? ""), ("starts", Output.time(c.startsAt)),
            ("expires", Output.time(c.expiresAt)),
            ("new customers only", String(c.newCustomersOnly)), ("created", Output.time(c.createdAt))
        ]
        if c.kind == .freePeriod, let inApp = c.allowInApp,
            c.storeOffers?.contains(where: { $0.store == "appStore" }) != true
        {
            fields.append(("in the iOS app", inApp ? "allowed" : "no: redeemed on the web"))
        }
        for l in c.storeLimits { fields.append(("store limit", "\(l.store) \(l.limit) \(l.value)")) }
        for o in c.storeOffers ?? [] {
            let code = o.customCode.map { " \($0)" } ?? ""
            fields.append(
                ("store offer", "\(o.store) \(o.productId)\(code) \(o.state)\(o.message.map { ": \($0)" } ?? "")"))
        }
        if let note { fields.append(("", note)) }
        try output.one(c, fields: fields)
    }

    // MARK: - Lists

    /// A page (`--limit`, `--cursor`) or every page (`--all`, in pages of `--limit`), printed.
    func list<T: Codable & Sendable>(
        _ args: inout Arguments, _ columns: [(String, (T) -> String)],
        _ page: (Int?, String?) async throws -> Page<T>
    ) async throws {
        let limit = try args.int("limit"), cursor = args.option("cursor")
        try args.checkNoneLeft()
        if args.flag("all") {
            // Pages of `--limit` items (100 unless given), each cursor followed.
            let items = try await client.all { try await page(limit ?? 100, $0) }
            try output.list(items, nextCursor: nil, columns: columns)
        } else {
            let p = try await page(limit, cursor)
            try output.list(p.data, nextCursor: p.nextCursor, columns: columns)
        }
    }

    var couponColumns: [(String, (Coupon) -> String)] {
        [
            ("CODE", \.code), ("KIND", \.kind.rawValue), ("GIVES", \.discount), ("USES", \.uses),
            ("ACTIVE", { String($0.active) }),
            ("EXPIRES", { Output.time($0.expiresAt) }), ("CREATED", { Output.time($0.createdAt) })
        ]
    }

    var redemptionColumns: [(String, (Redemption) -> String)] {
        [
            ("ID", { $0.redemptionId.uuidString }), ("CODE", \.code), ("STATUS", \.status.rawValue),
            ("PLATFORM", \.platform.rawValue),
            ("PRODUCT", { $0.productId ?? "" }), ("PAID", { $0.pricePaid?.text ?? "" }),
            ("SANDBOX", { String($0.sandbox) }),
            ("APP USER", { $0.appUserId ?? "" }), ("RESERVED", { Output.time($0.reservedAt) }),
            ("COMPLETED", { Output.time($0.completedAt) })
        ]
    }

    var keyColumns: [(String, (APIKey) -> String)] {
        [
            ("ID", { $0.id.uuidString }), ("PREFIX", \.prefix), ("NAME", \.name), ("ROLE", \.role.rawValue),
            ("MODE", \.mode.rawValue),
            ("CREATED", { Output.time($0.createdAt) }), ("LAST USED", { Output.time($0.lastUsedAt) })
        ]
    }

    var webhookColumns: [(String, (WebhookEndpoint) -> String)] {
        [
            ("ID", { $0.id.uuidString }), ("URL", \.url), ("EVENTS", { $0.events.joined(separator: ",") }),
            ("ACTIVE", { String($0.active) }),
            ("MODE", \.mode.rawValue), ("CREATED", { Output.time($0.createdAt) })
        ]
    }

    var deliveryColumns: [(String, (WebhookDelivery) -> String)] {
        [
            ("ID", { $0.id.uuidString }), ("TYPE", \.type), ("STATUS", \.status), ("ATTEMPTS", { String($0.attempts) }),
            ("LAST CODE", { $0.lastStatusCode.map(String.init) ?? "" }), ("ERROR", { $0.lastError ?? "" }),
            ("CREATED", { Output.time($0.createdAt) }), ("NEXT", { Output.time($0.nextAttemptAt) })
        ]
    }

    var planColumns: [(String, (Plan) -> String)] {
        [
            ("PRODUCT", \.productId), ("NAME", \.name), ("APP STORE", { $0.appStore?.subscriptionId ?? "" }),
            ("PLAY", { $0.playStore?.productId ?? "" }), ("MODE", \.mode.rawValue),
            ("CREATED", { Output.time($0.createdAt) })
        ]
    }

    var memberColumns: [(String, (Member) -> String)] {
        [
            ("ID", { $0.id.uuidString }), ("EMAIL", \.email), ("ROLE", \.role.rawValue),
            ("TOTP", { String($0.totpEnabled) }), ("CREATED", { Output.time($0.createdAt) })
        ]
    }

    var inviteColumns: [(String, (MemberInvite) -> String)] {
        [
            ("ID", { $0.id.uuidString }), ("EMAIL", \.email), ("ROLE", \.role.rawValue),
            ("CREATED", { Output.time($0.createdAt) }), ("EXPIRES", { Output.time($0.expiresAt) })
        ]
    }

    var auditColumns: [(String, (AuditEntry) -> String)] {
        [
            ("TIME", { Output.time($0.createdAt) }), ("ACTION", \.action),
            ("OBJECT", { "\($0.objectType) \($0.objectId)" }),
            ("ACTOR", { $0.actor.map { "\($0.type) \($0.id.uuidString)" } ?? "" }), ("REQUEST", { $0.requestId ?? "" })
        ]
    }

    // MARK: - Values

    func enumValue<E: RawRepresentable & CaseIterable>(_ type: E.Type, _ text: String, _ name: String) throws -> E
    where E.RawValue == String {
        guard let v = E(rawValue: text) else {
            throw UsageError(
                "--\(name) must be one of \(E.allCases.map(\.rawValue).filter { $0 != "unknown" }.joined(separator: ", ")), not \(text)"
            )
        }
        return v
    }

    /// `1 month`, `1month` or `month` (one).
    func duration(_ text: String) throws -> CouponDuration {
        let digits = text.prefix { $0.isNumber }
        let unit = text.dropFirst(digits.count).trimmingCharacters(in: .whitespaces).lowercased()
        let singular = unit.hasSuffix("s") ? String(unit.dropLast()) : unit
        guard ["day", "week", "month", "year"].contains(singular) else {
            throw UsageError(
                "--duration must be a count and a unit (day, week, month, year), such as \"1 month\", not \(text)")
        }
        return CouponDuration(unit: singular, count: digits.isEmpty ? 1 : Int(digits) ?? 0)
    }

    /// `4.99 EUR` or `4.99EUR`.
    func money(_ text: String) throws -> Money {
        let amount = text.prefix { $0.isNumber || $0 == "." }
        let currency = text.dropFirst(amount.count).trimmingCharacters(in: .whitespaces).uppercased()
        guard !amount.isEmpty, currency.count == 3 else {
            throw UsageError("--amount-off must be an amount and a currency, such as \"4.99 EUR\"")
        }
        return Money(amount: String(amount), currency: currency)
    }

    func uuid(_ text: String) throws -> UUID {
        guard let id = UUID(uuidString: text) else { throw UsageError("not an id: \(text)") }
        return id
    }
}

/// The client, made once on first use (a command that fails on its options never reads the
/// credentials file).
final class Connection: @unchecked Sendable {
    private let lock = NSLock()
    private var made: OperatorClient?

    func get(_ make: () throws -> OperatorClient) throws -> OperatorClient {
        lock.lock()
        defer { lock.unlock() }
        if let made { return made }
        let client = try make()
        made = client
        return client
    }
}
