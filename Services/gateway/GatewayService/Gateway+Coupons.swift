import Core
import Foundation
import HTTP

/// Routes of docs/api.md's route table: coupons for operators, validate and redeem for users.
extension Gateway {
    /// A change to a coupon: fields left out stay; `maxRedemptions`, `expiresAt`, `name` or
    /// `metadata` sent as `null` is removed (no cap, no end, no name, no keys); `metadata` is merged
    /// into the coupon's, a key with an empty value removed; `active` can't be null.
    struct PatchBody: APIBody {
        var active: Bool?
        var maxRedemptions: Int?
        var expiresAt: Date?
        var name: String?
        var metadata: [String: String]?
        var removing: [String] = []
        private enum Keys: String, CodingKey { case active, maxRedemptions, expiresAt, name, metadata }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            try c.refuseNull(.active, as: Bool.self)
            active = try c.decodeIfPresent(Bool.self, forKey: .active)
            maxRedemptions = try c.decodeIfPresent(Int.self, forKey: .maxRedemptions)
            expiresAt = try c.decodeIfPresent(Date.self, forKey: .expiresAt)
            name = try c.decodeIfPresent(String.self, forKey: .name)
            metadata = try c.decodeIfPresent([String: String].self, forKey: .metadata)
            removing = try c.sentNull([.maxRedemptions, .expiresAt, .name, .metadata])
        }

