import Foundation

// Requests the accounts service answers (gateway → accounts) and the events it publishes.

/// An account as clients see it (`GET /v1/me`).
public struct AccountView: Codable, Sendable, Equatable {
    public struct Identity: Codable, Sendable, Equatable {
        /// `email`, `apple` or `cloudkit`.
        public var type: String
        public var email: String?
        public var recordName: String?
        public init(type: String, email: String? = nil, recordName: String? = nil) {
            self.type = type
            self.email = email
            self.recordName = recordName
        }
    }
    public var id: UUID
    public var email: String?
    /// The email was proven: its owner followed a verification or reset mail, or Apple said so.
    public var emailVerified: Bool
    public var appUserId: String
    public var identities: [Identity]
    public var createdAt: Date
    public init(id: UUID, email: String?, emailVerified: Bool = false, appUserId: String, identities: [Identity], createdAt: Date) {
        self.id = id
        self.email = email
        self.emailVerified = emailVerified
        self.appUserId = appUserId
        self.identities = identities
        self.createdAt = createdAt
    }

    private enum CodingKeys: String, CodingKey { case id, email, emailVerified, appUserId, identities, createdAt }

    /// `emailVerified` left out (an accounts service of an earlier version) reads as false.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(UUID.self, forKey: .id)
        email = try c.decodeIfPresent(String.self, forKey: .email)
        emailVerified = try c.decodeIfPresent(Bool.self, forKey: .emailVerified) ?? false
        appUserId = try c.decode(String.self, forKey: .appUserId)
        identities = try c.decode([Identity].self, forKey: .identities)
        createdAt = try c.decode(Date.self, forKey: .createdAt)
    }
}

/// `session` of `{account, session}` (docs/api.md). `expiresAt` is the access token's expiry.
public struct SessionTokens: Codable, Sendable {
    public var accessToken: String
    public var refreshToken: String
    public var expiresAt: Date
    public init(accessToken: String, refreshToken: String, expiresAt: Date) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
    }
}

/// The answer to sign-up, sign-in and refresh. `created` tells 201 from 200.
public struct AuthResult: Codable, Sendable {
    public var account: AccountView
    public var session: SessionTokens
    public var created: Bool
    public init(account: AccountView, session: SessionTokens, created: Bool) {
        self.account = account
        self.session = session
        self.created = created
    }
}

public enum Accounts {
    public struct SignUp: BusRequest {
        public static let type = "accounts.signUp"
        public typealias Response = AuthResult
        public var email: String
        public var password: String
        public var cloudkitRecordName: String?
        /// The CloudKit web auth token that proves `cloudkitRecordName` is the sender's.
        public var cloudkitWebAuthToken: String?
        public init(email: String, password: String, cloudkitRecordName: String?, cloudkitWebAuthToken: String? = nil) {
            self.email = email
            self.password = password
            self.cloudkitRecordName = cloudkitRecordName
            self.cloudkitWebAuthToken = cloudkitWebAuthToken
        }
    }

    public struct SignIn: BusRequest {
        public static let type = "accounts.signIn"
        public typealias Response = AuthResult
        public var email: String
        public var password: String
        /// A member's second factor: a TOTP code or a recovery code (401 `totpRequired` without
        /// one when the member has TOTP on).
        public var totpCode: String?
        public init(email: String, password: String, totpCode: String? = nil) {
            self.email = email
            self.password = password
            self.totpCode = totpCode
        }
    }

    public struct SignInWithApple: BusRequest {
        public static let type = "accounts.signInWithApple"
        public typealias Response = AuthResult
        public var identityToken: String
        public var cloudkitRecordName: String?
        /// The CloudKit web auth token that proves `cloudkitRecordName` is the sender's.
        public var cloudkitWebAuthToken: String?
        public init(identityToken: String, cloudkitRecordName: String?, cloudkitWebAuthToken: String? = nil) {
            self.identityToken = identityToken
            self.cloudkitRecordName = cloudkitRecordName
            self.cloudkitWebAuthToken = cloudkitWebAuthToken
        }
    }

    public struct Refresh: BusRequest {
        public static let type = "accounts.refresh"
        public typealias Response = AuthResult
        public var refreshToken: String
        public init(refreshToken: String) { self.refreshToken = refreshToken }
    }

    public struct SignOut: BusRequest {
        public static let type = "accounts.signOut"
        public typealias Response = Empty
        public var sessionId: UUID
        public init(sessionId: UUID) { self.sessionId = sessionId }
    }

