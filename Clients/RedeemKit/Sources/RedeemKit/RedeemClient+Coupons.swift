import Foundation

/// What `redeemCoupon(_:productId:platform:)` came to: a reservation, or a refusal as a value.
public enum RedeemOutcome: Sendable, Equatable {
    /// A use is reserved (`isNew`), or the same account's existing redemption of the coupon was
    /// answered again (a retry or a double tap).
    case redeemed(Redemption, isNew: Bool)
    /// The code was refused; the error carries the reason and its sentence.
    case refused(CouponError)

    /// The redemption, when redeemed.
    public var redemption: Redemption? {
        if case .redeemed(let r, _) = self { return r }
        return nil
    }

    /// The refusal, when refused.
    public var refusal: CouponError? {
        if case .refused(let e) = self { return e }
        return nil
    }

    /// The redemption, or the refusal thrown, for callers that prefer `try`.
    public func get() throws -> Redemption {
        switch self {
        case .redeemed(let r, _): return r
        case .refused(let e): throw e
        }
    }
}

/// How awaiting a redemption ended.
public enum CouponCompletion: Sendable, Equatable {
    /// Completed: the account's entitlements as they are now, and the redemption.
    case completed([Entitlement], Redemption)
    /// The grant failed for good (`failureReason`); the use was given back.
    case failed(Redemption)
    /// A discount whose store purchase did not come in time; the use was given back.
    case released(Redemption)
    /// Not settled within the timeout: still pending, await it again later (it stays in
    /// `pendingRedemptions()`).
    case timedOut
}

extension RedeemClient {
    // MARK: - Coupons

    /// Checks a code for the signed-in user (`POST /v1/coupons/validate`). A refused code is a
    /// value, `valid == false` with its `reason`, never a thrown error; a guest gets
    /// `.notIdentified` without a request. On iOS, a free period answers `webOnly` with the
    /// `redeemUrl` to open in a browser (App Review 3.1.1), unless the operator allows it in apps.
    ///
    /// - Parameter productId: the plan the app means to buy, when it knows: the answer is then
    ///   about that plan (refused as redeem would refuse it), and on iOS `appStore.redemptionUrl`
    ///   is that plan's page, with its own code.
    public func validateCoupon(
        _ code: String, productId: String? = nil, platform: Platform? = nil
    ) async throws -> CouponValidation {
        struct Body: Encodable {
            var code: String
            var productId: String?
            var platform: Platform
            var environment: Environment
        }
        guard try currentSession() != nil else { return CouponValidation(valid: false, reason: .notIdentified) }
        let body = Body(
            code: code, productId: productId, platform: platform ?? configuration.platform,
            environment: configuration.environment)
        do {
            let request = try APIRequest("POST", "/v1/coupons/validate", json: body)
            return try await authorized(request).decode(CouponValidation.self)
        } catch let e as RedeemError where e.status == 401 || e.kind == .notSignedIn {
            return CouponValidation(valid: false, reason: .notIdentified)
        }
    }

    /// Redeems a code (`POST /v1/redemptions`): reserves one use and starts its grant. A retry
    /// answers the same redemption. A refusal is `.refused` with its reason; a guest gets
    /// `.notIdentified` without a request. A redemption not yet settled is remembered in the
    /// token store, so `pendingRedemptions()` finds it after a relaunch.
    ///
    /// - Parameter productId: the plan, needed for a discount that covers several.
    public func redeemCoupon(_ code: String, productId: String? = nil, platform: Platform? = nil) async throws -> RedeemOutcome {
        struct Body: Encodable { var code: String; var productId: String?; var platform: Platform; var environment: Environment }
        guard try currentSession() != nil else { return .refused(CouponError(.notIdentified)) }
        let body = Body(code: code, productId: productId, platform: platform ?? configuration.platform, environment: configuration.environment)
        let response: APIResponse
        do {
            response = try await authorized(try APIRequest("POST", "/v1/redemptions", json: body))
        } catch let e as RedeemError where e.status == 422 {
            // A refusal's code is its reason (`webOnly` carries the redeem page); any other 422 is a mistake.
            guard let refusal = e.refusal else { throw e }
            return .refused(refusal)
        } catch let e as RedeemError where e.status == 401 || e.kind == .notSignedIn {
            return .refused(CouponError(.notIdentified, serverMessage: e.message, requestId: e.requestId))
        }
        let redemption = try response.decode(Redemption.self)
        if !redemption.status.isSettled { try addPending(redemption.redemptionId) }
        return .redeemed(redemption, isNew: response.status == 201)
    }

