import Foundation

/// A member: an operator account with a role in an app (`admin`, `support`, `readonly`, as keys
/// have), which signs in with its email and password and reaches the operator routes as a key of
/// its role there. A view is of one app: `role` is the member's role in it.
public struct MemberView: Codable, Sendable, Equatable {
    /// The member's account id.
    public var id: UUID
    public var email: String
    public var role: Role
    public var createdAt: Date
    /// Whether the member signs in with TOTP (two-step verification).
    public var totpEnabled: Bool
    public init(id: UUID, email: String, role: Role, createdAt: Date, totpEnabled: Bool = false) {
        self.id = id
        self.email = email
        self.role = role
        self.createdAt = createdAt
        self.totpEnabled = totpEnabled
    }
}

/// An invitation to become a member, as made: never its token (the answer to the invite carries
/// that, once).
public struct MemberInviteView: Codable, Sendable, Equatable {
    public var id: UUID
    public var email: String
    public var role: Role
    public var createdAt: Date
    public var expiresAt: Date
    public init(id: UUID, email: String, role: Role, createdAt: Date, expiresAt: Date) {
        self.id = id
        self.email = email
        self.role = role
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

public enum Members {
    /// An invitation for `email` with `role`: its one-time token, shown once.
    public struct Invite: AuditedRequest {
        public static let type = "members.invite"
        public struct Response: Codable, Sendable {
            public var invite: MemberInviteView
            public var token: String
            /// Whether the invitation was written to the mail outbox (accounts sends mail).
            public var mailed: Bool?
            public init(invite: MemberInviteView, token: String, mailed: Bool? = nil) {
                self.invite = invite
                self.token = token
                self.mailed = mailed
            }
        }
        public var email: String
        public var role: Role
        public var mode: Mode
        /// The dashboard's address that the invitation's token is appended to (`…#invite=`), for
        /// the mail; nil mails nothing.
        public var dashboardUrl: String?
        /// The app the invitation gives a role in (nil: the default app).
        public var app: UUID?
        public var actor: AuditActor?
        public init(email: String, role: Role, mode: Mode, dashboardUrl: String? = nil, app: UUID? = nil) {
            self.email = email
            self.role = role
            self.mode = mode
            self.dashboardUrl = dashboardUrl
            self.app = app
        }
    }

    /// Accepts an invitation: a new account with `password`, or the existing account of the
    /// invited email when `password` is its password. Signs the member in.
    public struct Accept: BusRequest {
        public static let type = "members.accept"
        public typealias Response = AuthResult
        public var token: String
        public var password: String
        public init(token: String, password: String) {
            self.token = token
            self.password = password
        }
    }

    /// The members of one app (nil: the default app), each with their role there, newest first.
    public struct List: BusRequest {
        public static let type = "members.list"
        public typealias Response = Page<MemberView>
        public var limit: Int
        public var cursor: String?
        public var app: UUID?
        public init(limit: Int, cursor: String?, app: UUID? = nil) {
            self.limit = limit
            self.cursor = cursor
            self.app = app
        }
    }

    /// A new role in one app (nil: the default app), whose members only it changes; the
    /// member's sessions end, so the next sign-in carries it.
    public struct Update: AuditedRequest {
        public static let type = "members.update"
        public typealias Response = MemberView
        public var id: UUID
        public var role: Role
        public var mode: Mode
        public var app: UUID?
        public var actor: AuditActor?
        public init(id: UUID, role: Role, mode: Mode, app: UUID? = nil) {
            self.id = id
            self.role = role
            self.mode = mode
            self.app = app
        }
    }

    /// Ends the member's role in one app (nil: the default app), and their sessions. Out of
    /// their last app, the account stays (as an end user's) and is no member.
    public struct Remove: AuditedRequest {
        public static let type = "members.remove"
        public typealias Response = Empty
        public var id: UUID
        public var mode: Mode
        public var app: UUID?
        public var actor: AuditActor?
        public init(id: UUID, mode: Mode, app: UUID? = nil) {
            self.id = id
            self.mode = mode
            self.app = app
        }
    }

    /// A member's role in `app` as the session `session` carries it (nil: none), for the
    /// gateway: the second factor applies as at sign-in.
    public struct AppRole: BusRequest {
        public static let type = "members.appRole"
        public struct Response: Codable, Sendable {
            public var role: Role?
            public init(role: Role?) { self.role = role }
        }
        public var account: UUID
        public var session: UUID
        public var app: UUID
        public init(account: UUID, session: UUID, app: UUID) {
            self.account = account
            self.session = session
            self.app = app
        }
    }

    /// Invitations not yet accepted, revoked or expired, newest first (never their tokens).
    public struct ListInvites: BusRequest {
        public static let type = "members.listInvites"
        public typealias Response = Page<MemberInviteView>
        public var limit: Int
        public var cursor: String?
        /// One app's invitations (nil: the default app's).
        public var app: UUID?
        public init(limit: Int, cursor: String?, app: UUID? = nil) {
            self.limit = limit
            self.cursor = cursor
            self.app = app
        }
    }

    /// Revokes a pending invitation of one app (nil: the default app): its token no longer makes
    /// a member.
    public struct RevokeInvite: AuditedRequest {
        public static let type = "members.revokeInvite"
        public typealias Response = Empty
        public var id: UUID
        public var mode: Mode
        public var app: UUID?
        public var actor: AuditActor?
        public init(id: UUID, mode: Mode, app: UUID? = nil) {
            self.id = id
            self.mode = mode
            self.app = app
        }
    }

    /// A new TOTP secret for the signed-in member, waiting for its first code: the secret in
    /// base32 and the `otpauth://` URI an authenticator app reads (shown this once).
    public struct StartTOTP: BusRequest {
        public static let type = "members.startTotp"
        public typealias Response = TOTPSetup
        public var accountId: UUID
        public init(accountId: UUID) { self.accountId = accountId }
    }

    public struct TOTPSetup: Codable, Sendable, Equatable {
        public var secret: String
        public var uri: String
        public init(secret: String, uri: String) {
            self.secret = secret
            self.uri = uri
        }
    }

    /// Turns TOTP on with a first code; answers the recovery codes (shown this once). The
    /// member's sessions end: the next sign-in gives a code.
    public struct ConfirmTOTP: BusRequest {
        public static let type = "members.confirmTotp"
        public struct Response: Codable, Sendable {
            public var recoveryCodes: [String]
            public init(recoveryCodes: [String]) { self.recoveryCodes = recoveryCodes }
        }
        public var accountId: UUID
        public var code: String
        public init(accountId: UUID, code: String) {
            self.accountId = accountId
            self.code = code
        }
    }

    /// Turns TOTP off, with a current code or a recovery code.
    public struct DisableTOTP: BusRequest {
        public static let type = "members.disableTotp"
        public typealias Response = Empty
        public var accountId: UUID
        public var code: String
        public init(accountId: UUID, code: String) {
            self.accountId = accountId
            self.code = code
        }
    }

    /// What applies to every member.
    public struct Settings: Codable, Sendable, Equatable {
        /// Every member must have TOTP: a member without it signs in as an end user (no role)
        /// until they turn it on.
        public var requireTotp: Bool
        public init(requireTotp: Bool) { self.requireTotp = requireTotp }
    }

    public struct GetSettings: BusRequest {
        public static let type = "members.getSettings"
        public typealias Response = Settings
        public init() {}
    }

    /// Changes the settings; requiring TOTP ends the sessions members opened without it.
    public struct SetSettings: AuditedRequest {
        public static let type = "members.setSettings"
        public typealias Response = Settings
        public var requireTotp: Bool
        public var mode: Mode
        public var actor: AuditActor?
        public init(requireTotp: Bool, mode: Mode) {
            self.requireTotp = requireTotp
            self.mode = mode
        }
    }
}