    public struct Me: BusRequest {
        public static let type = "accounts.me"
        public typealias Response = AccountView
        public var accountId: UUID
        public init(accountId: UUID) { self.accountId = accountId }
    }

    /// An operator looks an end user's account up (`GET /v1/customers`): by an id it holds (its
    /// appUserId, one it held before, or a linked record name) or by its email (any case). Deleted
    /// accounts are never found; at most `limit` accounts, newest first.
    public struct Customers: BusRequest {
        public static let type = "accounts.customers"
        public struct Response: Codable, Sendable {
            public var data: [AccountView]
            public init(data: [AccountView]) { self.data = data }
        }
        public static let limit = 20
        public var appUserId: String?
        public var email: String?
        public init(appUserId: String? = nil, email: String? = nil) {
            self.appUserId = appUserId
            self.email = email
        }
    }

    public struct LinkCloudKit: BusRequest {
        public static let type = "accounts.linkCloudKit"
        /// The id the apps log in with now, whether this call changed it, and if not, why.
        public struct Response: Codable, Sendable, Equatable {
            public var appUserId: String
            public var changed: Bool
            /// The id the account had before, when `changed`.
            public var previousAppUserId: String?
            /// Why the id stayed, when not `changed`.
            public var keptBecause: AppUserIdKept?
            public init(appUserId: String, changed: Bool, previousAppUserId: String? = nil, keptBecause: AppUserIdKept? = nil) {
                self.appUserId = appUserId
                self.changed = changed
                self.previousAppUserId = previousAppUserId
                self.keptBecause = keptBecause
            }
        }
        public var accountId: UUID
        public var recordName: String
        /// The CloudKit web auth token that proves `recordName` is the sender's.
        public var cloudkitWebAuthToken: String?
        /// The session asking: with an unproven email, its password must be fresh.
        public var sessionId: UUID?
        public init(accountId: UUID, recordName: String, cloudkitWebAuthToken: String? = nil, sessionId: UUID? = nil) {
            self.accountId = accountId
            self.recordName = recordName
            self.cloudkitWebAuthToken = cloudkitWebAuthToken
            self.sessionId = sessionId
        }
    }

    /// The public keys access tokens are verified with, by key id.
    public struct SigningKeys: BusRequest {
        public static let type = "accounts.signingKeys"
        public struct Key: Codable, Sendable {
            public var kid: String
            /// The JWT algorithm the key signs with: `RS256`, or `EdDSA` for keys of earlier versions.
            public var alg: String
            /// The public key as DER (SubjectPublicKeyInfo), base64url.
            public var publicKey: String
            public init(kid: String, alg: String, publicKey: String) {
                self.kid = kid
                self.alg = alg
                self.publicKey = publicKey
            }
        }
        public struct Response: Codable, Sendable {
            public var keys: [Key]
            public init(keys: [Key]) { self.keys = keys }
        }
        public init() {}
    }

    /// Sessions revoked since a moment, whose access tokens may still be unexpired.
    public struct Revocations: BusRequest {
        public static let type = "accounts.revocations"
        public struct Response: Codable, Sendable {
            public var revoked: [SessionRevoked]
            /// The server's clock at the time of the answer (the next `since`).
            public var asOf: Date
            public init(revoked: [SessionRevoked], asOf: Date) {
                self.revoked = revoked
                self.asOf = asOf
            }
        }
        public var since: Date
        public init(since: Date) { self.since = since }
    }
}

/// Published when a session is revoked: its access tokens stop working until `until` (their
/// latest possible expiry), after which they are expired anyway.
public struct SessionRevoked: BusEvent, Equatable {
    public static let topic = "session.revoked"
    public var sessionId: UUID
    public var until: Date
    public init(sessionId: UUID, until: Date) {
        self.sessionId = sessionId
        self.until = until
    }
}

// MARK: - API keys

public enum Role: String, Codable, Sendable, CaseIterable, Comparable {
    case readonly, support, admin
    var rank: Int { Role.allCases.firstIndex(of: self)! }
    public static func < (a: Role, b: Role) -> Bool { a.rank < b.rank }
}

/// Test mode and live mode are two worlds, as in Stripe: every coupon, redemption,
/// export and webhook belongs to one mode, and a key sees and changes only its own mode's. API keys
/// are the one exception: a live key manages keys of both modes (how an operator gets test keys),
/// a test key only test keys.
public enum Mode: String, Codable, Sendable, CaseIterable {
    case live, test

    /// Whether a key of this mode may make, list and revoke keys of mode `key`.
    public func managesKeys(of key: Mode) -> Bool { self == .live || key == self }

