import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client an app uses to talk to a Redeem gateway as its signed-in user: sessions, coupons,
/// completion, entitlements and the store hand-off.
///
/// ```swift
/// let redeem = RedeemClient(baseURL: URL(string: "https://redeem.example.com")!)
/// try await redeem.signIn(email: "pilot@example.com", password: "correct horse battery")
/// let check = try await redeem.validateCoupon("SPRING-25")
/// guard check.valid else { return show(check.error!.localizedDescription) }
/// let outcome = try await redeem.redeemCoupon("SPRING-25")
/// if case .redeemed(let redemption, _) = outcome,
///    case .completed(let entitlements, _) = try await redeem.awaitCouponCompletion(redemptionId: redemption.id) {
///     unlock(entitlements)
/// }
/// ```
///
/// Every call is `async throws`, honours task cancellation and gives up after its timeout. The
/// session lives in the `TokenStore`, so a relaunch stays signed in; an expired access token is
/// refreshed once however many calls find it expired at the same time.
public actor RedeemClient {
    /// Which coupons a user reaches: `production` (the default) the live ones, `sandbox` the test
    /// ones (TestFlight, debug builds). Sandbox redemptions never count toward caps.
    public enum Environment: String, Codable, Sendable {
        /// The live world.
        case production
        /// The test world.
        case sandbox
    }

    /// How a client is set up.
    public struct Configuration: Sendable {
        /// The gateway's base URL, such as `https://redeem.example.com`.
        public var baseURL: URL
        /// Where the session and pending redemptions are kept.
        public var tokenStore: any TokenStore
        /// The platform sent with validate and redeem.
        public var platform: Platform
        /// Production or sandbox.
        public var environment: Environment
        /// Seconds a call may take before it throws `RedeemError` with kind `.timedOut`.
        public var timeout: TimeInterval
        /// An access token expiring within this many seconds is refreshed before it is used.
        public var refreshMargin: TimeInterval
        /// The URL session calls go through.
        public var urlSession: URLSession
        /// Proves the record names the client sends (`CloudKitWebAuthTokens` on Apple platforms);
        /// nil sends record names without proof, which only a server trusting clients takes.
        public var cloudKit: (any CloudKitIdentityProvider)?
        /// Where `start()` takes store transactions from: StoreKit on Apple platforms, none elsewhere.
        public var storeTransactions: (any StoreTransactionSource)?
        /// When the purchase listener posts again after a failure that may pass.
        public var purchaseRetry: PurchaseRetryPolicy
        /// Opens Apple's offer-code page, or its sheet: the system's on iOS and macOS, none elsewhere.
        public var offerCodePage: (any OfferCodePage)?
        /// The app's id in a deployment that serves several apps, sent as `Redeem-App` with every
        /// call; nil (the default) for the deployment's default app.
        public var appId: String?

        /// A configuration; by default the Keychain (Apple) or memory (elsewhere), this device's
        /// platform, production, 30 s calls, and on Apple platforms StoreKit and the system's
        /// offer-code page.
        public init(
            baseURL: URL, tokenStore: any TokenStore = defaultTokenStore(), platform: Platform = .current,
            environment: Environment = .production, timeout: TimeInterval = 30, refreshMargin: TimeInterval = 30,
            urlSession: URLSession = .shared, cloudKit: (any CloudKitIdentityProvider)? = nil,
            storeTransactions: (any StoreTransactionSource)? = defaultStoreTransactions(),
            purchaseRetry: PurchaseRetryPolicy = PurchaseRetryPolicy(),
            offerCodePage: (any OfferCodePage)? = defaultOfferCodePage(), appId: String? = nil
        ) {
            self.baseURL = baseURL
            self.appId = appId
            self.cloudKit = cloudKit
            self.storeTransactions = storeTransactions
            self.purchaseRetry = purchaseRetry
            self.offerCodePage = offerCodePage
            self.tokenStore = tokenStore
            self.platform = platform
            self.environment = environment
            self.timeout = timeout
            self.refreshMargin = refreshMargin
            self.urlSession = urlSession
        }
    }

    /// What is kept in the token store under `sessionKey`.
    struct StoredSession: Codable, Sendable, Equatable {
        var account: Account
        var session: SessionTokens
    }

    static let sessionKey = "redeemkit.session"
    static let pendingKey = "redeemkit.pendingRedemptions"

    /// The configuration the client was made with.
    public nonisolated let configuration: Configuration
    let transport: Transport
    var stored: StoredSession?
    private var loaded = false
    private var refreshTask: Task<StoredSession, any Error>?
    var cachedEntitlements: [Entitlement]?
    /// Only the latest entitlements matter to a consumer that fell behind.
    nonisolated let broadcaster = Broadcaster<[Entitlement]>(buffer: 1)
    /// Every purchase outcome matters: a consumer that fell behind gets the last 64.
    nonisolated let purchases = Broadcaster<StorePurchaseOutcome>(buffer: 64)
    /// The purchase listener `start()` runs.
    var purchaseListener: Task<Void, Never>?

    /// A client with `configuration`.
    public init(configuration: Configuration) {
        self.configuration = configuration
        transport = Transport(
            baseURL: configuration.baseURL, session: configuration.urlSession, timeout: configuration.timeout,
            app: configuration.appId)
    }

    /// A client of the gateway at `baseURL`, keeping its session in `tokenStore`.
    public init(baseURL: URL, tokenStore: any TokenStore = defaultTokenStore()) {
        self.init(configuration: Configuration(baseURL: baseURL, tokenStore: tokenStore))
    }

    // MARK: - Sessions

    /// The signed-in account, from the token store (no request); nil for a guest.
    public var account: Account? {
        get throws { try currentSession()?.account }
    }

    /// Whether someone is signed in (a session is stored; it may still be refused later).
    public var isSignedIn: Bool {
        get throws { try currentSession() != nil }
    }

    /// Creates an account (`POST /v1/accounts`) and signs in to it. From iOS, pass the CloudKit
    /// user record name: it becomes the account's `appUserId`, where existing purchases sit. The
    /// configuration's `cloudKit` provider proves it with a new web auth token.
    @discardableResult
    public func signUp(email: String, password: String, cloudkitRecordName: String? = nil) async throws -> Account {
        struct Body: Encodable { var email: String; var password: String; var cloudkitRecordName: String?; var cloudkitWebAuthToken: String? }
        let proof = try await webAuthToken(for: cloudkitRecordName)
        return try await authenticate(try APIRequest("POST", "/v1/accounts", json: Body(email: email, password: password,
                                                                                       cloudkitRecordName: cloudkitRecordName,
                                                                                       cloudkitWebAuthToken: proof)))
    }

    /// Signs in with email and password (`POST /v1/sessions`).
    @discardableResult
    public func signIn(email: String, password: String) async throws -> Account {
        struct Body: Encodable { var email: String; var password: String }
        return try await authenticate(try APIRequest("POST", "/v1/sessions", json: Body(email: email, password: password)))
    }

    /// Signs in with Apple's identity token (`POST /v1/sessions/apple`), creating the account on
    /// the first sign-in. The record name, when given, is linked as `linkCloudKit` does.
    @discardableResult
    public func signInWithApple(identityToken: String, cloudkitRecordName: String? = nil) async throws -> Account {
        struct Body: Encodable { var identityToken: String; var cloudkitRecordName: String?; var cloudkitWebAuthToken: String? }
        let proof = try await webAuthToken(for: cloudkitRecordName)
        return try await authenticate(try APIRequest("POST", "/v1/sessions/apple", json: Body(identityToken: identityToken,
                                                                                             cloudkitRecordName: cloudkitRecordName,
                                                                                             cloudkitWebAuthToken: proof)))
    }

    /// Links this device's CloudKit user record name (`POST /v1/me/cloudkit`), proven with a new web
    /// auth token from the configuration's `cloudKit` provider. When the account's
    /// `appUserId` changes, the session is refreshed so its tokens carry the new id, and the
    /// entitlements are read again (`entitlementUpdates` yields them).
    @discardableResult
    public func linkCloudKit(recordName: String) async throws -> CloudKitLink {
        struct Body: Encodable { var recordName: String; var cloudkitWebAuthToken: String? }
        let proof = try await webAuthToken(for: recordName)
        let link = try await authorized(try APIRequest("POST", "/v1/me/cloudkit", json: Body(recordName: recordName, cloudkitWebAuthToken: proof)))
            .decode(CloudKitLink.self)
        if var current = try currentSession(), current.account.appUserId != link.appUserId {
            current.account.appUserId = link.appUserId
            try save(current)
            _ = try await refreshed(after: current.session.accessToken, force: true)
        }
        _ = try? await entitlements()
        return link
    }

    /// Signs out: the server revokes the session (best effort: a failure there still signs out
    /// here) and the token store forgets it and the pending redemptions.
    public func signOut() async {
        if let current = try? currentSession() {
            _ = try? await transport.send(APIRequest("DELETE", "/v1/sessions/current"), token: current.session.accessToken)
        }
        forget()
    }

    /// Deletes the account (`DELETE /v1/me`: sessions revoked, identities removed, redemptions
    /// kept anonymised), then signs out here. Throws, and keeps the session, if the server refused.
    public func deleteAccount() async throws {
        _ = try await authorized(APIRequest("DELETE", "/v1/me"))
        forget()
    }

    /// The account as the server has it now (`GET /v1/me`); the stored copy is updated.
    public func me() async throws -> Account {
        let account = try await authorized(APIRequest("GET", "/v1/me")).decode(Account.self)
        if var current = try currentSession() {
            current.account = account
            try save(current)
        }
        return account
    }

    /// Rotates the session now (`POST /v1/sessions/refresh`), as calls do by themselves when the
    /// access token is about to expire.
    public func refreshSession() async throws {
        guard let current = try currentSession() else { throw RedeemError.notSignedIn }
        _ = try await refreshed(after: current.session.accessToken, force: true)
    }

    // MARK: - The session and its refresh

    func currentSession() throws -> StoredSession? {
        if !loaded {
            loaded = true
            if let data = try configuration.tokenStore.data(forKey: Self.sessionKey) {
                stored = try? JSONCoding.decoder.decode(StoredSession.self, from: data)
            }
        }
        return stored
    }

    func save(_ session: StoredSession) throws {
        stored = session
        loaded = true
        try configuration.tokenStore.setData(try JSONCoding.encoder.encode(session), forKey: Self.sessionKey)
    }

    private func forget() {
        stored = nil
        loaded = true
        refreshTask = nil
        cachedEntitlements = nil
        try? configuration.tokenStore.setData(nil, forKey: Self.sessionKey)
        try? configuration.tokenStore.setData(nil, forKey: Self.pendingKey)
        broadcaster.yield([])
    }

    func authenticate(_ request: APIRequest) async throws -> Account {
        let result = try await transport.send(request, token: nil).decode(AuthResult.self)
        try save(StoredSession(account: result.account, session: result.session))
        cachedEntitlements = nil
        return result.account
    }

    /// Sends `request` with the user's access token: refreshed first when it is about to expire,
    /// and once more, with one retry of the request, when the server calls it invalid.
    func authorized(_ request: APIRequest) async throws -> APIResponse {
        guard var current = try currentSession() else { throw RedeemError.notSignedIn }
        if current.session.expiresAt.timeIntervalSinceNow < configuration.refreshMargin {
            current = try await refreshed(after: current.session.accessToken, force: false)
        }
        do {
            return try await transport.send(request, token: current.session.accessToken)
        } catch let e as RedeemError where e.status == 401 && e.code == .invalidToken {
            let fresh = try await refreshed(after: current.session.accessToken, force: false)
            return try await transport.send(request, token: fresh.session.accessToken)
        }
    }

    /// A session newer than the one whose access token was `used`. Single-flight: while a refresh
    /// runs, every caller waits for it; a caller that comes after it finished takes its result.
    func refreshed(after used: String, force: Bool) async throws -> StoredSession {
        if let running = refreshTask { return try await running.value }
        guard let current = try currentSession() else { throw RedeemError.notSignedIn }
        if !force, current.session.accessToken != used, current.session.expiresAt.timeIntervalSinceNow >= configuration.refreshMargin {
            return current
        }
        let task = Task { try await self.rotate(current) }
        refreshTask = task
        defer { if refreshTask == task { refreshTask = nil } }
        return try await task.value
    }

    /// One refresh. A lost answer is retried with the same refresh token: within the server's
    /// grace window it answers the very pair it sent before. A refused token signs out.
    private func rotate(_ current: StoredSession) async throws -> StoredSession {
        struct Body: Encodable { var refreshToken: String }
        let request = try APIRequest("POST", "/v1/sessions/refresh", json: Body(refreshToken: current.session.refreshToken))
        var attempt = 0
        while true {
            attempt += 1
            do {
                let result = try await transport.send(request, token: nil).decode(AuthResult.self)
                let next = StoredSession(account: result.account, session: result.session)
                // A sign-out or another sign-in while the refresh ran wins.
                if stored?.session.refreshToken == current.session.refreshToken { try save(next) }
                return next
            } catch let e as RedeemError where e.kind == .transport || e.kind == .timedOut || (e.status ?? 0) >= 500 {
                guard attempt < 3 else { throw e }
                try await Task.sleep(nanoseconds: UInt64(attempt) * 200_000_000)
            } catch let e as RedeemError where e.status == 401 {
                if stored?.session.refreshToken == current.session.refreshToken { forget() }
                throw e
            }
        }
    }
}

extension Platform {
    /// The platform this code runs on, as the server counts it: `ios` on iOS, iPadOS, visionOS and
    /// macOS (a Mac app sells through the App Store, and universal purchase shares its plans and
    /// offer codes with the iPhone app), `android` on Android, `web` elsewhere.
    public static var current: Platform { platform(ofOperatingSystem: operatingSystem) }

    /// The operating system this was compiled for, by the name `#if os(…)` gives it.
    static var operatingSystem: String {
        #if os(iOS)
        "iOS"
        #elseif os(macOS)
        "macOS"
        #elseif os(visionOS)
        "visionOS"
        #elseif os(tvOS)
        "tvOS"
        #elseif os(watchOS)
        "watchOS"
        #elseif os(Android)
        "Android"
        #else
        "other"
        #endif
    }

    /// Every Apple system is the App Store's: `ios`.
    static func platform(ofOperatingSystem name: String) -> Platform {
        switch name {
        case "iOS", "macOS", "visionOS", "tvOS", "watchOS": .ios
        case "Android": .android
        default: .web
        }
    }
}