    /// One redemption as it is now (`GET /v1/redemptions/{id}`).
    public func redemption(_ id: UUID) async throws -> Redemption {
        try await authorized(APIRequest("GET", "/v1/redemptions/\(id.uuidString.lowercased())")).decode(Redemption.self)
    }

    /// The user's redemptions, newest first (`GET /v1/me/redemptions`).
    public func myRedemptions(limit: Int? = nil, cursor: String? = nil) async throws -> Page<Redemption> {
        try await authorized(APIRequest("GET", "/v1/me/redemptions", query: pageQuery(limit: limit, cursor: cursor))).decode(Page<Redemption>.self)
    }

    // MARK: - Completion

    /// Waits until a redemption completes, fails or is released, for at most `timeout` seconds,
    /// with the long poll (`GET /v1/redemptions/{id}?wait=N`, up to 30 s a request). A dropped
    /// connection or a server that is briefly away is retried until the time is up. A settled
    /// redemption leaves `pendingRedemptions()`; a completed one reads the entitlements again
    /// (`entitlementUpdates` yields them).
    public func awaitCouponCompletion(redemptionId: UUID, timeout: TimeInterval = 60) async throws -> CouponCompletion {
        let deadline = Date().addingTimeInterval(timeout)
        let path = "/v1/redemptions/\(redemptionId.uuidString.lowercased())"
        var pause: TimeInterval = 0.2
        while true {
            try Task.checkCancellation()
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { return .timedOut }
            let wait = Int(min(30, remaining.rounded(.down)))
            let current: Redemption
            let asked = Date()
            do {
                current = try await authorized(APIRequest("GET", path, query: [URLQueryItem(name: "wait", value: String(wait))],
                                                          timeout: TimeInterval(wait) + configuration.timeout)).decode(Redemption.self)
            } catch let e as RedeemError where e.kind == .transport || e.kind == .timedOut || [502, 503, 504].contains(e.status ?? 0) {
                // The connection dropped (or the gateway restarted): ask again, from where we are.
                let nap = min(pause, max(deadline.timeIntervalSinceNow, 0))
                try await Task.sleep(nanoseconds: UInt64(nap * 1_000_000_000))
                pause = min(pause * 2, 5)
                continue
            } catch let e as RedeemError where e.status == 404 {
                try removePending(redemptionId)
                throw e
            }
            pause = 0.2
            guard current.status.isSettled else {
                if wait == 0 { return .timedOut }
                // A server that answered at once without settling (no long poll there) is not
                // asked again in a tight loop.
                let quick = 0.5 - Date().timeIntervalSince(asked)
                if quick > 0 { try await Task.sleep(nanoseconds: UInt64(min(quick, max(deadline.timeIntervalSinceNow, 0)) * 1_000_000_000)) }
                continue
            }
            try removePending(redemptionId)
            switch current.status {
            case .completed:
                let now = (try? await entitlements()) ?? current.entitlement.map {
                    [Entitlement(entitlementId: $0.entitlementId, expiresAt: $0.expiresAt, sandbox: current.sandbox, source: "redeem")]
                } ?? []
                return .completed(now, current)
            case .failed: return .failed(current)
            default: return .released(current)
            }
        }
    }

    /// The ids of redemptions made here and not yet seen settled, oldest first: after a
    /// relaunch, await each with `awaitCouponCompletion(redemptionId:timeout:)`.
    public func pendingRedemptions() throws -> [UUID] {
        guard let data = try configuration.tokenStore.data(forKey: Self.pendingKey) else { return [] }
        return (try? JSONDecoder().decode([UUID].self, from: data)) ?? []
    }

    func addPending(_ id: UUID) throws {
        var ids = try pendingRedemptions()
        guard !ids.contains(id) else { return }
        ids.append(id)
        try configuration.tokenStore.setData(try JSONEncoder().encode(ids), forKey: Self.pendingKey)
    }

    func removePending(_ id: UUID) throws {
        let ids = try pendingRedemptions()
        guard ids.contains(id) else { return }
        let rest = ids.filter { $0 != id }
        try configuration.tokenStore.setData(rest.isEmpty ? nil : try JSONEncoder().encode(rest), forKey: Self.pendingKey)
    }
}

func pageQuery(limit: Int?, cursor: String?) -> [URLQueryItem] {
    var items: [URLQueryItem] = []
    if let limit { items.append(URLQueryItem(name: "limit", value: String(limit))) }
    if let cursor { items.append(URLQueryItem(name: "cursor", value: cursor)) }
    return items
}