        static let schemaName: String? = "CouponPatch"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "maxRedemptions": JSONSchema.Rule.range(1...Coupons.largestCap) + [.note("null removes the cap")],
            "expiresAt": [.note("null removes the end")],
            "name": [.maxLength(CouponMetadata.maxNameLength), .note("null removes the name")],
            "metadata": [
                .note(
                    "merged into the coupon's (up to 50 keys of up to 40 characters, values up to 500); "
                        + "an empty value removes its key, null removes every key")
            ],
        ]
    }

    /// `environment` of validate and redeem: which coupon of a code both modes have an end user
    /// reaches (`Coupons.preferredMode`).
    enum StoreEnvironment: String, WireEnum {
        case production, sandbox
    }

    static let environmentRules: [JSONSchema.Rule] = [
        .oneOf(StoreEnvironment.self),
        .note(
            "production (default) reaches the live coupon of a code both modes have, sandbox the test one; either reaches the only one there is"
        )
    ]

    /// `platform` is read as text, so that a wrong one is answered naming the platforms there are.
    struct ValidateBody: APIBody {
        static let schemaName: String? = "ValidateInput"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "platform": [.oneOf(Platform.self)], "environment": environmentRules
        ]
        var code: String
        var platform: String?
        var environment: String?
        /// The plan the client means to buy, when it knows (as redeem's `productId`).
        var productId: String?
    }
    struct RedeemBody: APIBody {
        static let schemaName: String? = "RedeemInput"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "platform": [.oneOf(Platform.self)], "environment": environmentRules
        ]
        var code: String
        var productId: String?
        var platform: String
        var environment: String?
    }

    /// A body's platform, or 422 on `platform` naming the ones there are.
    static func platform(_ text: String) throws -> Platform {
        guard let p = Platform(rawValue: text) else {
            throw HTTPError.invalid("platform", "platform must be \(Platform.listed)")
        }
        return p
    }

    static let statsRoutes: [APIRoute] = [
        .route(
            .get, "/v1/stats/redemptions",
            "Completed redemptions per day, platform and coupon (the dashboard's overview)",
            access: .appKey(.readonly), query: [statsDays], answers: [200: .json(RedemptionStats.self)], errors: [422],
            handle: Gateway.redemptionStats)
    ]

    static let statsDays: QueryParameter = {
        var s = JSONSchema.integer
        s.minimum = 1
        s.maximum = 366
        s.defaultValue = 30
        return QueryParameter(name: "days", schema: s, description: "how many days, today (UTC) the last")
    }()

    func redemptionStats(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        var days = 30
        if let text = req.query["days"] {
            guard let n = Int(text), (1...366).contains(n) else {
                throw HTTPError.invalid("days", "days must be a whole number from 1 to 366")
            }
            days = n
        }
        return .json(200, try await coupons.request(Coupons.Stats(mode: key.mode, app: key.app, days: days)))
    }

    static let couponRoutes: [APIRoute] = [
        .route(
            .post, "/v1/coupons", "Create a coupon", access: .appKey(.admin),
            query: [.flag("dryRun", "validate and show limits without saving")],
            answers: [200: .json(CouponView.self), 201: .json(CouponView.self)], errors: [409, 422],
            handle: Gateway.createCoupon),
        // Operators reach only their key's mode's coupons, redemptions and exports.
        .route(
            .get, "/v1/coupons", "List coupons, newest first", access: .appKey(.readonly),
            query: [.flag("active", "only active or inactive coupons")] + QueryParameter.page,
            answers: [200: .json(Page<CouponView>.self)], errors: [422], handle: Gateway.listCoupons),
        .route(
            .get, "/v1/coupons/{code}", "One coupon with its counts", access: .appKey(.readonly),
            answers: [200: .json(CouponView.self)], errors: [404], handle: Gateway.getCoupon),
        .route(
            .patch, "/v1/coupons/{code}", "Change a coupon", access: .appKey(.admin),
            answers: [200: .json(CouponView.self)], errors: [404, 422], handle: Gateway.changeCoupon),
        .route(
            .delete, "/v1/coupons/{code}", "Deactivate a coupon", access: .appKey(.admin),
            answers: [204: .empty], errors: [404], handle: Gateway.deactivateCoupon),
        .route(
            .get, "/v1/coupons/{code}/redemptions",
            "A coupon's redemptions (JSON pages, or all as CSV with Accept: text/csv)",
            access: .appKey(.readonly), query: QueryParameter.page,
            answers: [200: .json(Page<RedemptionView>.self)], errors: [404, 422], handle: Gateway.couponRedemptions),
        .route(
            .post, "/v1/coupons/validate", "Check a code", access: .user,
            answers: [200: .json(Coupons.Validate.Answer.self)], errors: [422, 429], handle: Gateway.validate),
        .route(
            .post, "/v1/redemptions", "Redeem a code", access: .user,
            answers: [200: .json(RedemptionView.self), 201: .json(RedemptionView.self)], errors: [422, 429],
            handle: Gateway.redeem),
        .route(
            .get, "/v1/redemptions/{id}", "A redemption; with wait, long-polls until it completes or fails",
            access: .userOrKey,
            query: [
                QueryParameter(
                    name: "wait",
                    schema: {
                        var s = JSONSchema.integer
                        s.minimum = 0
                        return s
                    }(),
                    description: "seconds to wait (at most 30)")
            ],
            answers: [200: .json(RedemptionView.self)], errors: [404, 422], handle: Gateway.getRedemption),
        .route(
            .get, "/v1/me/redemptions", "The user's redemptions, newest first", access: .user,
            query: QueryParameter.page,
            answers: [200: .json(Page<RedemptionView>.self)], errors: [422], handle: Gateway.myRedemptions)
    ]

    func createCoupon(
        _ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<CouponInput>
    ) async throws -> HTTPResponse {
        let dryRun = try Query.bool(req, "dryRun") ?? false
        let input = try body.read()
        let coupon = try await coupons.request(
            Coupons.Create(input: input, mode: key.mode, app: key.app, dryRun: dryRun).by(key.actor))
        return .json(dryRun ? 200 : 201, coupon)
    }

    func listCoupons(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let page = try await coupons.request(
            Coupons.List(
                active: try Query.bool(req, "active"), limit: try Query.limit(req),
                cursor: req.query["cursor"], mode: key.mode, app: key.app))
        return .json(200, page)
    }

    func getCoupon(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        .json(200, try await coupons.request(Coupons.Get(code: req.pathParameters["code"] ?? "", mode: key.mode,
            app: key.app)))
    }

    func changeCoupon(
        _ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<PatchBody>
    ) async throws -> HTTPResponse {
        let b = try body.read()
        return .json(
            200,
            try await coupons.request(
                Coupons.Patch(
                    code: req.pathParameters["code"] ?? "", mode: key.mode, app: key.app, active: b.active,
                    maxRedemptions: b.maxRedemptions, expiresAt: b.expiresAt,
                    removing: b.removing.isEmpty ? nil : b.removing, name: b.name, metadata: b.metadata
                ).by(key.actor)))
    }

    func deactivateCoupon(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        _ = try await coupons.request(
            Coupons.Patch(
                code: req.pathParameters["code"] ?? "", mode: key.mode, app: key.app, active: false,
                maxRedemptions: nil, expiresAt: nil
            ).by(key.actor))
        return .noContent()
    }

    func couponRedemptions(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let code = req.pathParameters["code"] ?? ""
        if req.header("accept")?.lowercased().contains("text/csv") == true {
            return try await exportCSV(code: code, mode: key.mode, app: key.app)
        }
        let page = try await coupons.request(
            Coupons.Redemptions(code: code, mode: key.mode, app: key.app, limit: try Query.limit(req),
                cursor: req.query["cursor"]))
        return .json(200, page)
    }

    func validate(
        _ req: HTTPRequest, _ user: Authenticator.User, _ body: Incoming<ValidateBody>
    ) async throws -> HTTPResponse {
        try abuse.checkCodes(ip: req.clientAddress, account: user.account)
        let b = try body.read()
        let platform = try b.platform.map(Self.platform)
        let sandbox = try Self.sandbox(environment: b.environment)
        // A unique code with a typing error is refused here, looked up nowhere.
        if UniqueCode.read(b.code) == .mistyped {
            abuse.invalidCode(ip: req.clientAddress, account: user.account)
            return .json(
                200, Coupons.Validate.Answer(valid: false, reason: .mistyped, coupon: nil, eligibleProductIds: []))
        }
        var request = Coupons.Validate(
            accountId: user.account, code: b.code, platform: platform, sandbox: sandbox, productId: b.productId,
            app: user.app)
        let batch = Coupons.batchKey(code: b.code, sandbox: sandbox, app: user.app)
        var a = try await validations.submit(Queued(request), key: batch)
        if a.asksPlayOwnership {
            // Valid unless the account holds a plan on Play already: asked again only when it holds any.
            let owned = await playSubscriptions(of: user.appUserId, app: user.app)
            if !owned.isEmpty {
                request.playOwned = owned
                a = try await validations.submit(Queued(request), key: batch)
            }
        }
        if a.reason == .notFound { abuse.invalidCode(ip: req.clientAddress, account: user.account) }
        if a.reason == .webOnly {
            var full = try a.answer.decoded()
            full.redeemUrl = Self.redeemPageURL(req, code: b.code)
            return .json(200, full)
        }
        return .json(200, a.answer)
    }

    func redeem(
        _ req: HTTPRequest, _ user: Authenticator.User, _ body: Incoming<RedeemBody>
    ) async throws -> HTTPResponse {
        try abuse.checkCodes(ip: req.clientAddress, account: user.account)
        let b = try body.read()
        let platform = try Self.platform(b.platform)
        let sandbox = try Self.sandbox(environment: b.environment)
        if UniqueCode.read(b.code) == .mistyped {
            abuse.invalidCode(ip: req.clientAddress, account: user.account)
            throw HTTPError(422, RefusalReason.mistyped.rawValue, RefusalReason.mistyped.sentence)
        }
        var request = Coupons.Redeem(
            accountId: user.account, appUserId: user.appUserId, code: b.code, productId: b.productId,
            platform: platform, sandbox: sandbox, app: user.app)
        let batch = Coupons.batchKey(code: b.code, sandbox: sandbox, app: user.app)
        var answer = try await reservations.submit(Queued(request), key: batch)
        if answer.asksPlayOwnership == true {
            request.playOwned = await playSubscriptions(of: user.appUserId, app: user.app)
            answer = try await reservations.submit(Queued(request), key: batch)
        }
        if let reason = answer.refusal {
            if reason == .notFound { abuse.invalidCode(ip: req.clientAddress, account: user.account) }
            throw HTTPError(
                422, reason.rawValue, reason.sentence,
                redeemUrl: reason == .webOnly ? Self.redeemPageURL(req, code: b.code) : nil)
        }
        guard let redemption = answer.redemption else { throw ServiceError.internal }
        if sellsThroughStripe(in: user.app), platform == .web {
            let handed = try await withStripeCheckout(try redemption.decoded(), req: req, user: user)
            return .json(answer.created ? 201 : 200, handed)
        }
        return .json(answer.created ? 201 : 200, redemption)
    }

    /// The redeem page with `code` filled in, at this gateway's address as the caller reached it:
    /// where an iOS app sends its user for a `webOnly` coupon.
    static func redeemPageURL(_ req: HTTPRequest, code: String) -> String {
        var query = URLComponents()
        query.queryItems = [URLQueryItem(name: "code", value: Coupons.normalizeCode(code))]
        return origin(req) + "/redeem?" + (query.percentEncodedQuery ?? "")
    }

    /// How long validate and redeem wait for grants' store view before going on without it.
    static let playOwnershipWait: Duration = .seconds(3)

    /// The Google Play subscription products the user's holder has (docs/stores.md,
    /// "`alreadyOwned`"): grants' store view, RevenueCat's subscriber under `revenuecat` (read for
    /// at most `StoreViews.readTimeout`, kept 30 s), none under `local`. None as well when the view
    /// can't be had within `playOwnershipWait`: then nothing is refused for it, and Play's own
    /// `ITEM_ALREADY_OWNED`, with the app's release of the use, still stands behind the purchase.
    /// Another app's are read from its own RevenueCat project (docs/apps.md).
    func playSubscriptions(of appUserId: String, app: UUID) async -> [String] {
        do {
            return try await grants.request(
                Grants.StoreView(appUserId: appUserId, fresh: false, app: app == DefaultApp.id ? nil : app),
                timeout: Self.playOwnershipWait
            )
            .playSubscriptions ?? []
        } catch {
            logger.debug("store view not read for alreadyOwned; going on without it", ["error": "\(error)"])
            return []
        }
    }

    /// The owner, or an operator key of the redemption's coupon's app and mode; a member reads its
    /// own, or as an operator those of its `Redeem-Mode` and `Redeem-App` where it has a role.
    func getRedemption(_ req: HTTPRequest, _ caller: Principal) async throws -> HTTPResponse {
        let reader: RedemptionReader
        var member: (account: UUID, session: UUID, role: Role?)?
        switch caller {
        case .user(let account, _, let session, let role):
            reader = .owner(account)
            member = (account, session, role)
        case .apiKey(_, _, let mode, let app): reader = .apiKey(mode, app)
        }
        let wait = try Query.wait(req)
        let id = try req.id(or: "no such redemption")
        do {
            return .json(200, try await redemption(id, for: reader, wait: wait))
        } catch let e as ServiceError where e.code == .notFound && member != nil {
            // Not its own: a member reads it as an operator of the app it names, with a role there.
            guard let member,
                case (_?, let app) = try await auth.memberRole(
                    req, account: member.account, session: member.session, claimed: member.role)
            else { throw e }
            let asOperator = RedemptionReader.apiKey(try Authenticator.memberMode(req), app)
            return .json(200, try await redemption(id, for: asOperator, wait: wait))
        }
    }

    func myRedemptions(_ req: HTTPRequest, _ user: Authenticator.User) async throws -> HTTPResponse {
        let page = try await coupons.request(
            Coupons.MyRedemptions(
                accountId: user.account, limit: try Query.limit(req), cursor: req.query["cursor"], app: user.app))
        return .json(200, page)
    }

    /// `environment` of validate and redeem: `production` (default) or `sandbox`.
    static func sandbox(environment: String?) throws -> Bool {
        guard let e = StoreEnvironment(rawValue: environment ?? StoreEnvironment.production.rawValue) else {
            throw HTTPError.invalid(
                "environment", "environment must be \(StoreEnvironment.rawValues.joined(separator: " or "))")
        }
        return e == .sandbox
    }

    /// Who reads a redemption: the account that owns it, or an operator key, which reads those of
    /// its own mode's coupons.
    enum RedemptionReader {
        case owner(UUID)
        case apiKey(Mode, UUID)

        func request(_ id: UUID) -> Coupons.GetRedemption {
            switch self {
            case .owner(let account): Coupons.GetRedemption(id: id, accountId: account)
            case .apiKey(let mode, let app): Coupons.GetRedemption(id: id, mode: mode, app: app)
            }
        }
    }

    /// A redemption as it is now, or once it completes or fails when `wait` seconds are given.
    func redemption(_ id: UUID, for reader: RedemptionReader, wait: Int) async throws -> RedemptionView {
        let current = try await coupons.request(reader.request(id))
        guard wait > 0, !current.status.isSettled else { return current }
        let coupons = self.coupons
        _ = await waiters.wait(for: id, seconds: wait) {
            let now = try? await coupons.request(reader.request(id))
            return now.map { !$0.status.isSettled } ?? true
        }
        return try await coupons.request(reader.request(id))
    }

    /// Streams every redemption of a coupon as CSV, a page at a time (never all in memory).
    func exportCSV(code: String, mode: Mode, app: UUID) async throws -> HTTPResponse {
        // The first page is fetched before answering, so an unknown coupon is a 404, not a broken stream.
        let first = try await coupons.request(
            Coupons.Redemptions(
                code: code, mode: mode, app: app, limit: Coupons.Redemptions.maxLimit, cursor: nil, oldestFirst: true))
        let coupon = try await coupons.request(Coupons.Get(code: code, mode: mode, app: app))
        let client = coupons
        let logger = self.logger
        let filename = code.filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
        return .stream(
            200, contentType: "text/csv; charset=utf-8",
            headers: [("Content-Disposition", "attachment; filename=\"redemptions-\(filename).csv\"")]
        ) { stream in
            var page = first
            guard await stream.write(Data(RedemptionCSV.header.utf8)) else { return }
            while true {
                var text = ""
                for r in page.data { text += RedemptionCSV.row(r, of: coupon) }
                guard await stream.write(Data(text.utf8)) else { return }
                guard let next = page.nextCursor else { return }
                do {
                    page = try await client.request(
                        Coupons.Redemptions(
                            code: code, mode: mode, app: app, limit: Coupons.Redemptions.maxLimit, cursor: next,
                            oldestFirst: true))
                } catch {
                    logger.error("csv export stopped", ["error": String(describing: error)])
                    return
                }
            }
        }
    }
}