    /// The mode of an operator request: nil when the request comes from a gateway of an earlier
    /// version, which did not send one; read as live, the mode of the bootstrap admin key.
    public static func of(_ request: Mode?) -> Mode { request ?? .live }
}

/// An API key as listed: never the secret.
public struct APIKeyView: Codable, Sendable, Equatable {
    public var id: UUID
    public var prefix: String
    public var name: String
    public var role: Role
    public var mode: Mode
    public var createdAt: Date
    public var lastUsedAt: Date?
    /// `lastUsedAt` is written as null for a key never used, not left out.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(prefix, forKey: .prefix)
        try c.encode(name, forKey: .name)
        try c.encode(role, forKey: .role)
        try c.encode(mode, forKey: .mode)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(lastUsedAt, forKey: .lastUsedAt)
    }

    private enum CodingKeys: String, CodingKey { case id, prefix, name, role, mode, createdAt, lastUsedAt }

    public init(id: UUID, prefix: String, name: String, role: Role, mode: Mode, createdAt: Date, lastUsedAt: Date?) {
        self.id = id
        self.prefix = prefix
        self.name = name
        self.role = role
        self.mode = mode
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }
}

public enum APIKeys {
    public struct Create: BusRequest {
        public static let type = "apiKeys.create"
        /// Who asks, for the audit log (nil from a gateway of an earlier version).
        public var actor: AuditActor? = nil
        public struct Response: Codable, Sendable {
            public var apiKey: APIKeyView
            /// The secret, shown this once.
            public var key: String
            public init(apiKey: APIKeyView, key: String) {
                self.apiKey = apiKey
                self.key = key
            }
        }
        public var name: String
        public var role: Role
        /// nil: the mode of the key making it.
        public var mode: Mode?
        /// The mode of the key making it (`Mode.of`): a test key makes test keys only.
        public var callerMode: Mode?
        /// The app the key works in, the caller's (`DefaultApp.of`).
        public var app: UUID?
        public init(name: String, role: Role, mode: Mode?, callerMode: Mode, app: UUID) {
            self.name = name
            self.role = role
            self.mode = mode
            self.callerMode = callerMode
            self.app = app
        }
    }

    /// The unrevoked keys, newest first, a page at a time (`Keyset`).
    public struct List: BusRequest {
        public static let type = "apiKeys.list"
        public typealias Response = Page<APIKeyView>
        /// nil (a caller from before pages): the default page size.
        public var limit: Int?
        public var cursor: String?
        /// The mode of the key asking (`Mode.of`): a test key lists test keys only.
        public var callerMode: Mode?
        /// The app asked about (`DefaultApp.of`): only its keys are listed.
        public var app: UUID?
        public init(limit: Int, cursor: String?, callerMode: Mode, app: UUID) {
            self.limit = limit
            self.cursor = cursor
            self.callerMode = callerMode
            self.app = app
        }
    }

    /// Revokes a key; `notFound` also for a key the caller's mode does not manage.
    public struct Revoke: BusRequest {
        public static let type = "apiKeys.revoke"
        /// Who asks, for the audit log (nil from a gateway of an earlier version).
        public var actor: AuditActor? = nil
        public typealias Response = Empty
        public var id: UUID
        /// The mode of the key asking (`Mode.of`).
        public var callerMode: Mode?
        /// The app asked about (`DefaultApp.of`): another app's key is `notFound`.
        public var app: UUID?
        public init(id: UUID, callerMode: Mode, app: UUID) {
            self.id = id
            self.callerMode = callerMode
            self.app = app
        }
    }

    /// Resolves a secret key, by its SHA-256 (hex; the secret itself never crosses the bus), to
    /// its role and mode; `invalidToken` for an unknown or revoked one.
    public struct Authenticate: BusRequest {
        public static let type = "apiKeys.authenticate"
        public struct Response: Codable, Sendable {
            public var id: UUID
            public var role: Role
            public var mode: Mode
            /// The app the key works in (`DefaultApp.of`: nil from an accounts of an earlier version).
            public var app: UUID?
            public init(id: UUID, role: Role, mode: Mode, app: UUID) {
                self.id = id
                self.role = role
                self.mode = mode
                self.app = app
            }
        }
        public var keyHash: String
        public init(keyHash: String) { self.keyHash = keyHash }
    }
}

/// Published when an API key is revoked, so gateways drop it from their caches at once.
public struct APIKeyRevoked: BusEvent {
    public static let topic = "apiKey.revoked"
    public var id: UUID
    public init(id: UUID) { self.id = id }
}