/// Query-string parameters (`limit`, yes-or-no flags, `wait`), with the rules docs/api.md gives.
enum Query {
    static func limit(_ req: HTTPRequest) throws -> Int {
        guard let text = req.query["limit"] else { return Keyset.defaultLimit }
        guard let n = Int(text), (1...Keyset.maxLimit).contains(n) else {
            throw HTTPError.invalid("limit", "limit must be a whole number from 1 to \(Keyset.maxLimit)")
        }
        return n
    }

    static func bool(_ req: HTTPRequest, _ name: String) throws -> Bool? {
        guard let text = req.query[name] else { return nil }
        switch text.lowercased() {
        case "true", "1": return true
        case "false", "0": return false
        default: throw HTTPError.invalid(name, "\(name) must be true or false")
        }
    }

    /// `wait` in seconds: at most 30 (larger is treated as 30); not a number is 422.
    static func wait(_ req: HTTPRequest) throws -> Int {
        guard let text = req.query["wait"] else { return 0 }
        // Digits only, however many: a number too large for Int is still "more than 30".
        guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            throw HTTPError.invalid("wait", "wait must be a whole number of seconds")
        }
        return min(Int(text) ?? 30, 30)
    }
}

/// The fields of a PATCH body: left out, a field stays; sent as null, it is removed, where it may be.
extension KeyedDecodingContainer {
    /// A field that can be changed but not removed: null is a 422 naming it.
    func refuseNull<T>(_ key: Key, as type: T.Type) throws {
        if contains(key), try decodeNil(forKey: key) {
            throw DecodingError.valueNotFound(
                type, .init(codingPath: [key], debugDescription: "\(key.stringValue) is null"))
        }
    }

    /// The names of `keys` sent as null.
    func sentNull(_ keys: [Key]) throws -> [String] {
        try keys.filter { try contains($0) && decodeNil(forKey: $0) }.map(\.stringValue)
    }
}
